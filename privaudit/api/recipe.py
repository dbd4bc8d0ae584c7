"""One training recipe, from the command line to every model's config.

A :class:`Recipe` holds what the user chooses about how the models are trained, before the
defaults: the architecture, the data, the sizes and the optimisation (``None``: the default
of :func:`privaudit.core.config.make_config`, which depends on the model and dataset). The command line builds one from
its shared recipe options (:data:`privaudit.cli.options.RECIPE_OPTIONS`); the API takes it as ``recipe=`` or as keyword
overrides (:meth:`Recipe.with_overrides`); :meth:`Recipe.config` turns it, with a defence and a
seed, into a validated :class:`~privaudit.core.config.RunConfig`. A new recipe setting is a
field here, a row of the command line's option table, and where the config holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from privaudit.api.results import ShortRepr
from privaudit.errors import ConfigError

if TYPE_CHECKING:
    from privaudit.core.config import RunConfig


@dataclass(frozen=True, repr=False)
class Recipe(ShortRepr):
    """How the models of a command are trained (module docstring).

    model: ``mlp``, ``cnn``, ``cnn-improved``, ``cnn-improved-small``, ``convex-relu``, or
        the user's own (``torchvision:NAME``, ``module:MODULE:CALLABLE``) with ``model_args``
        (``key=value`` strings or a mapping).
    dataset: a dataset's name, or the user's own data (``npz:PATH``, ``folder:PATH``).
    width, part_size, epochs, batch_size, lr, weight_decay: None for the default.
    precision: ``fp32`` or ``bf16``; augment: ``none`` or ``flip``.
    max_grad_norm, delta: DP's clipping norm C and δ (every model of a command carries them).
    canaries: planted worst-case points, ``mislabeled:N`` or ``ood:N`` (None: none).
    """

    model: str = "mlp"
    dataset: str = "cifar10"
    model_args: Any = None
    width: int | None = None
    part_size: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    precision: str = "fp32"
    augment: str = "none"
    max_grad_norm: float = 1.0
    delta: float = 1e-5
    canaries: str | None = None

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def with_overrides(self, overrides: Mapping[str, Any]) -> Recipe:
        """This recipe with ``overrides`` (field name → value) replacing its fields; an unknown
        name is a one-line :class:`ConfigError` listing the fields."""
        unknown = sorted(set(overrides) - set(self.field_names()))
        if unknown:
            raise ConfigError(f"unknown recipe setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                              f"expected some of {', '.join(self.field_names())}")
        return replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def config(self, *, seed: int = 0, dataset_kwargs: Mapping[str, Any] | None = None,
               **defence: Any) -> RunConfig:
        """The validated :class:`~privaudit.core.config.RunConfig` of this recipe at ``seed``
        with ``defence`` (``defense=`` and ``knob=``, or the older ``kappa=``, ``dp=``,
        ``noise_multiplier=``, ``target_epsilon=``); ``dataset_kwargs``: the user's own data's
        fingerprint and size (:meth:`privaudit.pipeline.runs.DataCache.config_kwargs`)."""
        from privaudit.core.config import make_config

        fields_ = {k: v for k, v in self.to_dict().items() if k not in ("model_args", "canaries")}
        return make_config(**fields_, model_args=model_args(self.model_args), canaries=self.canaries or "",
                           seed=seed, **defence, **dict(dataset_kwargs or {}))


def model_args(items: Sequence[str] | dict[str, Any] | None) -> dict[str, Any]:
    """``key=value`` pairs (``--model-arg``) as a dict, a value read as JSON when it parses
    (``3``, ``0.5``, ``true``, ``[1, 2]``), else kept as text; a dict is taken as it is."""
    import json

    if isinstance(items, dict):
        bad = [k for k in items if not str(k).isidentifier()]
        if bad:
            raise ConfigError(f"--model-arg takes a Python identifier as key, got {bad[0]!r}")
        return dict(items)
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = str(item).partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(f"--model-arg takes key=value with a Python identifier as key, got {item!r}")
        if key in out:
            raise ConfigError(f"--model-arg {key} is given twice")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out
