"""MixUp, knob α: each batch is replaced by convex combinations of its samples, λ·x_i +
(1 − λ)·x_π(i) with the same mix of their labels, λ ~ Beta(α, α) drawn once per batch and π
a random permutation of the batch (Zhang et al., *mixup: Beyond Empirical Risk
Minimization*, ICLR 2018, arXiv 1710.09412). The loss is the cross-entropy against the mixed
labels, which equals λ·CE(z, y_i) + (1 − λ)·CE(z, y_π(i)).

The model never trains on an unmixed member, but the unmixed member is what leaks most (the
attacks query it; the mixes are fresh every step and nobody but the trainer sees them), so
the attacks query the plain image as always."""

from __future__ import annotations

from typing import Any

from privaudit.defenses.base import Defense, Knob, TrainingContext, TrainingHooks


class _Mix(TrainingHooks):
    def __init__(self, alpha: float, num_classes: int):
        self.alpha, self.num_classes = alpha, num_classes
        self.generator: Any = None  # the run's generators, handed over by setup
        self.rng: Any = None
        self.last_lambda: float | None = None

    def setup(self, ctx: TrainingContext) -> None:
        self.generator, self.rng = ctx.generator, ctx.rng

    def targets(self, x, y):
        import torch.nn.functional as F

        return F.one_hot(y, self.num_classes).to(x.dtype)

    def view(self, x, t):
        import torch

        lam = float(self.rng.beta(self.alpha, self.alpha))
        self.last_lambda = lam
        perm = torch.randperm(len(x), generator=self.generator, device=x.device)
        return lam * x + (1.0 - lam) * x[perm], lam * t + (1.0 - lam) * t[perm]


class MixUp(Defense):
    name = "mixup"
    tag = "mix"
    title = "MixUp"
    knob = Knob("alpha", "α", 0.0, 100.0, grid=(0.2, 0.5, 1.0), low_open=True, search_max=64.0)
    paper = "Zhang et al., mixup: Beyond Empirical Risk Minimization (ICLR 2018, arXiv 1710.09412)"
    formula = "x̃ = λx_i + (1 − λ)x_j, ỹ likewise, λ ~ Beta(α, α)"

    def hooks(self, value: float, num_classes: int) -> TrainingHooks:
        return _Mix(value, num_classes)

    def stack_terms(self, value: float, num_classes: int) -> dict[str, float]:
        return {"mixup": float(value)}


DEFENSE = MixUp()
