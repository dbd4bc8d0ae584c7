"""Label smoothing, knob α: the model trains on the targets (1 − α)·onehot(y) + α/K instead of
the one-hot label (K classes), so it is never pushed to full confidence (Szegedy et al.,
*Rethinking the Inception Architecture for Computer Vision*, CVPR 2016, arXiv 1512.00567).
The targets are built explicitly (:meth:`_Smooth.targets`), one soft row per member."""

from __future__ import annotations

from privaudit.defenses.base import Defense, Knob, TrainingHooks


def smoothed(y, num_classes: int, alpha: float):
    """(1 − α)·onehot(y) + α/K, shape (N, K)."""
    import torch.nn.functional as F

    return F.one_hot(y, num_classes).float() * (1.0 - alpha) + alpha / num_classes


class _Smooth(TrainingHooks):
    def __init__(self, alpha: float, num_classes: int):
        self.alpha, self.num_classes = alpha, num_classes

    def targets(self, x, y):
        return smoothed(y, self.num_classes, self.alpha).to(x.dtype)


class LabelSmoothing(Defense):
    name = "label-smoothing"
    tag = "ls"
    title = "label smoothing"
    knob = Knob("alpha", "α", 0.0, 0.99, grid=(0.1, 0.3, 0.6), low_open=True)
    paper = "Szegedy et al., Rethinking the Inception Architecture for Computer Vision (CVPR 2016, arXiv 1512.00567)"
    formula = "target (1 − α)·onehot(y) + α/K"

    def hooks(self, value: float, num_classes: int) -> TrainingHooks:
        return _Smooth(value, num_classes)

    def stack_terms(self, value: float, num_classes: int) -> dict[str, float]:
        return {"smoothing": float(value)}


DEFENSE = LabelSmoothing()
