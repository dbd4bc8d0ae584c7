"""Options of the training recipe, shared by ``train`` and ``audit``."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ModelOpt = Annotated[str, typer.Option("--model", help="Architecture: mlp (one hidden layer), cnn (ML-Leaks CNN) or cnn-improved (BatchNorm/GroupNorm + dropout).")]
DatasetOpt = Annotated[str, typer.Option("--dataset", help="cifar10 (needs the data, see --data-dir) or digits (scikit-learn's bundled 8x8 digits, no download).")]
WidthOpt = Annotated[int, typer.Option("--width", help="Hidden units of the mlp's one hidden layer.")]
PartSizeOpt = Annotated[Optional[int], typer.Option("--part-size", help="Size of each of the four ML-Leaks parts (target/shadow members/non-members); default 10520 for cifar10, 449 for digits.")]
MaxGradNormOpt = Annotated[float, typer.Option("--max-grad-norm", help="DP-SGD per-sample clipping norm C.")]
DeltaOpt = Annotated[float, typer.Option("--delta", help="DP-SGD delta at which epsilon is computed and calibrated.")]
EpochsOpt = Annotated[Optional[int], typer.Option("--epochs", help="Training epochs; default 50 for cifar10, 60 for digits.")]
BatchSizeOpt = Annotated[Optional[int], typer.Option("--batch-size", help="Batch size (expected Poisson batch size under DP-SGD); default 100 for cifar10, 64 for digits.")]
LrOpt = Annotated[float, typer.Option("--lr", help="Adam learning rate.")]
WeightDecayOpt = Annotated[Optional[float], typer.Option("--weight-decay", help="Adam weight decay; default 1e-7, or 1e-5 for cnn-improved.")]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="fp32, or bf16 for bfloat16 mixed-precision training of non-private models (DP-SGD always trains in fp32).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Root seed of the data split, initialisation, shuffling, masks and DP noise.")]
