"""Confidence penalty, knob β: the loss is cross-entropy minus β times the entropy of the
model's own prediction, ℓ = CE(z, y) − β·H(softmax(z)), so confident outputs cost (Pereyra
et al., *Regularizing Neural Networks by Penalizing Confident Output Distributions*, arXiv
1701.06548). Written for K models at once (:mod:`privaudit.defences.terms`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob, entropy, entropy_of, knobs

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

__all__ = ["ConfidencePenalty", "DEFENCE", "entropy"]


class ConfidencePenalty(Defence):
    name = "confidence-penalty"
    tag = "cp"
    title = "confidence penalty"
    knob = Knob("beta", "β", 0.0, 100.0, grid=(0.5, 1.0, 2.0), low_open=True)
    paper = ("Pereyra et al., Regularizing Neural Networks by Penalizing Confident Output Distributions "
             "(arXiv 1701.06548)")
    formula = "ℓ = CE(z, y) − β·H(softmax(z))"

    def objective(self, log_p: torch.Tensor, ce: torch.Tensor, y: torch.Tensor | None,
                  values: tuple[float, ...], epoch: int) -> torch.Tensor:
        """CE − β·mean_b H(softmax(z_b)), per model."""
        return ce - knobs(values, ce) * entropy_of(log_p).mean(-1)


DEFENCE = ConfidencePenalty()
