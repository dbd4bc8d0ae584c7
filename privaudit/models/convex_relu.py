"""The convex approximation of a two-layer ReLU network (docs/methods/b-hidden-state.md B.1).

Romijnders & Koskela (arXiv 2407.04884): P gate vectors u_i ~ N(0, I_d), drawn independently
of the data, fix the activation pattern 1[u_iᵀx ≥ 0] of P "neurons"; the model is linear in
the gated copies of the input,

    logits_c(x) = Σ_i 1[u_iᵀx ≥ 0] · xᵀ v_{i,:,c},     v of shape (P, d, C), v = 0 at start,

the Pilanci–Ergen convex reformulation with the cone constraints dropped. With softmax
cross-entropy and an L2 term λ/2‖v‖² the training objective is λ-strongly convex and
smooth, which the hidden-state privacy bound of NoisyCGD needs
(:mod:`privaudit.analysis.hidden_state`).

The P·d features are never materialised: the logits are one product x Wᵀ, W = v arranged as
(P·C, d) (:func:`to_working`), masked by the gates and summed over i.
"""

from __future__ import annotations

import torch
from torch import nn

from privaudit.models.fast_linear import linear


class ConvexReLU(nn.Module):
    """Gated linear model; ``u`` (P, d) is a buffer (saved with the weights), ``v`` (P, d, C)
    the only parameter. Inputs of any shape are flattened to d features."""

    u: torch.Tensor  # the buffer registered in __init__

    def __init__(self, in_features: int, num_classes: int, gates: int = 100):
        super().__init__()
        self.register_buffer("u", torch.randn(gates, in_features))
        self.v = nn.Parameter(torch.zeros(gates, in_features, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return logits_and_gates(x.flatten(1), to_working(self.v), self.u, self.v.shape[2])[0]


def to_working(v: torch.Tensor) -> torch.Tensor:
    """v (P, d, C) → W (P·C, d), row i·C + c = v[i, :, c]: the layout of a dense layer's
    weight (differentiable; NoisyCGD keeps its iterate in this layout)."""
    p, d, c = v.shape
    return v.permute(0, 2, 1).reshape(p * c, d).contiguous()


def logits_and_gates(x: torch.Tensor, w: torch.Tensor, u: torch.Tensor, num_classes: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (B, C) and gates 1[u_iᵀx ≥ 0] (B, P) of flattened inputs ``x`` (B, d) under
    W (P·C, d)."""
    gates = (x @ u.t() >= 0).to(x.dtype)
    z = linear(x, w).view(len(x), len(u), num_classes)
    return (z * gates[:, :, None]).sum(1), gates
