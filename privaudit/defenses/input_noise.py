"""Additive Gaussian input noise, knob σ: each training input x becomes x + σ·ε with
ε ~ N(0, I), a fresh draw per sample, coordinate and step, on the normalised inputs (so σ is
in units of each pixel's standard deviation). The common baseline beside MG noise, whose
noise is multiplicative: x ⊙ (1 + κ·ε)."""

from __future__ import annotations

from typing import Any

from privaudit.defenses.base import Defense, Knob, TrainingContext, TrainingHooks


class _AddNoise(TrainingHooks):
    def __init__(self, sigma: float):
        self.sigma = sigma
        self.generator: Any = None  # the run's generator, handed over by setup

    def setup(self, ctx: TrainingContext) -> None:
        self.generator = ctx.generator

    def view(self, x, t):
        import torch

        eps = torch.randn(x.shape, generator=self.generator, device=x.device, dtype=x.dtype)
        return x + self.sigma * eps, t


class InputNoise(Defense):
    name = "input-noise"
    tag = "an"
    title = "additive input noise"
    knob = Knob("sigma", "σ", 0.0, 100.0, grid=(0.25, 0.5, 1.0, 2.0), low_open=True, search_max=64.0)
    paper = "a common baseline (Gaussian data augmentation)"
    formula = "x ← x + σ·ε, ε ~ N(0, I) per element and step"

    def hooks(self, value: float, num_classes: int) -> TrainingHooks:
        return _AddNoise(value)

    def stack_terms(self, value: float, num_classes: int) -> dict[str, float]:
        return {"input_noise": float(value)}


DEFENSE = InputNoise()
