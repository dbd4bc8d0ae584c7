"""Confidence penalty, knob β: the loss is cross-entropy minus β times the entropy of the
model's own prediction, ℓ = CE(z, y) − β·H(softmax(z)), so confident outputs cost (Pereyra
et al., *Regularizing Neural Networks by Penalizing Confident Output Distributions*, arXiv
1701.06548)."""

from __future__ import annotations

from privaudit.defenses.base import Defense, Knob, TrainingHooks, cross_entropy


def entropy(logits):
    """H(softmax(z)) per row, in nats."""
    import torch.nn.functional as F

    logp = F.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


class _Penalty(TrainingHooks):
    def __init__(self, beta: float):
        self.beta = beta

    def loss(self, logits, t, epoch):
        ce = cross_entropy(logits, t)
        return ce - self.beta * entropy(logits).mean(), ce.detach()


class ConfidencePenalty(Defense):
    name = "confidence-penalty"
    tag = "cp"
    title = "confidence penalty"
    knob = Knob("beta", "β", 0.0, 100.0, grid=(0.5, 1.0, 2.0), low_open=True)
    paper = ("Pereyra et al., Regularizing Neural Networks by Penalizing Confident Output Distributions "
             "(arXiv 1701.06548)")
    formula = "ℓ = CE(z, y) − β·H(softmax(z))"

    def hooks(self, value: float, num_classes: int) -> TrainingHooks:
        return _Penalty(value)

    def stack_terms(self, value: float, num_classes: int) -> dict[str, float]:
        return {"penalty": float(value)}


DEFENSE = ConfidencePenalty()
