"""MixUp, knob α: each batch is replaced by convex combinations of its samples, λ·x_i +
(1 − λ)·x_π(i) with the same mix of their labels, λ ~ Beta(α, α) drawn once per batch and π
a random permutation of the batch (Zhang et al., *mixup: Beyond Empirical Risk
Minimization*, ICLR 2018, arXiv 1710.09412). The loss is the cross-entropy against the mixed
labels, which equals λ·CE(z, y_i) + (1 − λ)·CE(z, y_π(i)).

Each model draws λ from its own NumPy generator, then π from its own torch generator, once per
batch; the mixes are taken for K models at once (:mod:`privaudit.defences.terms`).

The model never trains on an unmixed member, but the unmixed member is what leaks most (the
attacks query it; the mixes are fresh every step and nobody but the trainer sees them), so
the attacks query the plain image as always."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from privaudit.defences.terms import Draws


def mixed(x: torch.Tensor, lam: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """λ·x + (1 − λ)·x[π] of K batches ``x`` (K, B, …), λ (K,) and permutations π (K, B)."""
    import torch

    lam = lam.view(-1, *[1] * (x.dim() - 1))
    partners = torch.stack([xk[pk] for xk, pk in zip(x, perm)])
    return lam * x + (1.0 - lam) * partners


class MixUp(Defence):
    name = "mixup"
    tag = "mix"
    title = "MixUp"
    knob = Knob("alpha", "α", 0.0, 100.0, grid=(0.2, 0.5, 1.0), low_open=True, search_max=64.0)
    paper = "Zhang et al., mixup: Beyond Empirical Risk Minimization (ICLR 2018, arXiv 1710.09412)"
    formula = "x̃ = λx_i + (1 − λ)x_j, ỹ likewise, λ ~ Beta(α, α)"
    soft_labels = True

    def draw(self, value: float, x: torch.Tensor, draws: Draws) -> tuple[float, torch.Tensor]:
        """(λ, π): λ ~ Beta(α, α) from the host generator, then π from the device one."""
        import torch

        lam = float(draws.rng.beta(value, value))
        return lam, torch.randperm(len(x), generator=draws.generator, device=x.device)

    def view(self, x: torch.Tensor, t: torch.Tensor | None, values: tuple[float, ...],
             drawn: list[tuple[float, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        assert t is not None  # soft_labels: every row carries its soft target
        lam = torch.tensor([d[0] for d in drawn], dtype=x.dtype, device=x.device)
        perm = torch.stack([d[1] for d in drawn])
        return mixed(x, lam, perm), mixed(t, lam.to(t.dtype), perm)


DEFENCE = MixUp()
