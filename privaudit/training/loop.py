"""The one training loop that every model and defence goes through.

An epoch is: take the epoch's batches from a **batch source**, make each batch the view the
step trains on (:func:`training_view`: the optional flip, then the MG-noise mask; the one
place a mask is applied, for both engines), hand it to the **step** with the epoch's number,
``step(batch, epoch)``, sum the step's losses, report the epoch.
What differs between recipes is only which source and which step are plugged in:

=====================  ====================================  =================================
recipe                 batch source                          step
=====================  ====================================  =================================
plain (Adam)           :func:`shuffled` full passes          Adam on the mean loss
DP-SGD, fast engine    :func:`poisson` (padded to a shape)   :class:`~.dp_engine.GhostDPSGD`
DP-SGD, Opacus         :func:`from_loader` (Opacus's)        Opacus's optimizer
NoisyCGD               :func:`cyclic` fixed batches          clipped, noised gradient step
stacked MLPs           :func:`shuffled` / Poisson per model  Adam on K models at once
=====================  ====================================  =================================

A recipe the stacked engine trains (:mod:`privaudit.training.stacked`: small fp32 MLPs, with
DP-SGD or a defence made of step terms too) goes through the last row whether it trains
alone (K = 1) or beside others, so one recipe is one computation; for every other recipe
:data:`privaudit.training.trainer.TRAINERS` picks the row (the first that applies).

Sources draw from the run's generator lazily, one batch at a time, so the draws interleave
with the masks exactly as they always did (same seed, same batches, same masks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import torch

from privaudit.training.augment import random_flip
from privaudit.training.mg_noise import apply_mg_noise

EpochCallback = Callable[[int, int, float], None]


@dataclass(frozen=True)
class Batch:
    """One step's samples: inputs ``x``, labels ``y``; ``size`` of the rows are real (a
    DP-SGD batch is padded to a fixed shape, the padding rows carry no weight); ``index``, the
    rows' positions among the members where the source knows them (the loss trace's columns,
    :mod:`privaudit.training.trace`)."""

    x: torch.Tensor
    y: torch.Tensor
    size: int
    index: torch.Tensor | None = None


Batches = Callable[[], Iterable[Batch]]  # one epoch's batches
# (batch, epoch from 0) -> (summed loss, samples it covers)
Step = Callable[[Batch, int], "tuple[torch.Tensor | float, int | torch.Tensor]"]


def shuffled(x: torch.Tensor, y: torch.Tensor, batch_size: int, generator: torch.Generator) -> Batches:
    """Full passes in a fresh seeded order every epoch, the last batch smaller."""
    n = len(y)

    def epoch() -> Iterator[Batch]:
        perm = torch.randperm(n, generator=generator, device=x.device)
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            yield Batch(x[idx], y[idx], len(idx), idx)

    return epoch


def poisson(x: torch.Tensor, y: torch.Tensor, sample_rate: float, steps: int, generator: torch.Generator,
            padded_size: Callable[[int], int]) -> Batches:
    """``steps`` Poisson batches an epoch (each member independently with ``sample_rate``),
    each padded by repeating row 0 up to ``padded_size(size)`` rows."""
    from privaudit.training.dp_engine import poisson_batch

    n = len(y)

    def epoch() -> Iterator[Batch]:
        for _ in range(steps):
            idx = poisson_batch(n, sample_rate, generator, x.device)
            size = len(idx)
            if size:
                idx = torch.cat([idx, idx.new_zeros(padded_size(size) - size)])
            yield Batch(x[idx], y[idx], size, idx)

    return epoch


def from_loader(loader: Iterable) -> Batches:
    """The batches of a data loader (Opacus's Poisson loader), one pass an epoch."""

    def epoch() -> Iterator[Batch]:
        for xb, yb in loader:
            yield Batch(xb, yb, len(yb))

    return epoch


def cyclic(x: torch.Tensor, y: torch.Tensor, batches: torch.Tensor) -> Batches:
    """The same fixed batches (rows of index tensor ``batches``, shape (l, b)) in the same
    order every epoch (NoisyCGD)."""

    def epoch() -> Iterator[Batch]:
        for idx in batches:
            yield Batch(x[idx], y[idx], len(idx), idx)

    return epoch


def training_view(x: torch.Tensor, kappa: float, generator: torch.Generator,
                  flip_generator: torch.Generator | None = None) -> torch.Tensor:
    """What one step trains on: the batch, mirrored per sample when the recipe augments
    (``--augment flip``, draws from ``flip_generator``), then masked by MG noise with std
    ``kappa`` (draws from ``generator``)."""
    if flip_generator is not None:
        x = random_flip(x, flip_generator)
    return apply_mg_noise(x, kappa, generator)


def run_epochs(epochs: int, batches: Batches, step: Step, *, view: Callable[[torch.Tensor], torch.Tensor] | None = None,
               on_epoch: EpochCallback | None = None, before_epoch: Callable[[], None] | None = None) -> list:
    """Run ``epochs`` epochs, each batch through ``step(batch, epoch)`` (epochs counted from
    0); returns each epoch's mean training loss (the step's summed loss over the samples it covered; for a step that
    trains K models at once, a list of K means per epoch, and ``on_epoch`` gets their mean)."""
    history: list = []
    for epoch in range(epochs):
        if before_epoch is not None:
            before_epoch()
        total: torch.Tensor | float = 0.0
        count: int | torch.Tensor = 0
        for batch in batches():
            if view is not None:
                batch = replace(batch, x=view(batch.x))
            loss_sum, covered = step(batch, epoch)
            total = total + loss_sum
            count += covered
        if isinstance(total, torch.Tensor) and total.dim() == 1:  # K models trained at once
            covered = count.clamp(min=1) if isinstance(count, torch.Tensor) else max(count, 1)  # one count or K
            history.append((total / covered).tolist())
            reported = sum(history[-1]) / len(history[-1])
        else:
            history.append(float(total) / max(count, 1))
            reported = history[-1]
        if on_epoch is not None:
            on_epoch(epoch + 1, epochs, reported)
    return history
