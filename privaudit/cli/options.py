"""The options several commands share, in one table (:data:`OPTIONS`): each concept's one
name, the older spellings that still parse (hidden, :mod:`privaudit.cli.command`), and its
help, written once. The names follow one scheme: a single value is singular (``--sigma``,
``--kappa``, ``--seed``, ``--defence``, ``--knob``), a comma-separated grid the plural
(``--sigmas``, ``--kappas``, ``--seeds``, ``--defences``, ``--knobs``), and a grid also
parses under its singular, so ``audit --sigma 1`` is ``audit --sigmas 1``. Defence is spelt
as everywhere else in privaudit (its pages, columns and identifiers); the American
``--defense`` and ``--defenses`` still parse, unlisted.

Every numeric option declares its range (:func:`privaudit.cli.callbacks.number`): a value
outside it, NaN or ±inf is a usage error that names the option, before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from privaudit.api.params import RANGES, grid_text
from privaudit.attacks.registry import choice_help
from privaudit.cli.callbacks import canaries_option, dataset_option, model_option, number, one_of, path_option
from privaudit.core.config import AUGMENTS, PRECISIONS
from privaudit.core.defaults import (
    CIFAR10_KAPPAS,
    DATA_DIR_ENV,
    DEFAULT_KAPPAS,
    DEFAULT_SIGMAS,
    MAX_BATCH_SIZE,
    MAX_EPOCHS,
    MAX_PART_SIZE,
    MAX_POOL_SIZE,
    MAX_SEED,
    MAX_WIDTH,
)
from privaudit.defences import ALIASES as DEFENCE_ALIASES
from privaudit.defences import DEFENCES
from privaudit.defences import help_text as defence_help


@dataclass(frozen=True)
class Spec:
    """One option as every command spells it: ``name`` (the one ``--help`` shows),
    ``aliases`` (older or singular spellings that parse, unlisted) and ``help``."""

    name: str
    help: str = ""
    aliases: tuple[str, ...] = ()


#: every ``--attacks`` choice with what it runs (privaudit.attacks.registry.FAMILIES)
ATTACKS_HELP = ("Comma-separated or repeated: " + ", ".join(
    f"{name} ({words})" if words else name for name, words in choice_help().items())
    + ". shadow and loss share one shadow model and are computed together; the summary shows what was asked. "
      "lira and rmia train a reference pool, one-run a canary model; the label-only attacks also run on the "
      "output-side defences' targets.")
DEFENCE_NAMES = tuple(DEFENCES)
DEFENCE_HELP = defence_help()
DRY_RUN_HELP = ("Train nothing: print what would run (models per role and defence, what is already present and "
                "reused), the disk it writes and the time it takes on this machine (measured here in a few seconds, "
                "cached), then exit.")

#: every option several commands share, or that has an older spelling: key → its one spelling and help
OPTIONS: dict[str, Spec] = {s.name.lstrip("-"): s for s in (
    # -- where things are, and how results come back
    Spec("--workdir", "Workspace folder that holds models/, attacks/ and reports/."),
    Spec("--data-dir", "Folder holding cifar-10-batches-py (or that folder itself); default ./data."),
    Spec("--download", "Fetch CIFAR-10 through torchvision when it is not in --data-dir (needs a network)."),
    Spec("--device", "Where the models run: auto (CUDA when present), cpu or cuda."),
    Spec("--json", "Print one JSON document of what was produced (paths and metrics) on stdout."),
    Spec("--dry-run", DRY_RUN_HELP),
    Spec("--executor", "Where the jobs run: local (this process) or ray (Ray tasks; needs the ray extra: "
                       "pip install 'privaudit\\[ray]')."),
    Spec("--ray-address", "Ray cluster to join: auto, or ray://host:port; default: start (or join via RAY_ADDRESS) "
                          "a local instance."),
    Spec("--cpus-per-job", "CPUs (torch threads) of each job; default: this machine's torch thread count. The same "
                           "value gives the same numbers on both executors."),
    # -- the attacks
    Spec("--attacks", ATTACKS_HELP, ("--attack",)),
    Spec("--pool-size", "Reference models per defence setting for lira, rmia and the many-shadow attack (even, >= 4; "
                        "each trains on half of the target's members and non-members).", ("--references",)),
    Spec("--shadow-dataset", "Add ML-Leaks' transfer attack (adversary 2): a shadow model with the target's recipe "
                             "trained on this other dataset (any --dataset value), the attacker's own data."),
    # -- the data and the model
    Spec("--dataset", "cifar10 (needs the data, see --data-dir), digits (scikit-learn's bundled 8x8 digits, no "
                      "download), torchvision's cifar100, mnist, fashion-mnist or svhn (their standard files under "
                      "--data-dir, or --download), or your own images: npz:PATH (x uint8 NHWC or NCHW, y int) or "
                      "folder:PATH (one sub-folder per class)."),
    Spec("--model", "Architecture: mlp (one hidden layer), cnn (ML-Leaks Standard CNN), cnn-improved (three conv "
                    "blocks, BatchNorm/GroupNorm + dropout), cnn-improved-small (its two-block variant), convex-relu "
                    "(convex two-layer ReLU approximation, trained by cyclic gradient descent), or your own: "
                    "torchvision:NAME (e.g. torchvision:resnet18) or module:MODULE:CALLABLE (a factory returning an "
                    "nn.Module)."),
    Spec("--model-arg", "key=value passed to a torchvision: or module: model's factory (repeatable; values read as "
                        "JSON when they parse). torchvision ResNets take small_stem=true for small images."),
    Spec("--width", "Hidden units of the dense layer: the mlp's hidden layer (default 512), the cnn's tanh layer "
                    "(100), cnn-improved's (256) and cnn-improved-small's (100) ReLU layer; or convex-relu's number "
                    "of gate vectors (100)."),
    Spec("--part-size", "Size of each of the four ML-Leaks parts (target/shadow members/non-members); default 10520 "
                        "for cifar10, 449 for digits."),
    Spec("--canaries", "Plant worst-case points: mislabeled:N (N of the target's members and non-members get a wrong "
                       "label) or ood:N (N become uniform-noise images); every model of the recipe sees them, and "
                       "each attack reports its TPR on the canary members at the population's threshold."),
    Spec("--seed", "Root seed (>= 0) of every random choice: data split, initialisation, shuffling, masks, DP noise."),
    Spec("--seeds", "Comma-separated root seeds to replicate over, e.g. 0,1,2: every setting once per seed, each seed "
                    "re-drawing the data split and all training randomness (replaces --seed); summaries give the "
                    "mean and a 95% t-interval over seeds."),
    # -- the training recipe
    Spec("--epochs", "Training epochs; default 50 for cifar10, 60 for digits."),
    Spec("--batch-size", "Batch size (expected Poisson batch size under DP-SGD); default 100 for cifar10, 64 for "
                         "digits."),
    Spec("--lr", "Adam learning rate (default 1e-3), or convex-relu's gradient-descent step (default 3.1e-4)."),
    Spec("--weight-decay", "Adam weight decay (default 1e-7, 1e-5 for the improved CNNs), or convex-relu's L2 "
                           "coefficient λ (default 0.174).", ("--l2",)),
    Spec("--precision", "fp32, or bf16 for bfloat16 mixed-precision training of non-private models (DP-SGD always "
                        "trains in fp32)."),
    Spec("--augment", "Train-time augmentation: none (as in the paper), or flip (random horizontal flip per sample and "
                      "step; cifar10). It also sets what the attacks query: the image, and with flip its mirror."),
    # -- the defences: one value (train), a grid (audit)
    Spec("--defence", "The defence to train with, set by --knob: " + DEFENCE_HELP + ". dpsgd and noisycgd "
                      "(convex-relu's DP, hidden-state accounting) also take --sigma or --target-epsilon; mg also "
                      "--kappa. Default: none (with --dp: noisycgd for convex-relu, else dpsgd).", ("--defense",)),
    Spec("--defences", "Comma-separated defences to audit besides the baseline, each over its knob's default grid (or "
                       "--knobs): all, or some of " + DEFENCE_HELP + ". Without it: MG noise (--kappas) and DP-SGD "
                       "(--sigmas).", ("--defenses", "--defence", "--defense")),
    Spec("--knob", "The --defence's setting (its range is checked against the defence; see --defence); audit's "
                   "--knobs takes a grid of it."),
    Spec("--knobs", "A defence's knob grid, NAME=v1,v2 (e.g. mixup=0.2,0.5), replacing its default; repeatable."),
    Spec("--kappa", "MG noise: std of the N(1, κ²) input mask (0 = no mask)."),
    Spec("--kappas", f"Comma-separated MG-noise kappas (>= 0) to audit besides the undefended baseline ('none' for no "
                     f"MG rows); default {grid_text(CIFAR10_KAPPAS)} on cifar10 (down to the lowest DP-SGD "
                     f"accuracy), {grid_text(DEFAULT_KAPPAS)} on digits, none for convex-relu.", ("--kappa",)),
    Spec("--sigma", "DP noise multiplier σ (noise std σ·C); give this or --target-epsilon.", ("--noise-multiplier",)),
    Spec("--sigmas", f"Comma-separated noise multipliers σ (> 0) of DP-SGD (NoisyCGD for convex-relu); 'none' for no "
                     f"DP rows; default {grid_text(DEFAULT_SIGMAS)}.", ("--sigma", "--noise-multiplier")),
    Spec("--target-epsilon", "Calibrate σ so that ε at --delta does not exceed this."),
    Spec("--target-epsilons", "Comma-separated target epsilons (> 0) for the DP rows instead of --sigmas (σ "
                              "calibrated per value).", ("--target-epsilon",)),
    Spec("--max-grad-norm", "DP per-sample clipping norm C."),
    Spec("--delta", "The δ at which ε is computed and calibrated."),
)}


def option(key: str, *, help: str | None = None, **settings):
    """``typer.Option`` of the table's option ``key``: its name, its hidden aliases and its
    help (``help``: the narrower meaning the option has on one command, e.g. ``attack
    --seeds`` filters), with Typer's other ``settings`` (callback, envvar, …)."""
    spec = OPTIONS[key]
    return typer.Option(spec.name, *spec.aliases, help=spec.help if help is None else help, **settings)


WorkdirOpt = Annotated[str, option("workdir", callback=path_option)]
DataDirOpt = Annotated[str | None, option("data-dir", envvar=DATA_DIR_ENV, callback=path_option)]
DownloadOpt = Annotated[bool, option("download")]
DeviceOpt = Annotated[str, option("device", callback=one_of("auto", "cpu", "cuda"))]
JsonOpt = Annotated[bool, option("json")]
DryRunOpt = Annotated[bool, option("dry-run")]
ExecutorOpt = Annotated[str, option("executor", callback=one_of("local", "ray"))]
RayAddressOpt = Annotated[str | None, option("ray-address")]
CpusPerJobOpt = Annotated[int | None, option("cpus-per-job", callback=number(1, 4096))]
PoolSizeOpt = Annotated[int, option("pool-size", callback=number(4, MAX_POOL_SIZE))]
SeedOpt = Annotated[int, option("seed", callback=number(0, MAX_SEED))]
SeedsOpt = Annotated[str | None, option("seeds")]
AttacksOpt = Annotated[list[str], option("attacks")]
DEFAULT_ATTACKS = ["all"]
ShadowDatasetOpt = Annotated[str | None, option("shadow-dataset", callback=dataset_option)]

# -- the training recipe
ModelOpt = Annotated[str, option("model", callback=model_option)]
ModelArgOpt = Annotated[list[str] | None, option("model-arg")]
DatasetOpt = Annotated[str, option("dataset", callback=dataset_option)]
WidthOpt = Annotated[int | None, option("width", callback=number(1, MAX_WIDTH))]
PartSizeOpt = Annotated[int | None, option("part-size", callback=number(2, MAX_PART_SIZE))]
MaxGradNormOpt = Annotated[float, option("max-grad-norm", callback=number(*RANGES["max_grad_norm"]))]
DeltaOpt = Annotated[float, option("delta", callback=number(0, 1, low_open=True))]
EpochsOpt = Annotated[int | None, option("epochs", callback=number(1, MAX_EPOCHS))]
BatchSizeOpt = Annotated[int | None, option("batch-size", callback=number(1, MAX_BATCH_SIZE))]
LrOpt = Annotated[float | None, option("lr", callback=number(0, 100, low_open=True))]
WeightDecayOpt = Annotated[float | None, option("weight-decay", callback=number(*RANGES["l2"]))]
DefenceOpt = Annotated[str | None, option("defence", callback=one_of(*DEFENCE_NAMES, hidden=tuple(DEFENCE_ALIASES)))]
CanariesOpt = Annotated[str | None, option("canaries", callback=canaries_option)]
KnobOpt = Annotated[float | None, option("knob", callback=number(-1e9, 1e9))]
KappaOpt = Annotated[float, option("kappa", callback=number(*RANGES["kappa"]))]
PrecisionOpt = Annotated[str, option("precision", callback=one_of(*PRECISIONS))]
SigmaOpt = Annotated[float | None, option("sigma", callback=number(*RANGES["noise_multiplier"]))]
TargetEpsilonOpt = Annotated[float | None, option("target-epsilon", callback=number(0, 1e4, low_open=True))]
AugmentOpt = Annotated[str, option("augment", callback=one_of(*AUGMENTS))]

# -- audit's grids
KappasOpt = Annotated[str | None, option("kappas")]
SigmasOpt = Annotated[str | None, option("sigmas")]
TargetEpsilonsOpt = Annotated[str | None, option("target-epsilons")]
DefencesOpt = Annotated[str | None, option("defences")]
KnobsOpt = Annotated[list[str] | None, option("knobs")]


# -- the training recipe, one option group -------------------------------------------------

#: the recipe options every training command shares (``train``, ``audit``), in ``--help``'s
#: order: (parameter, its option, its default); each is a field of
#: :class:`privaudit.api.recipe.Recipe` (``model_arg`` its ``model_args``).
RECIPE_OPTIONS = (
    ("model", ModelOpt, "mlp"),
    ("model_arg", ModelArgOpt, None),
    ("dataset", DatasetOpt, "cifar10"),
    ("epochs", EpochsOpt, None),
    ("batch_size", BatchSizeOpt, None),
    ("lr", LrOpt, None),
    ("weight_decay", WeightDecayOpt, None),
    ("precision", PrecisionOpt, "fp32"),
    ("augment", AugmentOpt, "none"),
    ("width", WidthOpt, None),
    ("part_size", PartSizeOpt, None),
    ("canaries", CanariesOpt, None),
    ("max_grad_norm", MaxGradNormOpt, 1.0),
    ("delta", DeltaOpt, 1e-5),
)


def recipe_options(command):
    """Give ``command`` the recipe options (:data:`RECIPE_OPTIONS`) in place of its ``recipe``
    parameter, and call it with the :class:`~privaudit.api.recipe.Recipe` they make: the
    recipe is built once, here, and passed to the API whole."""
    import functools
    import inspect

    signature = inspect.signature(command, eval_str=True)
    own = list(signature.parameters.values())
    at = [p.name for p in own].index("recipe")
    shared = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation, default=default)
              for name, annotation, default in RECIPE_OPTIONS]
    merged = signature.replace(parameters=own[:at] + shared + own[at + 1:])

    @functools.wraps(command)
    def with_recipe(**values):
        from privaudit.api.recipe import Recipe

        fields = {name: values.pop(name) for name, _, _ in RECIPE_OPTIONS}
        fields["model_args"] = fields.pop("model_arg")
        return command(recipe=Recipe(**fields), **values)

    with_recipe.__signature__ = merged  # type: ignore[attr-defined]
    with_recipe.__annotations__ = {p.name: p.annotation for p in merged.parameters.values()}
    return with_recipe
