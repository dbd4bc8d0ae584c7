"""Label smoothing, knob α: the model trains on the targets (1 − α)·onehot(y) + α/K instead of
the one-hot label (K classes), so it is never pushed to full confidence (Szegedy et al.,
*Rethinking the Inception Architecture for Computer Vision*, CVPR 2016, arXiv 1512.00567).
The targets are built explicitly (:meth:`LabelSmoothing.soft_targets`), one soft row per
member, for K models at once (:mod:`privaudit.defences.terms`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob, knobs

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch


def smoothed(t: torch.Tensor, alpha: float | torch.Tensor) -> torch.Tensor:
    """(1 − α)·t + α/K of targets ``t`` (…, K); α a number or a tensor broadcasting against t."""
    return t * (1.0 - alpha) + alpha / t.shape[-1]


class LabelSmoothing(Defence):
    name = "label-smoothing"
    tag = "ls"
    title = "label smoothing"
    knob = Knob("alpha", "α", 0.0, 0.99, grid=(0.1, 0.3, 0.6), low_open=True)
    paper = "Szegedy et al., Rethinking the Inception Architecture for Computer Vision (CVPR 2016, arXiv 1512.00567)"
    formula = "target (1 − α)·onehot(y) + α/K"
    soft_labels = True

    def soft_targets(self, t: torch.Tensor, values: tuple[float, ...]) -> torch.Tensor:
        return smoothed(t, knobs(values, t))


DEFENCE = LabelSmoothing()
