"""Per-sample loss traces: each member's training loss at each epoch, as the steps computed it.

A by-product of training (Pollock, Shilov, Dodd, de Montjoye, *Free Record-Level Privacy Risk
Evaluation Through Artifact-Based Methods*, arXiv 2411.05743): the step already computes every
row's loss to form its gradient, so keeping it costs one scatter-add per batch and no extra
forward pass. Epoch e's entry for member j is the mean of j's losses over the steps of epoch e
that sampled it (once for full passes; zero, one or more times for Poisson batches, where an
epoch that never sampled j leaves NaN). The loss is the cross-entropy of the logits the step
trained on (the masked, mirrored or mixed view) against the row's training target (the label,
or a defence's soft target), before any defence term: what the sample's loss trajectory is.

Saved in the model's folder as ``loss_trace.npz`` (``trace`` float16 (epochs, members): 2 bytes
a sample and epoch; ``indices`` (members,), the members' dataset indices), covered by the
folder's checksummed manifest. It changes no config hash: a model trained before traces were
recorded simply has none (the loss-trace ranking, :mod:`privaudit.attacks.loss_trace`, says so).
"""

from __future__ import annotations

import numpy as np
import torch

FILE = "loss_trace.npz"
#: members × epochs beyond which no trace is kept (its running sums would take more than about
#: 400 MB while training); a model trained beyond it simply has none
MAX_CELLS = 1 << 26


def traceable(members: int, epochs: int) -> bool:
    """Whether a run of ``members`` × ``epochs`` keeps a loss trace (:data:`MAX_CELLS`)."""
    return members * epochs <= MAX_CELLS


class LossTrace:
    """Accumulates the per-sample losses of ``members`` samples over ``epochs`` epochs.

    ``record(index, losses)`` adds the losses (b,) of member positions ``index`` (b,) in the
    current epoch; ``next_epoch()`` moves on (called before each epoch's first batch, by the
    steps that record). Its sums are allocated at the first epoch, so a trace handed to an engine
    that records none costs nothing and stays :attr:`empty`.
    """

    def __init__(self, members: int, epochs: int, device: torch.device | str = "cpu"):
        self.shape, self.device = (epochs, members), device
        self.sums = self.counts = torch.zeros(0, 0)
        self.epoch = -1

    @property
    def empty(self) -> bool:
        """Whether no step recorded into it (no epoch started)."""
        return self.epoch < 0

    def next_epoch(self) -> None:
        if self.empty:
            self.sums = torch.zeros(self.shape, dtype=torch.float32, device=self.device)
            self.counts = torch.zeros(self.shape, dtype=torch.int16, device=self.device)
        self.epoch += 1

    def record(self, index: torch.Tensor, losses: torch.Tensor) -> None:
        if self.epoch < 0 or self.epoch >= len(self.sums):
            return
        index = index.to(self.sums.device)
        self.sums[self.epoch].index_add_(0, index, losses.detach().to(self.sums))
        self.counts[self.epoch].index_add_(0, index, torch.ones_like(index, dtype=torch.int16))

    def array(self, epochs: int | None = None) -> np.ndarray:
        """The mean loss of each member in each of the first ``epochs`` epochs (all by default),
        float16 (epochs, members); NaN where an epoch did not sample the member."""
        e = self.shape[0] if epochs is None else epochs
        with torch.no_grad():
            mean = self.sums[:e] / self.counts[:e].to(self.sums)  # 0/0 = NaN where not sampled
        return mean.cpu().numpy().astype(np.float16)
