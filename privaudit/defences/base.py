"""The one interface every defence implements.

A defence is a :class:`Defence`: its name, its knob (the one number that sets how strong it
is, with its range, the audit's default grid and which way is stronger), the paper it comes
from, and what it changes:

* a **training-side** defence changes how the model is trained. Its knob is the run
  config's ``defence.knob`` (part of the config hash, so a model trained with α = 0.1 is
  never reused for α = 0.2), with the recipe fields it sets itself
  (:meth:`Defence.recipe_fields`), and, where the plain loop must do something else,
  either **step terms**, its formula written once for K models trained at once
  (:mod:`privaudit.defences.terms`: the members' soft targets, a batch's view, the objective;
  label smoothing, the confidence penalty, additive noise, MixUp, RelaxLoss, HAMP), which both
  training engines apply, or :class:`TrainingHooks` of its own, for what needs more than a
  step (adversarial regularisation's inference model, distillation's teachers);
* an **output-side** defence trains the model as it is and changes only what a query
  returns (:meth:`Defence.release`): every attack, the model's own evaluation aside, sees the
  released scores.

The module holds no torch at import time (the command line lists the defences before any
heavy import); hooks import torch when they are built.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from privaudit.defences.hooks import TrainingHooks
from privaudit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from privaudit.defences.terms import Draws


class RunConfig(Protocol):
    """What a defence reads of a run's config (:class:`privaudit.core.config.RunConfig`,
    whose layer lies above the defences'): its model, training recipe and defence."""

    @property
    def model(self) -> Any: ...

    @property
    def train(self) -> Any: ...

    @property
    def defence(self) -> Any: ...


TRAINING = "training"
OUTPUT = "output"


@dataclass(frozen=True)
class Knob:
    """A defence's one setting: ``name`` (the word, e.g. ``alpha``), ``symbol`` (``α``), its
    range [``low``, ``high``] (``low_open``: ``low`` itself excluded), whether it is an
    integer, the audit's default ``grid`` (weakest first), and ``stronger``: ``higher`` when
    a larger value protects more, ``lower`` when a smaller one does (fewer epochs, fewer
    digits, fewer scores)."""

    name: str
    symbol: str
    low: float
    high: float
    grid: tuple[float, ...]
    low_open: bool = False
    integer: bool = False
    stronger: str = "higher"
    search_max: float | None = None  #: the largest value an accuracy search tries (default: ``high``)
    field: str = "knob"  #: the setting that holds it (MG noise's ``kappa``, DP's ``noise_multiplier``)

    def range_text(self) -> str:
        left = "(" if self.low_open else "["
        num: Callable[[float], str] = (lambda v: f"{int(v)}") if self.integer else (lambda v: f"{v:g}")
        return f"{left}{num(self.low)}, {num(self.high)}]"

    def check(self, defence: str, value: Any) -> float:
        """``value`` as a float inside the range, or a one-line :class:`ConfigError`."""
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if ok:
            v = float(value)
            ok = (v > self.low if self.low_open else v >= self.low) and v <= self.high
            ok = ok and (not self.integer or v == int(v))
        if not ok:
            kind = "an integer" if self.integer else "a number"
            raise ConfigError(f"`{self.field}` for {defence} is its {self.name} {self.symbol}: {kind} in "
                              f"{self.range_text()} (got {value})")
        return float(value)

    @property
    def strongest(self) -> float:
        """The default grid's strongest value (the largest, or the smallest for a ``lower`` knob)."""
        return min(self.grid) if self.stronger == "lower" else max(self.grid)

    def text(self, value: float) -> str:
        """``α=0.1``, ``k=3``."""
        return f"{self.symbol}={int(value) if self.integer else f'{value:g}'}"


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """H(softmax(z)) over the last axis, in nats."""
    import torch

    return entropy_of(torch.log_softmax(logits, dim=-1))


def entropy_of(log_p: torch.Tensor) -> torch.Tensor:
    """H = −Σ p log p over the last axis of log-probabilities ``log_p``, in nats."""
    return -(log_p.exp() * log_p).sum(-1)


def knobs(values: tuple[float, ...], like: torch.Tensor) -> torch.Tensor:
    """Per-model knob values as a tensor shaped to broadcast against ``like`` (K, …)."""
    import torch

    return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *[1] * (like.dim() - 1))


class Defence:
    """One defence (module docstring). Subclasses set the class attributes and override what
    they change."""

    name: str = ""
    tag: str = ""          #: short form in folder names (``ls`` for label smoothing)
    title: str = ""        #: as the report names it
    side: str = TRAINING
    knob: Knob | None = None
    paper: str = ""        #: the paper, by title and arXiv id where it has one
    formula: str = ""      #: what it does, in one line
    #: the config fields it sets itself (so that they are not also set by the user)
    sets: tuple[str, ...] = ()
    #: the trainer hands the hooks a reference set (:attr:`TrainingContext.reference`)
    needs_reference: bool = False
    #: the trainer hands the hooks a way to train sub-models (:attr:`TrainingContext.train_submodel`)
    needs_submodels: bool = False

    # -- configuration -------------------------------------------------------------------
    def check_knob(self, value: Any) -> float:
        if self.knob is None:
            if value not in (None, 0, 0.0):
                raise ConfigError(f"{self.name} takes no `knob`")
            return 0.0
        if value is None:
            raise ConfigError(f"{self.name} needs `knob`, its {self.knob.name} {self.knob.symbol} in "
                              f"{self.knob.range_text()}")
        return self.knob.check(self.name, value)

    def recipe_fields(self, value: float) -> dict[str, Any]:
        """The training recipe's fields this defence sets itself at knob ``value`` (early
        stopping's ``epochs``, weight decay's ``weight_decay``); the knob itself is the
        config's ``defence.knob``."""
        return {}

    def validate(self, cfg: RunConfig) -> None:
        """Further checks of a config that uses this defence (model, recipe); raise
        :class:`ConfigError`."""

    def setting(self, value: float) -> str:
        """The setting as the report names it: ``label smoothing α=0.1``."""
        return self.title if self.knob is None else f"{self.title} {self.knob.text(value)}"

    def label(self, value: float) -> str:
        """The setting in folder names: ``ls0.1``."""
        if self.knob is None:
            return self.tag
        return f"{self.tag}{int(value) if self.knob.integer else f'{value:g}'}"

    # -- the accuracy search -------------------------------------------------------------
    @property
    def searchable(self) -> bool:
        """Whether the knob moves test accuracy (a training-side defence with a knob); an
        output-side defence keeps the model's accuracy at every setting."""
        return self.side == TRAINING and self.knob is not None

    def search_space(self, cfg: RunConfig) -> tuple[float, float, Callable[[float], float],
                                                    Callable[[float], float]]:
        """How :func:`privaudit.analysis.matching.match_strength` searches this knob for a
        target accuracy: (first strength to try, largest strength, strength → knob value,
        rounding of a strength). Strength s ≥ 0 grows with protection, s = 0 the undefended
        baseline; here s is the knob itself (a ``higher`` knob), its first try the default
        grid's strongest value."""
        knob = self.knob
        assert knob is not None  # searched only when searchable: a knob of its own
        top = knob.search_max if knob.search_max is not None else knob.high
        rounder: Callable[[float], float] = (lambda s: float(max(0, round(s)))) if knob.integer else _three_figures
        return float(max(knob.grid)), float(top), (lambda s: s), rounder

    # -- what it changes ------------------------------------------------------------------
    def hooks(self, value: float, num_classes: int) -> TrainingHooks | None:
        """The training loop's hooks (None: the plain loop). A defence made of step terms
        (:attr:`has_terms`) gets them from :class:`privaudit.defences.terms.TermHooks`."""
        if not self.has_terms:
            return None
        from privaudit.defences.terms import TermHooks

        return TermHooks(self, value, num_classes)

    def model_kwargs(self, value: float) -> dict[str, Any]:
        """Extra arguments of :func:`privaudit.models.build_model` while training."""
        return {}

    # -- step terms: the formula of a defence that changes a step only, batched over K models --
    #: trains on soft targets (N, C) instead of labels (label smoothing, MixUp, HAMP)
    soft_labels: bool = False

    def stage(self, name: str) -> bool:
        """Whether the defence changes step stage ``name`` (``soft_targets``, ``view``,
        ``objective``: it overrides that method)."""
        return getattr(type(self), name) is not getattr(Defence, name)

    @property
    def has_terms(self) -> bool:
        """Whether the defence changes training through step terms
        (:mod:`privaudit.defences.terms`)."""
        return any(self.stage(s) for s in ("soft_targets", "view", "objective"))

    @property
    def stacks(self) -> bool:
        """Whether the stacked engine (:mod:`privaudit.training.stacked`, many small MLPs trained
        as one batched model) trains it beside other models: the plain loop (a recipe value or
        an output transform), or step terms only; not a defence with hooks of its own, a
        reference set, sub-models or a model change."""
        knob = self.knob.grid[0] if self.knob is not None else 0.0
        return (type(self).hooks is Defence.hooks and not self.needs_reference and not self.needs_submodels
                and not self.model_kwargs(knob))

    def soft_targets(self, t: torch.Tensor, values: tuple[float, ...]) -> torch.Tensor:
        """K models' training targets (K, N, C) from one-hot labels ``t``, model k's knob
        ``values[k]``."""
        return t

    def draw(self, value: float, x: torch.Tensor, draws: Draws) -> object:
        """One model's random draws for its batch ``x`` (B, …), from its generators ``draws``
        (:class:`privaudit.defences.terms.Draws`), as :meth:`view` uses them (of a type each
        defence chooses: MixUp's (λ, π), additive noise's ε; the caller only hands them back)."""
        return None

    def view(self, x: torch.Tensor, t: torch.Tensor | None, values: tuple[float, ...],
             drawn: list[Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """K models' batches (inputs (K, B, …), soft targets (K, B, C) or None) as their steps
        train on them, from each model's draws ``drawn[k]`` (what its :meth:`draw` returned)."""
        return x, t

    def objective(self, log_p: torch.Tensor, ce: torch.Tensor, y: torch.Tensor | None,
                  values: tuple[float, ...], epoch: int) -> torch.Tensor:
        """K models' objectives to descend (K,), from their log-probabilities ``log_p``
        (K, B, C, the logits' log-softmax), batch-mean cross-entropies ``ce`` (K,)
        against their targets and labels ``y`` (K, B) (None for soft targets), in ``epoch``
        (counted from 0)."""
        return ce

    @property
    def transforms_output(self) -> bool:
        """Whether queries see :meth:`release`'s transform (the defence overrides it)."""
        return type(self).release is not Defence.release

    def release(self, logits: torch.Tensor, value: float) -> torch.Tensor:
        """What a query returns, as logits (output-side defences; the others return them
        unchanged)."""
        return logits


def released_logits(probs: torch.Tensor) -> torch.Tensor:
    """Released scores (rows of non-negative numbers) as the logits every attack reads:
    log(max(p, FLOOR)). A score the defence zeroes becomes log(FLOOR) = -69, far below any
    real score, so no attack statistic divides by zero."""
    return probs.clamp_min(FLOOR).log()


FLOOR = 1e-30


def _three_figures(x: float) -> float:
    return 0.0 if x <= 0 else float(f"{x:.3g}")
