"""Multiplicative Gaussian input masking ("MG noise"), docs/methods/a-mg-noise.md A.1.

Kolomvaki et al., *Convergence Analysis of Two-Layer Neural Networks under Gaussian Input
Masking* (arXiv 2602.17423): every training input x is replaced by x ⊙ c with
c ~ N(1, κ² I), a fresh value per sample, per coordinate and per optimisation step, applied
to the *normalised* inputs, at training time only.
"""

from __future__ import annotations

import torch


def mg_mask(shape: torch.Size | tuple[int, ...], kappa: float, generator: torch.Generator,
            device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A mask c = 1 + κ·ε with ε ~ N(0, 1) i.i.d., of the given shape (batch first)."""
    eps = torch.randn(tuple(shape), generator=generator, device=device, dtype=dtype)
    return eps.mul_(kappa).add_(1.0)


def apply_mg_noise(x: torch.Tensor, kappa: float, generator: torch.Generator) -> torch.Tensor:
    """x ⊙ c with a fresh mask c ~ N(1, κ²) per element; returns ``x`` itself when κ = 0."""
    if kappa == 0:
        return x
    return x * mg_mask(x.shape, kappa, generator, device=x.device, dtype=x.dtype)
