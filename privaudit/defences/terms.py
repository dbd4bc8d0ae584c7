"""Training-side defences as terms of one step, each formula written once for K models.

A defence that changes only what one training step trains on or descends (label smoothing,
the confidence penalty, additive input noise, MixUp, RelaxLoss, HAMP) states its formula once,
batched over K models trained at once: tensors with a leading model axis (inputs (K, B, …),
labels (K, B), soft targets and logits (K, B, C)) and the knob per model (one float each).
:class:`StepTerms` applies each model's defence to that model's slice; the stacked engine
(:mod:`privaudit.training.stacked`, many MLPs at once) uses it for its K models, and one-by-one
training for one (K = 1) through :class:`TermHooks`, the plain loop's hooks. The stages, in a
step's order (each a method of :class:`~privaudit.defences.base.Defence` that does nothing by
default):

1. ``soft_targets(t, values)``: each member's training target from its one-hot label,
   (K, N, C) → (K, N, C), once per run (label smoothing, HAMP);
2. ``draw(value, x, draws)``: one model's random draws for a batch, from that model's own
   generators in the order its own run draws them (MixUp's λ and permutation, additive
   noise's ε), then ``view(x, t, values, drawn)``: the batch as the step trains on it;
3. ``objective(log_p, ce, y, values, epoch)``: each model's objective to descend, (K,), from
   its log-probabilities, its batch-mean cross-entropy against the targets and its labels (the confidence
   penalty, HAMP's entropy bonus, RelaxLoss's three branches); the plain objective is ``ce``.

What a model reports (its loss history and loss trace) is the cross-entropy against its
targets, ``−Σ_c t_c log softmax(z)_c`` per row, in every case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from privaudit.defences.hooks import TrainingContext, TrainingHooks


class Terms(Protocol):
    """What :class:`StepTerms` asks of a defence (:class:`~privaudit.defences.base.Defence`
    answers it): its name, whether it has terms and which stages, and the stages themselves."""

    name: str
    soft_labels: bool

    @property
    def has_terms(self) -> bool: ...

    def stage(self, name: str) -> bool: ...

    def soft_targets(self, t: torch.Tensor, values: tuple[float, ...]) -> torch.Tensor: ...

    def draw(self, value: float, x: torch.Tensor, draws: Draws) -> object: ...

    def view(self, x: torch.Tensor, t: torch.Tensor | None, values: tuple[float, ...],
             drawn: list[Any]) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def objective(self, log_p: torch.Tensor, ce: torch.Tensor, y: torch.Tensor | None,
                  values: tuple[float, ...], epoch: int) -> torch.Tensor: ...


@dataclass(frozen=True)
class Draws:
    """One model's generators for its defence's draws: on the device (torch) and on the host
    (NumPy), both seeded from the model's ``defense`` stream."""

    generator: torch.Generator
    rng: np.random.Generator


@dataclass(frozen=True)
class _Group:
    """The models of a run that train with one defence: their positions and knobs."""

    defence: Terms
    models: tuple[int, ...]
    values: tuple[float, ...]
    whole: bool  # every model of the run: no slicing

    def take(self, t: torch.Tensor) -> torch.Tensor:
        return t if self.whole else t[list(self.models)]

    def put(self, t: torch.Tensor, part: torch.Tensor) -> torch.Tensor:
        if self.whole:
            return part
        out = t.clone()
        out[list(self.models)] = part
        return out


class StepTerms:
    """The defence terms of K models' training steps (module docstring). ``settings``: per
    model its defence (None or one without terms: the plain step) and knob; ``draws``: per
    model its generators (needed by the defences that draw)."""

    def __init__(self, settings: Sequence[tuple[Terms | None, float]], num_classes: int,
                 draws: Sequence[Draws | None] = ()):
        by_name: dict[str, list[int]] = {}
        for k, (d, _) in enumerate(settings):
            if d is not None and d.has_terms:
                by_name.setdefault(d.name, []).append(k)
        self.groups = [_Group(settings[ks[0]][0], tuple(ks), tuple(float(settings[k][1]) for k in ks),  # type: ignore[arg-type]
                              len(ks) == len(settings)) for ks in by_name.values()]
        self.num_classes = num_classes
        self.draws = list(draws)
        #: some model trains on soft targets (K, B, C); else every model on its labels
        self.soft = any(g.defence.soft_labels for g in self.groups)
        self._objectives = [g for g in self.groups if g.defence.stage("objective")]
        self._views = [g for g in self.groups if g.defence.stage("view")]
        self.last_drawn: list[Any] = []  # the last batch's draws (of the last defence that drew)

    @property
    def active(self) -> bool:
        """Whether any model's step differs from the plain one."""
        return bool(self.groups)

    def targets(self, y: torch.Tensor) -> torch.Tensor | None:
        """The members' training targets (K, N, C), float64, from their labels (K, N); None
        when every model trains on its labels."""
        if not self.soft:
            return None
        t = F.one_hot(y, self.num_classes).to(torch.float64)
        for g in self.groups:
            if g.defence.stage("soft_targets"):
                t = g.put(t, g.defence.soft_targets(g.take(t), g.values))
        return t

    def view(self, x: torch.Tensor, t: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The batch (x, t) of every model as its step trains on it: each model's draws from
        its own generators, then its defence's view."""
        for g in self._views:
            drawn = [g.defence.draw(v, x[k], self.draws[k]) for k, v in zip(g.models, g.values)]  # type: ignore[arg-type]
            xs, ts = g.defence.view(g.take(x), None if t is None else g.take(t), g.values, drawn)
            x = g.put(x, xs)
            t = None if t is None or ts is None else g.put(t, ts)
            self.last_drawn = drawn
        return x, t

    @staticmethod
    def row_losses(log_p: torch.Tensor, y: torch.Tensor | None, t: torch.Tensor | None) -> torch.Tensor:
        """Each row's cross-entropy (K, B) from its log-probabilities ``log_p`` (K, B, C)
        against its soft target ``t`` (K, B, C), or its label ``y`` (K, B) when ``t`` is None."""
        if t is None:
            assert y is not None
            return -log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        return -(t * log_p).sum(-1)

    def _objective(self, g: _Group, z: torch.Tensor, y: torch.Tensor | None, t: torch.Tensor | None,
                   epoch: int) -> torch.Tensor:
        """The objective (|S|,) of group ``g``'s models from their logits ``z`` (|S|, B, C)."""
        log_p = F.log_softmax(z.float(), dim=-1)
        return g.defence.objective(log_p, self.row_losses(log_p, y, t).mean(-1), y, g.values, epoch)

    def objective(self, z: torch.Tensor, y: torch.Tensor | None, t: torch.Tensor | None,
                  epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(each model's objective (K,), each row's reported loss (K, B)) of logits ``z``."""
        log_p = F.log_softmax(z.float(), dim=-1)
        rows = self.row_losses(log_p, y, t)
        ce = rows.mean(-1)
        objective = ce
        for g in self._objectives:
            part = g.defence.objective(g.take(log_p), g.take(ce), None if y is None else g.take(y), g.values, epoch)
            objective = g.put(objective, part)
        return objective, rows

    def gradients(self, z: torch.Tensor, y: torch.Tensor | None, t: torch.Tensor | None,
                  epoch: int) -> list[tuple[list[int], torch.Tensor]]:
        """∂objective_k/∂z (|S|, B, C) of the models S whose defence has an objective, one
        entry per defence: (S, gradient), by autograd through the formula above."""
        out = []
        for g in self._objectives:
            zs = g.take(z).detach().requires_grad_(True)
            with torch.enable_grad():
                part = self._objective(g, zs, None if y is None else g.take(y), None if t is None else g.take(t),
                                          epoch)
                (grad,) = torch.autograd.grad(part.sum(), zs)
            out.append((list(g.models), grad))
        return out


class TermHooks(TrainingHooks):
    """The plain loop's hooks of a defence made of step terms: :class:`StepTerms` for one
    model (K = 1). Draws come from the run's generators, handed over by :meth:`setup`; the
    targets a batch carries are the labels (N,), or soft targets (N, C) for a defence that
    trains on them."""

    def __init__(self, defence: Terms, value: float, num_classes: int):
        self.defence, self.value, self.num_classes = defence, float(value), num_classes
        self.terms = StepTerms([(defence, value)], num_classes)

    def setup(self, ctx: TrainingContext) -> None:
        self.terms = StepTerms([(self.defence, self.value)], self.num_classes, [Draws(ctx.generator, ctx.rng)])

    def targets(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = self.terms.targets(y[None])
        return y if t is None else t[0].to(x.dtype)

    def view(self, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        soft = t is not None and t.dim() == 2
        xs, ts = self.terms.view(x[None], t[None] if soft else None)
        return xs[0], (ts[0] if soft and ts is not None else t)

    def loss(self, logits: torch.Tensor, t: torch.Tensor, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        soft = t.dim() == 2
        objective, rows = self.terms.objective(logits.float()[None], None if soft else t[None],
                                               t.float()[None] if soft else None, epoch)
        return objective[0], rows[0].mean().detach()
