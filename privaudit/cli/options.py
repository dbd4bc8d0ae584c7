"""Options of the training recipe, shared by ``train`` and ``audit``."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ModelOpt = Annotated[str, typer.Option("--model", help="Architecture: mlp (one hidden layer), cnn (ML-Leaks CNN), cnn-improved (BatchNorm/GroupNorm + dropout) or convex-relu (convex two-layer ReLU approximation, trained by cyclic gradient descent).")]
DatasetOpt = Annotated[str, typer.Option("--dataset", help="cifar10 (needs the data, see --data-dir) or digits (scikit-learn's bundled 8x8 digits, no download).")]
WidthOpt = Annotated[Optional[int], typer.Option("--width", help="Hidden units of the mlp's one hidden layer (default 512), or convex-relu's number of gate vectors (default 100).")]
PartSizeOpt = Annotated[Optional[int], typer.Option("--part-size", help="Size of each of the four ML-Leaks parts (target/shadow members/non-members); default 10520 for cifar10, 449 for digits.")]
MaxGradNormOpt = Annotated[float, typer.Option("--max-grad-norm", help="DP-SGD per-sample clipping norm C.")]
DeltaOpt = Annotated[float, typer.Option("--delta", help="DP-SGD delta at which epsilon is computed and calibrated.")]
EpochsOpt = Annotated[Optional[int], typer.Option("--epochs", help="Training epochs; default 50 for cifar10, 60 for digits.")]
BatchSizeOpt = Annotated[Optional[int], typer.Option("--batch-size", help="Batch size (expected Poisson batch size under DP-SGD); default 100 for cifar10, 64 for digits.")]
LrOpt = Annotated[Optional[float], typer.Option("--lr", help="Adam learning rate (default 1e-3), or convex-relu's gradient-descent step (default 3.1e-4).")]
WeightDecayOpt = Annotated[Optional[float], typer.Option("--weight-decay", "--l2", help="Adam weight decay (default 1e-7, 1e-5 for cnn-improved), or convex-relu's L2 coefficient lambda (default 0.174).")]
DefenseOpt = Annotated[Optional[str], typer.Option("--defense", "--defence", help="DP mechanism: dpsgd (same as --dp) or noisycgd (convex-relu only, hidden-state accounting); default: noisycgd for convex-relu, else dpsgd.")]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="fp32, or bf16 for bfloat16 mixed-precision training of non-private models (DP-SGD always trains in fp32).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Root seed of the data split, initialisation, shuffling, masks and DP noise.")]


def parse_defense(value: str | None) -> str | None:
    """``--defense``: None, or the DP mechanism it names (``dpsgd`` / ``noisycgd``)."""
    if value is None:
        return None
    from privaudit.config import MECHANISMS
    from privaudit.errors import ConfigError

    if value not in MECHANISMS:
        raise ConfigError(f"unknown --defense {value!r}; expected {' or '.join(MECHANISMS)}")
    return value
