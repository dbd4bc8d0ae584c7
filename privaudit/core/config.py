"""One frozen configuration per trained model.

A :class:`RunConfig` holds every setting that can change a trained model: the data split,
the architecture, the defence and the training recipe. Its stable hash names the model's
folder in the workspace and decides reuse: an artifact is reused only when the hash of its
saved config equals the hash of the requested one. The device is deliberately *not* part
of the config (it is recorded as provenance): a model trained on a GPU may be reused on a
CPU machine.

Defaults per dataset follow docs/methods/a-mg-noise.md A.3 for CIFAR-10 (parts of 10,520 images, Adam with
lr 1e-3, batch 100, weight decay 1e-7, or 1e-5 for the improved CNN, 50 epochs) and are
scaled down for the 8x8 digits (parts of 449 images, batch 64, 60 epochs).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from privaudit.core.defaults import CUSTOM_DATASET_PREFIXES, CUSTOM_MODEL_PREFIXES, DEFAULT_WIDTHS, NAMED_DATASETS
from privaudit.errors import ConfigError

T = TypeVar("T")

MODELS = ("mlp", "cnn", "cnn-improved", "cnn-improved-small", "convex-relu")
MECHANISMS = ("dpsgd", "noisycgd")
DATASETS = NAMED_DATASETS  # and the user's own data: npz:PATH, folder:PATH (privaudit.data.custom)
ROLES = ("target", "shadow", "reference", "canary")
PRECISIONS = ("fp32", "bf16")
AUGMENTS = ("none", "flip")  # privaudit.training.augment
FLIP_DATASETS = ("cifar10", "cifar100")  # natural images, mirror-symmetric classes (and the user's own)
CONFIG_SCHEMA = 2  # 2: the defence as (name, knob, params); schema 1 configs are migrated on reading

# Dataset-specific defaults used when a setting is not given.
# CIFAR-10's (the paper's) serve every dataset of 40,000 images or more; the user's own data
# get them too, with parts capped at a quarter of its images.
PAPER_DEFAULTS = {"part_size": 10_520, "epochs": 50, "batch_size": 100}
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    **{name: dict(PAPER_DEFAULTS) for name in NAMED_DATASETS},
    "digits": {"part_size": 449, "epochs": 60, "batch_size": 64},
}


def default_weight_decay(model: str) -> float:
    """Adam weight decay of the authors' code: 1e-5 for the improved CNN, else 1e-7; for
    ``convex-relu`` the L2 coefficient λ of NoisyCGD, 0.174 (with η = 3.1e-4, the
    ηλ = 5.4e-5 of docs/methods/b-hidden-state.md B.3's reference values)."""
    return {"cnn-improved": 1e-5, "cnn-improved-small": 1e-5, "convex-relu": 0.174}.get(model, 1e-7)


# convex-relu trains by (noisy) cyclic gradient descent, docs/methods/b-hidden-state.md B.2: its own recipe.
CONVEX_DEFAULTS: dict[str, dict[str, Any]] = {
    "cifar10": {"epochs": 400, "batch_size": 1000, "lr": 3.1e-4, "width": 100},
    "digits": {"epochs": 200, "batch_size": 64, "lr": 3.1e-4, "width": 100},
}


def is_custom_dataset(name: str) -> bool:
    """The user's own data (``npz:PATH`` or ``folder:PATH``), not a dataset known by name."""
    return isinstance(name, str) and name.startswith(CUSTOM_DATASET_PREFIXES)


def is_custom_model(name: str) -> bool:
    """The user's own architecture (``torchvision:NAME`` or ``module:MODULE:CALLABLE``)."""
    return isinstance(name, str) and name.startswith(CUSTOM_MODEL_PREFIXES)


def model_tag(name: str) -> str:
    """An architecture's name as it appears in folder names: itself, or ``tv-<name>`` /
    ``mod-<callable>`` for the user's own (letters, digits, ``-``, ``_`` only)."""
    if not is_custom_model(name):
        return name
    kind, _, rest = name.partition(":")
    tail = rest.rsplit(":", 1)[-1]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in tail)[:40]
    return f"{'tv' if kind == 'torchvision' else 'mod'}-{safe or 'model'}"


def dataset_tag(name: str) -> str:
    """A dataset's name as it appears in folder names: itself, or for the user's own data
    ``npz-<file stem>`` / ``folder-<folder name>`` (letters, digits, ``-``, ``_`` only)."""
    if not is_custom_dataset(name):
        return name
    kind, _, path = name.partition(":")
    stem = path.rstrip("/").rsplit("/", 1)[-1]
    if kind == "npz" and stem.lower().endswith(".npz"):
        stem = stem[:-4]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in stem)[:40]
    return f"{kind}-{safe or 'data'}"


@dataclass(frozen=True)
class DataConfig:
    """Which data a model sees.

    ``part_size`` is the size of each of the four disjoint ML-Leaks parts (target members,
    target non-members, shadow members, shadow non-members); ``seed`` shuffles the pooled
    train+test images before they are cut. ``dataset`` is a name (:data:`DATASETS`) or the
    user's own data, ``npz:PATH`` / ``folder:PATH`` with an absolute path, whose contents'
    SHA-256 prefix is ``fingerprint`` (empty for a dataset known by name). ``canaries``:
    planted worst-case points, ``mislabeled:N`` or ``ood:N`` (:mod:`privaudit.data.planted`;
    empty: none). ``pool_size`` and ``pool_index`` place a
    reference model in a pool of that many models (role ``reference``; see
    :mod:`privaudit.pipeline.pools`); they are 0 for every other role.
    """

    dataset: str = "digits"
    part_size: int = 449
    seed: int = 0
    pool_size: int = 0
    pool_index: int = 0
    fingerprint: str = ""
    canaries: str = ""


@dataclass(frozen=True)
class ModelConfig:
    """Architecture: ``mlp`` (one hidden ReLU layer of ``width`` units), ``cnn`` (ML-Leaks,
    a dense tanh layer of ``width`` units), ``cnn-improved`` and ``cnn-improved-small`` (three
    or two conv blocks with BatchNorm + dropout, GroupNorm under DP-SGD; a dense ReLU layer
    of ``width`` units), ``convex-relu`` (the
    convex two-layer ReLU approximation with ``width`` gate vectors, docs/methods/b-hidden-state.md B.1); or
    the user's own, ``torchvision:NAME`` or ``module:MODULE:CALLABLE`` (width 0, unused),
    built with ``args``, the canonical JSON of its ``--model-arg`` pairs
    (:mod:`privaudit.models.custom`)."""

    name: str = "mlp"
    width: int = 512
    args: str = ""


#: the defence names that train with differential privacy (``mg+dpsgd``: DP-SGD on MG-masked inputs)
DP_NAMES = ("dpsgd", "noisycgd", "mg+dpsgd")


@dataclass(frozen=True)
class DPParams:
    """The parameters of a defence besides its knob: differential privacy's, and MG noise's κ
    when it is combined with DP-SGD.

    target_epsilon: the ε the calibrated σ must not exceed at ``delta``; given instead of σ
        (the DP defence's knob is then 0 until training calibrates it).
    max_grad_norm: per-sample clipping norm C.
    delta: the δ at which ε is reported and calibrated.
    mechanism: the recipe's DP mechanism, ``dpsgd`` (Poisson sampling, per-sample clipping,
        noise every step) or ``noisycgd`` (fixed cyclic batches, hidden-state accounting;
        ``convex-relu`` only). A DP defence's name is its mechanism; an undefended
        ``convex-relu`` recipe keeps ``noisycgd`` here, the mechanism its DP twin uses.
    kappa: MG noise's κ in the one combined defence, ``mg+dpsgd`` (0 in every other).

    C and δ are recipe values: every model of an audit carries the same ones, DP or not.
    """

    target_epsilon: float | None = None
    max_grad_norm: float = 1.0
    delta: float = 1e-5
    mechanism: str = "dpsgd"
    kappa: float = 0.0

    def __post_init__(self) -> None:
        _floats(self, "target_epsilon", "max_grad_norm", "delta", "kappa")


@dataclass(frozen=True)
class DefenceConfig:
    """The defence applied while training (or at release), one shape for all: ``name`` and
    ``knob``, with the DP parameters in ``params``.

    name: ``none``, a defence of :mod:`privaudit.defences` (``mg``, ``dpsgd``, ``noisycgd``,
        ``label-smoothing``, ``mixup``, ``top-k``, ...), or ``mg+dpsgd`` (DP-SGD on inputs
        under MG noise, whose κ is ``params.kappa``).
    knob: the defence's one setting: κ for ``mg``, σ (the noise multiplier) for the DP
        defences (0 while σ is calibrated to ``params.target_epsilon``), α, β, p, λ, k, ...
        for the others; 0 for ``none`` and the knob-less ones.
    params: :class:`DPParams`.

    The read-only properties below (``kappa``, ``dp``, ``noise_multiplier``, ...) are what the
    training engines ask of a defence; they are derived, never stored twice.
    """

    name: str = "none"
    knob: float = 0.0
    params: DPParams = field(default_factory=DPParams)

    def __post_init__(self) -> None:
        _floats(self, "knob")

    # -- what the engines read ------------------------------------------------------------
    @property
    def dp(self) -> bool:
        """Whether the model trains with differential privacy."""
        return self.name in DP_NAMES

    @property
    def kappa(self) -> float:
        """The std κ of the multiplicative Gaussian input mask N(1, κ²) (0: no mask)."""
        return self.knob if self.name == "mg" else self.params.kappa if self.name == "mg+dpsgd" else 0.0

    @property
    def noise_multiplier(self) -> float | None:
        """σ of a DP defence given as σ; None when calibrated to a target ε or not DP."""
        return self.knob if self.dp and self.params.target_epsilon is None else None

    @property
    def target_epsilon(self) -> float | None:
        return self.params.target_epsilon if self.dp else None

    @property
    def max_grad_norm(self) -> float:
        return self.params.max_grad_norm

    @property
    def delta(self) -> float:
        return self.params.delta

    @property
    def mechanism(self) -> str:
        return self.params.mechanism

    @property
    def method(self) -> str:
        """The :mod:`privaudit.defences` defence that is neither MG noise nor DP ('' for those)."""
        return "" if self.name == "none" or self.name == "mg" or self.dp else self.name

    # -- building ---------------------------------------------------------------------------
    def with_setting(self, name: str, knob: float = 0.0, *, target_epsilon: float | None = None,
                     kappa: float = 0.0) -> DefenceConfig:
        """Another defence with the same recipe parameters (C, δ, mechanism): ``name`` at
        ``knob`` (a DP defence: σ, or 0 with ``target_epsilon``; ``mg+dpsgd``: σ, with MG
        noise's ``kappa``)."""
        mechanism = name.removeprefix("mg+") if name in DP_NAMES else self.params.mechanism
        return DefenceConfig(name=name, knob=float(knob),
                             params=replace(self.params, target_epsilon=target_epsilon, mechanism=mechanism,
                                            kappa=float(kappa)))

    @property
    def undefended(self) -> DefenceConfig:
        """No defence, the same recipe parameters."""
        return self.with_setting("none")

    @classmethod
    def from_fields(cls, *, kappa: float = 0.0, dp: bool = False, noise_multiplier: float | None = None,
                    target_epsilon: float | None = None, max_grad_norm: float = 1.0, delta: float = 1e-5,
                    mechanism: str = "dpsgd", method: str = "", knob: float = 0.0) -> DefenceConfig:
        """The defence of schema 1's fields (MG noise and DP as fields of their own, every
        other defence as ``method`` and ``knob``): the migration of configs written before
        schema 2. Settings that schema 1 could write but never validated (σ without DP) are
        kept where they can be, and refused by :meth:`RunConfig.validated`."""
        params = DPParams(target_epsilon=target_epsilon, max_grad_norm=max_grad_norm, delta=delta,
                          mechanism=mechanism, kappa=kappa if dp and not method else 0.0)
        if method:
            if kappa or dp or noise_multiplier is not None or target_epsilon is not None:
                raise ConfigError(f"one defence a model: {method} trains without MG noise and DP "
                                  f"(got kappa {kappa:g}{', dp' if dp else ''})")
            return cls(name=method, knob=knob, params=params)
        if knob:
            raise ConfigError("a defence knob needs its defence (`defence` NAME)")
        if dp:
            if noise_multiplier is not None and target_epsilon is not None:
                raise ConfigError("`dp` needs exactly one of `noise_multiplier` or `target_epsilon`")
            name = ("mg+" if kappa else "") + mechanism  # neither: refused by validation, after the model
            return cls(name=name, knob=0.0 if noise_multiplier is None else noise_multiplier, params=params)
        if noise_multiplier is not None or target_epsilon is not None:
            raise ConfigError("`noise_multiplier` and `target_epsilon` need `dp`")
        return cls(name="mg" if kappa else "none", knob=kappa, params=params)

    def fields_v1(self) -> dict[str, Any]:
        """The defence as schema 1 wrote it (the inverse of :meth:`from_fields`): the form the
        config hash is computed from, so that a model keeps its name across schemas."""
        return {"kappa": self.kappa, "dp": self.dp, "noise_multiplier": self.noise_multiplier,
                "target_epsilon": self.target_epsilon, "max_grad_norm": self.max_grad_norm, "delta": self.delta,
                "mechanism": self.mechanism, "method": self.method, "knob": self.knob if self.method else 0.0}

    # -- names ------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """Short readable label used in folder names, e.g. ``k0.5``, ``dp-s1`` or ``ls0.1``."""
        if self.method:
            from privaudit.defences import get

            return get(self.method).label(self.knob)
        bits = []
        if self.kappa > 0:
            bits.append(f"k{self.kappa:g}")
        if self.dp:
            tag = "ncgd" if self.mechanism == "noisycgd" else "dp"
            bits.append(f"{tag}-s{self.noise_multiplier:g}" if self.noise_multiplier is not None
                        else f"{tag}-e{self.target_epsilon:g}")
        return "-".join(bits) or "plain"


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation recipe (Adam, full passes over the member part).

    ``precision``: ``fp32``, or ``bf16`` for bfloat16 autocast of the training forward and
    backward passes (weights, optimizer and evaluation stay float32). Non-private models
    only: DP-SGD clips per-sample gradients, and norms computed in bfloat16 would not bound
    the sensitivity that the accountant assumes.

    ``augment``: ``none``, or ``flip`` (a random horizontal flip per sample and step, CIFAR-10
    only); it also sets the views the attacks query (:mod:`privaudit.training.augment`).
    """

    epochs: int = 60
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-7
    precision: str = "fp32"
    augment: str = "none"

    def __post_init__(self) -> None:
        _floats(self, "lr", "weight_decay")


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one trained model (target or shadow)."""

    role: str = "target"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    defence: DefenceConfig = field(default_factory=DefenceConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0

    # -- identity -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every setting, as ``config.json`` holds it (schema 2: the defence as
        ``name``, ``knob`` and ``params``)."""
        return {"schema": CONFIG_SCHEMA, **asdict(self)}

    def hash_dict(self) -> dict[str, Any]:
        """The settings in schema 1's form, which the config hash is computed from: MG noise and
        DP as fields of the defence, and the fields added after schema 1 (the pool fields, the
        fingerprint, the canaries, the model's arguments, the precision, the augmentation, the
        mechanism, a method and its knob) left out at their default, so that every model
        trained since schema 1 keeps its hash and its folder."""
        raw = {"schema": 1, **asdict(self)}
        raw["defence"] = self.defence.fields_v1()
        for section, key, default in (("data", "pool_size", 0), ("data", "pool_index", 0), ("data", "fingerprint", ""),
                                      ("data", "canaries", ""),
                                      ("model", "args", ""),
                                      ("train", "precision", "fp32"), ("train", "augment", "none"),
                                      ("defence", "mechanism", "dpsgd"), ("defence", "method", ""),
                                      ("defence", "knob", 0.0)):
            if raw[section][key] == default:
                del raw[section][key]
        return raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        """Rebuild a config saved by :meth:`to_dict` (schema 2) or by a release before it
        (schema 1, migrated by :meth:`DefenceConfig.from_fields`); unknown or missing keys are
        an error."""
        try:
            schema = raw.get("schema")
            if schema not in (1, CONFIG_SCHEMA):
                raise ConfigError(f"unsupported config schema {schema!r}")
            defence = dict(raw["defence"])
            if schema == 1:
                kwargs: dict[str, Any] = {"defence": DefenceConfig.from_fields(**defence)}
            else:
                params = DPParams(**defence.pop("params"))
                kwargs = {"defence": DefenceConfig(**defence, params=params)}
            for key, sub in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
                kwargs[key] = sub(**raw[key])
            kwargs["role"] = raw["role"]
            kwargs["seed"] = raw["seed"]
            return cls(**kwargs).validated()
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"not a privaudit model config ({exc})") from exc

    @property
    def config_hash(self) -> str:
        """First 10 hex digits of the SHA-256 of the canonical JSON of the config."""
        canon = json.dumps(self.hash_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:10]

    @property
    def run_name(self) -> str:
        """Readable, unique folder name: ``<role>-<model>-<dataset>-<defence>-<hash>``
        (reference models add ``-p<pool size>i<index>`` before the hash)."""
        pool = f"-p{self.data.pool_size}i{self.data.pool_index}" if self.role == "reference" else ""
        return (f"{self.role}-{model_tag(self.model.name)}-{dataset_tag(self.data.dataset)}-"
                f"{self.defence.label}{pool}-{self.config_hash}")

    def with_epochs(self, epochs: int) -> RunConfig:
        """The same recipe trained for ``epochs`` (early stopping's knob follows: it is the
        epochs)."""
        defence = replace(self.defence, knob=float(epochs)) if self.defence.name == "early-stopping" else self.defence
        return replace(self, train=replace(self.train, epochs=epochs), defence=defence)

    def as_shadow(self) -> RunConfig:
        """The shadow model's config: the identical recipe, defence included."""
        return replace(self, role="shadow")

    def as_reference(self, pool_size: int, index: int) -> RunConfig:
        """Reference model ``index`` of a pool of ``pool_size`` with the identical recipe."""
        return replace(self, role="reference", data=replace(self.data, pool_size=pool_size, pool_index=index))

    def as_canary(self) -> RunConfig:
        """The one-run audit's canary model with the identical recipe."""
        return replace(self, role="canary")

    @property
    def recipe(self) -> RunConfig:
        """The recipe without the role-specific data placement (a target's config)."""
        return replace(self, role="target", data=replace(self.data, pool_size=0, pool_index=0))

    @property
    def trained_as(self) -> RunConfig:
        """The config whose training gives this model's weights: itself, or, for an
        output-side defence (top-k, rounding, label only), the same config undefended. Such a
        defence changes only what a query returns and the training seeds never depend on the
        defence, so its model is the undefended model's weights under another release
        (:func:`privaudit.pipeline.runs.ensure_model` reuses them instead of training again)."""
        if not self.defence.method:
            return self
        from privaudit.defences import OUTPUT, get

        if get(self.defence.method).side != OUTPUT:
            return self
        return replace(self, defence=self.defence.undefended)

    # -- validation -----------------------------------------------------------------------
    def validated(self) -> RunConfig:
        """Return self, or raise :class:`ConfigError` naming the first bad setting: the rules
        of :data:`CONFIG_RULES` in order."""
        for rule in CONFIG_RULES:
            rule(self)
        return self


# -- the rules a config must keep (RunConfig.validated), each a function of the config that
# -- raises ConfigError naming the setting it checks

def role_is_known(cfg: RunConfig) -> None:
    if cfg.role not in ROLES:
        raise ConfigError(f"unknown role {cfg.role!r}; expected one of {', '.join(ROLES)}")


def dataset_is_known(cfg: RunConfig) -> None:
    """A built-in dataset without a fingerprint, or the user's own with the fingerprint of its contents."""
    d = cfg.data
    if is_custom_dataset(d.dataset):
        _require(isinstance(d.fingerprint, str) and len(d.fingerprint) == 16,
                 f"dataset {d.dataset!r} needs the fingerprint of its contents (privaudit.data.custom)")
    elif d.dataset not in DATASETS:
        raise ConfigError(f"unknown dataset {d.dataset!r}; expected one of {', '.join(DATASETS)}, npz:PATH or "
                          "folder:PATH")
    elif d.fingerprint:
        raise ConfigError(f"a fingerprint is for the user's own data, not {d.dataset}")


def model_is_known(cfg: RunConfig) -> None:
    """A built-in model with a width and no arguments, or the user's own with canonical arguments."""
    m = cfg.model
    if is_custom_model(m.name):
        _require(m.width == 0, "`width` is for the built-in models: give your model's own sizes with `model_args`")
        _require(isinstance(m.args, str), "model args must be canonical JSON")
        return
    if m.name not in MODELS:
        raise ConfigError(f"unknown model {m.name!r}; expected one of {', '.join(MODELS)}, torchvision:NAME or "
                          "module:MODULE:CALLABLE")
    _require(isinstance(m.width, int) and m.width >= 1, "`width` must be a positive integer")
    _require(not m.args, "`model_args` is for torchvision: and module: models")


def parts_hold_the_canaries(cfg: RunConfig) -> None:
    d = cfg.data
    _require(isinstance(d.part_size, int) and d.part_size >= 2, "`part_size` must be at least 2")
    if d.canaries:
        _, n = parse_canaries(d.canaries)
        _require(n <= d.part_size, f"`canaries` {d.canaries}: at most {d.part_size} canaries (half the target's "
                                   f"{2 * d.part_size} members and non-members)")


def pool_place_only_for_references(cfg: RunConfig) -> None:
    d = cfg.data
    if cfg.role == "reference":
        _require(isinstance(d.pool_size, int) and d.pool_size >= 2 and d.pool_size % 2 == 0,
                 f"`pool_size` must be an even number >= 2 (got {d.pool_size})")
        _require(isinstance(d.pool_index, int) and 0 <= d.pool_index < d.pool_size,
                 f"pool index {d.pool_index} outside the pool of {d.pool_size}")
    elif d.pool_size or d.pool_index:
        raise ConfigError("pool_size and pool_index are for reference models only")


def dp_settings_in_range(cfg: RunConfig) -> None:
    f = cfg.defence
    _require(_finite_number(f.delta) and 0 < f.delta < 1, f"`delta` must lie in (0, 1) (got {f.delta})")
    _require(_finite_number(f.max_grad_norm) and f.max_grad_norm > 0,
             f"`max_grad_norm` must be > 0 (got {f.max_grad_norm})")
    if f.mechanism not in MECHANISMS:
        raise ConfigError(f"unknown DP mechanism {f.mechanism!r}; expected one of {', '.join(MECHANISMS)}")


def optimiser_in_range(cfg: RunConfig) -> None:
    t = cfg.train
    _require(isinstance(t.epochs, int) and t.epochs >= 1, f"`epochs` must be >= 1 (got {t.epochs})")
    _require(isinstance(t.batch_size, int) and t.batch_size >= 1, f"`batch_size` must be >= 1 (got {t.batch_size})")
    _require(_finite_number(t.lr) and t.lr > 0, f"`lr` must be > 0 (got {t.lr})")
    _require(_finite_number(t.weight_decay) and t.weight_decay >= 0,
             f"`weight_decay` must be >= 0 (got {t.weight_decay})")


def convex_relu_fits_its_bound(cfg: RunConfig) -> None:
    """convex-relu trains on whole batches of its part; under DP, its step size and weight
    decay must meet the hidden-state bound's assumptions."""
    if cfg.model.name != "convex-relu":
        return
    t, part = cfg.train, cfg.data.part_size
    _require(t.batch_size <= part, f"`batch_size` {t.batch_size} exceeds the {part} training samples (`part_size`)")
    if cfg.defence.dp:
        from privaudit.analysis.hidden_state import contraction
        contraction(t.lr, t.weight_decay)  # the hidden-state bound's assumptions, or an error


def augmentation_fits_the_data(cfg: RunConfig) -> None:
    t, dataset = cfg.train, cfg.data.dataset
    if t.augment not in AUGMENTS:
        raise ConfigError(f"unknown `augment` {t.augment!r}; expected one of {', '.join(AUGMENTS)}")
    if t.augment == "flip" and dataset not in FLIP_DATASETS and not is_custom_dataset(dataset):
        raise ConfigError(f"`augment` flip is for natural images (cifar10, cifar100, or your own): {dataset} "
                          "holds digits or letters-like shapes, which are not mirror-symmetric "
                          "(a mirrored 2 is no 2)")
    if t.augment == "flip" and cfg.model.name == "convex-relu":
        raise ConfigError("`augment` flip is for mlp and the CNNs: convex-relu trains by cyclic gradient descent "
                          "over fixed batches")


def precision_fits_the_defence(cfg: RunConfig) -> None:
    precision = cfg.train.precision
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    if precision != "fp32" and cfg.defence.dp:
        raise ConfigError("`precision` bf16 is for non-private training: DP-SGD clips per-sample gradients in fp32")


def seed_in_range(cfg: RunConfig) -> None:
    _require(isinstance(cfg.seed, int) and 0 <= cfg.seed < 2**63, "`seed` must be a non-negative integer")


CANARY_KINDS = ("mislabeled", "ood")


def canaries_problem(spec: str) -> str | None:
    """Why ``spec`` is no canary setting ``KIND:N``, in words that follow the option's name;
    None when it is one."""
    kind, sep, count = str(spec).partition(":")
    try:
        n = int(count)
    except ValueError:
        n = -1
    if not sep or kind not in CANARY_KINDS or n < 1:
        return (f"takes KIND:N with KIND one of {', '.join(CANARY_KINDS)} and N >= 1 (e.g. mislabeled:50), "
                f"not {spec!r}")
    return None


def parse_canaries(spec: str) -> tuple[str, int]:
    """``"mislabeled:50"`` → ("mislabeled", 50), or a one-line :class:`ConfigError`
    (:mod:`privaudit.data.planted`)."""
    problem = canaries_problem(spec)
    if problem:
        raise ConfigError(f"`canaries` {problem}")
    kind, _, count = str(spec).partition(":")
    return kind, int(count)


def _check_defence(cfg: RunConfig) -> None:
    """A config's defence: a known name, its knob in that defence's range (the one range of
    :mod:`privaudit.defences`), DP's parameters only where DP trains, and what the defence
    asks of the recipe (NoisyCGD needs ``convex-relu``, which trains by cyclic gradient
    descent: neither MG noise nor DP-SGD nor a training-side method)."""
    from privaudit.defences import get

    f, model = cfg.defence, cfg.model.name
    p = f.params
    if f.name == "none":
        if f.knob != 0:
            raise ConfigError("a defence knob needs its defence (`defence` NAME)")
    elif f.name not in DP_NAMES:
        get(f.name)  # a known defence, or a one-line error listing them
    if p.kappa and f.name != "mg+dpsgd":
        raise ConfigError("MG noise's kappa among the DP parameters is for mg+dpsgd only")
    if p.target_epsilon is not None and not f.dp:
        raise ConfigError("`noise_multiplier` and `target_epsilon` need `dp`")
    if f.kappa and model == "convex-relu":
        raise ConfigError("convex-relu trains by (noisy) cyclic gradient descent; MG noise (`kappa`) "
                          "is for mlp and the CNNs")
    if f.name == "mg":
        get("mg").check_knob(f.knob)
    if f.dp:
        if f.mechanism != f.name.removeprefix("mg+"):
            raise ConfigError(f"defence {f.name} with DP mechanism {f.mechanism}: the two must agree")
        if f.mechanism == "noisycgd" and model != "convex-relu":  # before the noise: more fundamental
            raise ConfigError("NoisyCGD's hidden-state bound needs the strongly convex `model` convex-relu")
        if f.mechanism != "noisycgd" and model == "convex-relu":
            raise ConfigError("convex-relu's DP training is NoisyCGD: use `defence` noisycgd")
        if f.name == "mg+dpsgd":
            get("mg").check_knob(p.kappa)
        if p.target_epsilon is None:
            _require(f.knob != 0, "`dp` needs exactly one of `noise_multiplier` or `target_epsilon`")
            get(f.mechanism).check_knob(f.knob)
        else:
            _require(f.knob == 0, "`dp` needs exactly one of `noise_multiplier` or `target_epsilon`")
            _require(_finite_number(p.target_epsilon) and p.target_epsilon > 0,
                     f"`target_epsilon` must be > 0 (got {p.target_epsilon})")
    elif f.method:
        defence = get(f.method)
        defence.check_knob(f.knob)
        if model == "convex-relu" and defence.side == "training":
            raise ConfigError(f"convex-relu trains by (noisy) cyclic gradient descent; {defence.name} is for mlp "
                              "and the CNNs (and your own models)")
        defence.validate(cfg)


def _floats(obj: Any, *names: str) -> None:
    """Store integer values of float fields as floats, so that equal configs (``kappa=1`` and
    ``kappa=1.0``) serialise, and therefore hash, alike."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, int) and not isinstance(value, bool):
            object.__setattr__(obj, name, float(value))


def _finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


#: keyword arguments of the other spelling, accepted by the public functions that take them
OTHER_SPELLINGS = {"defense": "defence", "defenses": "defences"}


def either_spelling(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` accepting ``defense=`` and ``defenses=`` for ``defence=`` and ``defences=`` (the
    identifiers spell "defence"; the command line takes both spellings of its options, and so
    does the Python API of its keyword arguments)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> T:
        for old, new in OTHER_SPELLINGS.items():
            if old in kwargs:
                if new in kwargs:
                    raise ConfigError(f"give {new}= or {old}=, not both")
                kwargs[new] = kwargs.pop(old)
        return fn(*args, **kwargs)

    return call


@either_spelling
def make_config(
    *,
    model: str = "mlp",
    dataset: str = "digits",
    role: str = "target",
    width: int | None = None,
    part_size: int | None = None,
    kappa: float = 0.0,
    dp: bool = False,
    noise_multiplier: float | None = None,
    target_epsilon: float | None = None,
    max_grad_norm: float = 1.0,
    delta: float = 1e-5,
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    weight_decay: float | None = None,
    precision: str = "fp32",
    augment: str = "none",
    mechanism: str | None = None,
    seed: int = 0,
    fingerprint: str = "",
    dataset_size: int | None = None,
    model_args: dict | None = None,
    defence: str | None = None,
    knob: float | None = None,
    canaries: str = "",
) -> RunConfig:
    """Build a validated :class:`RunConfig`, filling dataset- and model-specific defaults for
    ``None`` (``convex-relu``: :data:`CONVEX_DEFAULTS`, NoisyCGD as its DP mechanism).

    The user's own data (``npz:PATH``, ``folder:PATH``) needs its ``fingerprint`` and, for
    the default part size (a quarter of its images, at most CIFAR-10's 10,520), its
    ``dataset_size``: :meth:`privaudit.pipeline.runs.DataCache.config_kwargs` gives both. The user's
    own architecture takes ``model_args`` (JSON values) and no ``width``.

    ``defence`` (or ``defense``) names any defence of :mod:`privaudit.defences` (``mg``, ``dpsgd``,
    ``noisycgd`` included) and ``knob`` its setting; a DP defence takes ``target_epsilon``
    instead of a knob. ``kappa``, ``dp`` and ``noise_multiplier`` are the older spelling of MG
    noise and DP (and the only one of their combination, DP-SGD on MG-masked inputs). A
    setting the defence sets itself (early stopping's epochs, weight decay's λ) fills the
    argument when it is None, and must agree with it otherwise."""
    params = DPParams(max_grad_norm=float(max_grad_norm), delta=float(delta),
                      mechanism=mechanism or ("noisycgd" if model == "convex-relu" else "dpsgd"))
    chosen, sets = _defence(params, defence, knob, kappa=kappa, dp=dp, noise_multiplier=noise_multiplier,
                            target_epsilon=target_epsilon)
    epochs = sets.get("epochs", epochs) if epochs is None else epochs
    weight_decay = sets.get("weight_decay", weight_decay) if weight_decay is None else weight_decay
    defaults = recipe_defaults(model, dataset, dataset_size)
    if is_custom_model(model):
        if width is not None:
            raise ConfigError("`width` is for the built-in models: give your model's own sizes with `model_args`")
        width = 0
    elif model_args:
        raise ConfigError("`model_args` is for torchvision: and module: models")
    width = defaults["width"] if width is None else width
    lr = defaults["lr"] if lr is None else lr
    cfg = RunConfig(
        role=role,
        data=DataConfig(dataset=dataset,
                        part_size=defaults["part_size"] if part_size is None else part_size,
                        seed=seed, fingerprint=fingerprint, canaries=canaries or ""),
        model=ModelConfig(name=model, width=width,
                          args=json.dumps(model_args, sort_keys=True, separators=(",", ":")) if model_args else ""),
        defence=chosen,
        train=TrainConfig(epochs=defaults["epochs"] if epochs is None else epochs,
                          batch_size=defaults["batch_size"] if batch_size is None else batch_size,
                          lr=float(lr),
                          weight_decay=defaults["weight_decay"] if weight_decay is None else float(weight_decay),
                          precision=precision, augment=augment),
        seed=seed,
    )
    return cfg.validated()

def recipe_defaults(model: str, dataset: str, dataset_size: int | None = None) -> dict[str, Any]:
    """The one resolution of the recipe's defaults for ``model`` on ``dataset``: ``part_size``,
    ``epochs``, ``batch_size``, ``lr``, ``width`` and ``weight_decay``, from the dataset's row
    of :data:`DATASET_DEFAULTS` (the paper's, :data:`PAPER_DEFAULTS`, for the user's own data,
    its parts capped at a quarter of its ``dataset_size`` images), the architecture's width
    (:data:`~privaudit.core.defaults.DEFAULT_WIDTHS`) and weight decay
    (:func:`default_weight_decay`), and ``convex-relu``'s own recipe (:data:`CONVEX_DEFAULTS`)."""
    custom = is_custom_dataset(dataset)
    if not custom and dataset not in DATASET_DEFAULTS:
        raise ConfigError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}, npz:PATH or "
                          "folder:PATH")
    defaults = dict(PAPER_DEFAULTS if custom else DATASET_DEFAULTS[dataset], lr=1e-3,
                    width=DEFAULT_WIDTHS.get(model, 512), weight_decay=default_weight_decay(model))
    if custom and dataset_size is not None:
        defaults["part_size"] = max(2, min(defaults["part_size"], dataset_size // 4))
    if model == "convex-relu":
        defaults.update(CONVEX_DEFAULTS.get(dataset, CONVEX_DEFAULTS["cifar10"]))
    return defaults


def _defence(params: DPParams, defence: str | None, knob: float | None, *, kappa: float, dp: bool,
             noise_multiplier: float | None, target_epsilon: float | None) -> tuple[DefenceConfig, dict[str, Any]]:
    """:func:`make_config`'s defence arguments as a :class:`DefenceConfig` with ``params``,
    and the recipe fields the defence sets itself (early stopping's epochs, weight decay's λ)."""
    if defence is None:
        if knob is not None:
            raise ConfigError("`knob` needs `defence` NAME")
        return DefenceConfig.from_fields(kappa=float(kappa), dp=dp, noise_multiplier=noise_multiplier,
                                         target_epsilon=target_epsilon, max_grad_norm=params.max_grad_norm,
                                         delta=params.delta, mechanism=params.mechanism), {}
    from privaudit.defences import get

    chosen = get(defence)
    if kappa or dp or noise_multiplier is not None:
        raise ConfigError(f"one defence a model: `defence` {chosen.name} trains without `kappa` and `dp` (MG "
                          "noise under DP-SGD is `kappa` with `dp`)")
    dp_defence = chosen.name in DP_NAMES
    if dp_defence and knob is not None and target_epsilon is not None:
        raise ConfigError("`dp` needs exactly one of `noise_multiplier` or `target_epsilon`")
    if target_epsilon is not None and not dp_defence:
        raise ConfigError("`noise_multiplier` and `target_epsilon` need `dp`")
    value = 0.0 if dp_defence and knob is None and target_epsilon is not None else chosen.check_knob(knob)
    eps = None if target_epsilon is None else float(target_epsilon)
    return (DefenceConfig(params=params).with_setting(chosen.name, value, target_epsilon=eps),
            chosen.recipe_fields(value))


#: what :meth:`RunConfig.validated` checks, in order (the first broken rule is the error)
CONFIG_RULES: tuple[Callable[[RunConfig], None], ...] = (
    role_is_known, dataset_is_known, model_is_known, parts_hold_the_canaries, pool_place_only_for_references,
    dp_settings_in_range, _check_defence, optimiser_in_range, convex_relu_fits_its_bound,
    augmentation_fits_the_data, precision_fits_the_defence, seed_in_range,
)
