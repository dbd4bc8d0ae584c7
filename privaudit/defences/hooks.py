"""The training loop's hooks: what a training-side defence may change in the plain loop
(:class:`TrainingHooks`), with what the trainer hands it (:class:`TrainingContext`). A defence
made of step terms gets its hooks from :class:`privaudit.defences.terms.TermHooks`; the ones
that need more than a step (adversarial regularisation, distillation) write their own.

No torch at import time (:mod:`privaudit.defences.base`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import torch
    from torch import nn


@dataclass
class TrainingContext:
    """What a defence's hooks may use, handed over by the trainer: the model, the members
    (normalised, on the device) and their labels, the number of classes, a seeded generator
    on the device, a seeded NumPy generator for host-side draws, and, for the defences that
    need them, ``reference`` (samples the model does not train on, normalised; adversarial
    regularisation's reference set) and ``train_submodel`` (trains a fresh model of the same
    recipe on given members for ``epochs`` and returns it in eval mode; distillation's
    teachers)."""

    model: nn.Module
    x: torch.Tensor
    y: torch.Tensor
    num_classes: int
    generator: torch.Generator
    rng: np.random.Generator
    epochs: int
    reference: tuple[torch.Tensor, torch.Tensor] | None = None
    train_submodel: Callable[[torch.Tensor, torch.Tensor, int], nn.Module] | None = None


class TrainingHooks:
    """What a training-side defence changes in the plain training loop (Adam over shuffled
    full passes, :mod:`privaudit.training.trainer`). Every default changes nothing: the plain
    loop with these hooks is the plain loop."""

    def setup(self, ctx: TrainingContext) -> None:
        """Called once before the first epoch."""

    def targets(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each member's training target, indexed with the members: the labels (N,), or a
        soft label per member (N, classes)."""
        return y

    def view(self, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch as the step trains on it (after the flip and the MG mask)."""
        return x, t

    def loss(self, logits: torch.Tensor, t: torch.Tensor, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(objective to descend, mean cross-entropy to report) of one batch."""
        ce = cross_entropy(logits, t)
        return ce, ce.detach()

    def after_step(self, model: nn.Module, x: torch.Tensor, t: torch.Tensor) -> None:
        """Called after each update of the model."""


def cross_entropy(logits: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy against labels (N,) or soft targets (N, classes)."""
    import torch.nn.functional as F

    if t.dim() == 1:
        return F.cross_entropy(logits, t)
    return -(t * F.log_softmax(logits, dim=-1)).sum(-1).mean()
