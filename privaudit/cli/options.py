"""The options several commands share: the workspace, the data, the device, ``--json``, the
attacks, and the training recipe (``train``, ``audit``, ``audit-model``).

Every numeric option declares its range (:func:`privaudit.cli.callbacks.number`): a value
outside it, NaN or ±inf is a usage error that names the option, before anything loads.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from privaudit.cli.callbacks import dataset_option, model_option, number, one_of, path_option
from privaudit.core.config import AUGMENTS, PRECISIONS
from privaudit.defenses import ALIASES as DEFENSE_ALIASES, DEFENSES, help_text as defense_help
from privaudit.core.defaults import (DATA_DIR_ENV, MAX_BATCH_SIZE, MAX_EPOCHS, MAX_PART_SIZE, MAX_POOL_SIZE, MAX_SEED,
                                     MAX_WIDTH)

WorkdirOpt = Annotated[str, typer.Option("--workdir", callback=path_option,
                                         help="Workspace folder that holds models/, attacks/ and reports/.")]
DataDirOpt = Annotated[Optional[str], typer.Option(
    "--data-dir", envvar=DATA_DIR_ENV, callback=path_option,
    help="Folder holding cifar-10-batches-py (or that folder itself); default ./data.")]
DownloadOpt = Annotated[bool, typer.Option("--download", help="Fetch CIFAR-10 through torchvision when it is not in --data-dir (needs a network).")]
DeviceOpt = Annotated[str, typer.Option("--device", callback=one_of("auto", "cpu", "cuda"), help="Where to train: auto (CUDA when present), cpu or cuda.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document of what was produced (paths and metrics) on stdout.")]
PoolSizeOpt = Annotated[int, typer.Option("--pool-size", callback=number(4, MAX_POOL_SIZE), help="Reference models per defence setting for lira, rmia and the many-shadow attack (even, >= 4; each trains on half of the target's members and non-members).")]
SeedOpt = Annotated[int, typer.Option("--seed", callback=number(0, MAX_SEED), help="Root seed (>= 0) of every random choice: data split, initialisation, shuffling, masks, DP noise.")]
SeedsOpt = Annotated[Optional[str], typer.Option(
    "--seeds", help="Comma-separated root seeds to replicate over, e.g. 0,1,2: every setting once per seed, each "
                    "seed re-drawing the data split and all training randomness (replaces --seed); summaries give "
                    "the mean and a 95% t-interval over seeds.")]
AttacksOpt = Annotated[list[str], typer.Option(
    "--attacks", "--attack",
    help="Comma-separated or repeated: shadow (the paper's attack), loss (loss, confidence and data-free baselines), lira, "
         "rmia, one-run (canary audit) or all. shadow and loss share one shadow model and are computed together; "
         "the summary shows what was asked. lira and rmia train a reference pool, one-run a canary model.")]
DEFAULT_ATTACKS = ["all"]
ShadowDatasetOpt = Annotated[Optional[str], typer.Option(
    "--shadow-dataset", callback=dataset_option,
    help="Add ML-Leaks' transfer attack (adversary 2): a shadow model with the target's recipe trained on this other "
         "dataset (any --dataset value), the attacker's own data.")]

# -- the training recipe
ModelOpt = Annotated[str, typer.Option("--model", callback=model_option, help="Architecture: mlp (one hidden layer), cnn (ML-Leaks Standard CNN), cnn-improved (three conv blocks, BatchNorm/GroupNorm + dropout), cnn-improved-small (its two-block variant), convex-relu (convex two-layer ReLU approximation, trained by cyclic gradient descent), or your own: torchvision:NAME (e.g. torchvision:resnet18) or module:MODULE:CALLABLE (a factory returning an nn.Module).")]
ModelArgOpt = Annotated[Optional[list[str]], typer.Option("--model-arg", help="key=value passed to a torchvision: or module: model's factory (repeatable; values read as JSON when they parse). torchvision ResNets take small_stem=true for small images.")]
DatasetOpt = Annotated[str, typer.Option("--dataset", callback=dataset_option, help="cifar10 (needs the data, see --data-dir), digits (scikit-learn's bundled 8x8 digits, no download), torchvision's cifar100, mnist, fashion-mnist or svhn (their standard files under --data-dir, or --download), or your own images: npz:PATH (x uint8 NHWC or NCHW, y int) or folder:PATH (one sub-folder per class).")]
WidthOpt = Annotated[Optional[int], typer.Option("--width", callback=number(1, MAX_WIDTH), help="Hidden units of the dense layer: the mlp's hidden layer (default 512), the cnn's tanh layer (100), cnn-improved's (256) and cnn-improved-small's (100) ReLU layer; or convex-relu's number of gate vectors (100).")]
PartSizeOpt = Annotated[Optional[int], typer.Option("--part-size", callback=number(2, MAX_PART_SIZE), help="Size of each of the four ML-Leaks parts (target/shadow members/non-members); default 10520 for cifar10, 449 for digits.")]
MaxGradNormOpt = Annotated[float, typer.Option("--max-grad-norm", callback=number(0, 1e6, low_open=True), help="DP per-sample clipping norm C.")]
DeltaOpt = Annotated[float, typer.Option("--delta", callback=number(0, 1, low_open=True), help="The delta at which epsilon is computed and calibrated.")]
EpochsOpt = Annotated[Optional[int], typer.Option("--epochs", callback=number(1, MAX_EPOCHS), help="Training epochs; default 50 for cifar10, 60 for digits.")]
BatchSizeOpt = Annotated[Optional[int], typer.Option("--batch-size", callback=number(1, MAX_BATCH_SIZE), help="Batch size (expected Poisson batch size under DP-SGD); default 100 for cifar10, 64 for digits.")]
LrOpt = Annotated[Optional[float], typer.Option("--lr", callback=number(0, 100, low_open=True), help="Adam learning rate (default 1e-3), or convex-relu's gradient-descent step (default 3.1e-4).")]
WeightDecayOpt = Annotated[Optional[float], typer.Option("--weight-decay", "--l2", callback=number(0, 1e6), help="Adam weight decay (default 1e-7, 1e-5 for the improved CNNs), or convex-relu's L2 coefficient lambda (default 0.174).")]
DEFENSE_NAMES = tuple(DEFENSES)
DEFENSE_HELP = defense_help()
DefenseOpt = Annotated[Optional[str], typer.Option("--defense", "--defence", callback=one_of(*DEFENSE_NAMES, hidden=tuple(DEFENSE_ALIASES)), help="The defence to train with, set by --knob: " + DEFENSE_HELP + ". dpsgd and noisycgd (convex-relu's DP, hidden-state accounting) also take --noise-multiplier or --target-epsilon; mg also --kappa. Default: none (with --dp: noisycgd for convex-relu, else dpsgd).")]
CanariesOpt = Annotated[Optional[str], typer.Option("--canaries", help="Plant worst-case points: mislabeled:N (N of the target's members and non-members get a wrong label) or ood:N (N become uniform-noise images); every model of the recipe sees them, and each attack reports its TPR on the canary members at the population's threshold.")]
KnobOpt = Annotated[Optional[float], typer.Option("--knob", callback=number(-1e9, 1e9), help="The --defense's setting (its range is checked against the defence; see --defense).")]
PrecisionOpt = Annotated[str, typer.Option("--precision", callback=one_of(*PRECISIONS), help="fp32, or bf16 for bfloat16 mixed-precision training of non-private models (DP-SGD always trains in fp32).")]
NoiseMultiplierOpt = Annotated[Optional[float], typer.Option("--noise-multiplier", callback=number(0, 1e6, low_open=True), help="DP noise multiplier sigma (noise std sigma*C); give this or --target-epsilon.")]
TargetEpsilonOpt = Annotated[Optional[float], typer.Option("--target-epsilon", callback=number(0, 1e4, low_open=True), help="Calibrate sigma so that epsilon at --delta does not exceed this.")]
AugmentOpt = Annotated[str, typer.Option("--augment", callback=one_of(*AUGMENTS), help="Train-time augmentation: none (as in the paper), or flip (random horizontal flip per sample and step; cifar10). It also sets what the attacks query: the image, and with flip its mirror.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Train nothing: print what would run (models per role and defence, attacks, what is already present and reused), the disk it writes and the time it takes on this machine (measured here in a few seconds, cached), then exit.")]
