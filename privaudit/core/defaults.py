"""Names and defaults the command line needs before any heavy import.

Everything here is plain Python (no torch, NumPy, pandas or scikit-learn), so that
``privaudit --help``, a usage error or a refused value answers at once; the modules that
use these values import them from here.
"""

from __future__ import annotations

DATA_DIR_ENV = "PRIVAUDIT_DATA_DIR"

# Datasets by name (privaudit.data: cifar10 and digits in loaders, the rest of torchvision's
# small image sets in formats), and the prefixes of the user's own data (privaudit.data.custom).
NAMED_DATASETS = ("cifar10", "digits", "cifar100", "mnist", "fashion-mnist", "svhn")
CUSTOM_DATASET_PREFIXES = ("npz:", "folder:")
# The user's own architectures (privaudit.models.custom).
CUSTOM_MODEL_PREFIXES = ("torchvision:", "module:")

# ``privaudit audit``'s default grids (besides the undefended baseline). On CIFAR-10 the κ grid
# reaches the accuracy of the lowest DP-SGD row, so that the two accuracy ranges overlap over
# the whole DP-SGD range (docs/performance.md).
# Hidden units of each model's dense layer when --width is not given (docs/methods/a-mg-noise.md A.3):
# the mlp's one hidden layer, the Standard CNN's tanh layer (n_hidden = 100 in the MG-noise
# paper's attack pipeline), the improved CNNs' ReLU layer (256 in the three-block variant of
# its Figures 9-10, 100 in the two-block variant of its Figure 4), convex-relu's gate vectors.
DEFAULT_WIDTHS = {"mlp": 512, "cnn": 100, "cnn-improved": 256, "cnn-improved-small": 100, "convex-relu": 100}

DEFAULT_KAPPAS = (0.25, 0.5, 1.0, 2.0)
CIFAR10_KAPPAS = (0.5, 1.0, 2.0, 4.0, 6.0)
DEFAULT_SIGMAS = (0.5, 1.0, 2.0)

# The reference-pool size of lira, rmia and the many-shadow attack (the attacks the command
# line can ask for are privaudit.attacks.registry's): the fewest of the measured budgets (4, 8,
# 16, 32) at which the best few-reference attack (LiRA with shrunk means) reaches 80 % of the
# TPR at 0.1 % FPR of the strongest attack with 63-64 references, on the MLP, the MLP trained
# with mirrors and the Standard CNN (benchmarks/bench_few_refs.py; docs/performance.md).
DEFAULT_POOL_SIZE = 16

# Targets of the theory experiments (privaudit.theorems.twolayer).
THEORY_LABELS = ("teacher", "gaussian", "sign")

# ``privaudit reproduce mg-noise``: its scales, the architectures it can be limited to
# (cnn-improved stands for both improved variants) and its experiments.
REPRODUCE_SCALES = ("full", "reduced")
REPRODUCE_FAMILIES = ("mlp", "cnn", "cnn-improved")
REPRODUCE_EXPERIMENTS = ("accuracy", "sweep", "epochs")

# Upper bounds of the command line's sizes: beyond them a run would not fit in memory or
# finish in any reasonable time on one machine, so the command refuses at once.
MAX_EPOCHS = 100_000
MAX_WIDTH = 65_536
MAX_BATCH_SIZE = 1_000_000
MAX_PART_SIZE = 10_000_000
MAX_POOL_SIZE = 1_024
MAX_SEED = 2**32 - 1
