"""The convex approximation of a two-layer ReLU network (papers.md B.1).

Romijnders & Koskela (arXiv 2407.04884): P gate vectors u_i ~ N(0, I_d), drawn independently
of the data, fix the activation pattern 1[u_iᵀx ≥ 0] of P "neurons"; the model is linear in
the gated copies of the input,

    logits_c(x) = Σ_i 1[u_iᵀx ≥ 0] · xᵀ v_{i,:,c},     v of shape (P, d, C), v = 0 at start,

the Pilanci–Ergen convex reformulation with the cone constraints dropped. With softmax
cross-entropy and an L2 term λ/2‖v‖² the training objective is λ-strongly convex and
smooth, which the hidden-state privacy bound of NoisyCGD needs
(:mod:`privaudit.hidden_state`).

The P·d features are never materialised: logits are one product x W with W = v arranged as
(d, P·C), masked by the gates and summed over i.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvexReLU(nn.Module):
    """Gated linear model; ``u`` (P, d) is a buffer (saved with the weights), ``v`` (P, d, C)
    the only parameter. Inputs of any shape are flattened to d features."""

    def __init__(self, in_features: int, num_classes: int, gates: int = 100):
        super().__init__()
        self.register_buffer("u", torch.randn(gates, in_features))
        self.v = nn.Parameter(torch.zeros(gates, in_features, num_classes))

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """1[u_iᵀx ≥ 0] as floats, shape (B, P); ``x`` flattened, (B, d)."""
        return (x @ self.u.t() >= 0).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        p, d, c = self.v.shape
        w = self.v.permute(1, 0, 2).reshape(d, p * c)
        z = (x @ w).view(len(x), p, c)
        return (z * self.gates(x)[:, :, None]).sum(1)
