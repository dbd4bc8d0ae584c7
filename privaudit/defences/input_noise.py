"""Additive Gaussian input noise, knob σ: each training input x becomes x + σ·ε with
ε ~ N(0, I), a fresh draw per sample, coordinate and step, on the normalised inputs (so σ is
in units of each pixel's standard deviation). The common baseline beside MG noise, whose
noise is multiplicative: x ⊙ (1 + κ·ε). ε is drawn per model from its own generator, one draw
of the batch's shape per step; the sum is taken for K models at once
(:mod:`privaudit.defences.terms`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob, knobs

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from privaudit.defences.terms import Draws


class InputNoise(Defence):
    name = "input-noise"
    tag = "an"
    title = "additive input noise"
    knob = Knob("sigma", "σ", 0.0, 100.0, grid=(0.25, 0.5, 1.0, 2.0), low_open=True, search_max=64.0)
    paper = "a common baseline (Gaussian data augmentation)"
    formula = "x ← x + σ·ε, ε ~ N(0, I) per element and step"

    def draw(self, value: float, x: torch.Tensor, draws: Draws) -> torch.Tensor:
        import torch

        return torch.randn(x.shape, generator=draws.generator, device=x.device, dtype=x.dtype)

    def view(self, x: torch.Tensor, t: torch.Tensor | None, values: tuple[float, ...],
             drawn: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor | None]:
        import torch

        return x + knobs(values, x) * torch.stack(drawn), t


DEFENCE = InputNoise()
