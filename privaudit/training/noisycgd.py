"""NoisyCGD, noisy cyclic gradient descent, on the convex two-layer ReLU approximation
(docs/methods.md B.2).

Fixed disjoint batches of size b, visited in the same order every epoch (a seeded
permutation of the members, drawn once; the last n mod b members, which would form a
smaller batch with a larger sensitivity, are left out and never touched), and per step

    g = (1/b) Σ_{j∈batch} clip(∇ℓ_j(v), C) + N(0, (σC/b)² I) + λv,     v ← v − ηg,

with clip(g, C) = g · min(1, C/(‖g‖ + 1e-6)) as in Opacus. Only the last iterate is
released; its privacy is :func:`privaudit.analysis.hidden_state.noisycgd_epsilon`.

Per-sample gradients in closed form. For softmax cross-entropy, with r_j = softmax(z_j) −
onehot(y_j) and gates g_j ∈ {0, 1}^P, the gradient of ℓ_j with respect to v_{i,:,c} is
g_ji · x_j · r_jc, so ‖∇ℓ_j‖² = ‖x_j‖² ‖r_j‖² Σ_i g_ji, and the clipped batch mean is one
matrix product, Aᵀ X with A_j = f_j (g_j ⊗ r_j)/b (f_j the clip factors): no per-sample
gradient is ever formed. The working copy of v is kept as W of shape (P·C, d), the layout of
a dense layer's weight, so both products run through oneDNN on x86 CPUs.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.nn import functional as F

from privaudit.models.convex_relu import ConvexReLU, logits_and_gates, to_working
from privaudit.training.dp_engine import GaussianNoise, dp_compute_threads
from privaudit.training.loop import Batch, cyclic, run_epochs
from privaudit.models.fast_linear import matmul_tn


def from_working(w: torch.Tensor, gates: int) -> torch.Tensor:
    """Inverse of :func:`privaudit.models.convex_relu.to_working`."""
    pc, d = w.shape
    return w.view(gates, pc // gates, d).permute(0, 2, 1).contiguous()


def per_sample_gradient_norms(x: torch.Tensor, residual: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """‖∇_v ℓ_j‖ = ‖x_j‖ ‖r_j‖ sqrt(Σ_i g_ji), shape (B,)."""
    return x.norm(dim=1) * residual.norm(dim=1) * gates.sum(1).sqrt()


def clipped_mean_gradient(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, u: torch.Tensor, clip: float,
                          num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(1/b) Σ_j clip(∇ℓ_j, C) in the working layout (P·C, d), and the per-sample losses."""
    logits, gates = logits_and_gates(x, w, u, num_classes)
    losses = F.cross_entropy(logits, y, reduction="none")
    residual = torch.softmax(logits, dim=1)
    residual[torch.arange(len(y), device=y.device), y] -= 1.0
    factor = (clip / (per_sample_gradient_norms(x, residual, gates) + 1e-6)).clamp_(max=1.0) / len(y)
    a = (gates[:, :, None] * (residual * factor[:, None])[:, None, :]).reshape(len(y), -1)  # (B, P·C)
    return matmul_tn(a, x), losses


def train_noisycgd(model: ConvexReLU, x: torch.Tensor, y: torch.Tensor, *, noise_multiplier: float,
                   max_grad_norm: float, batch_size: int, epochs: int, lr: float, l2: float,
                   generator: torch.Generator, noise_seed: int,
                   on_epoch: Callable[[int, int, float], None] | None = None) -> list[float]:
    """Train ``model`` in place on members ``x`` (n, ...), ``y`` (n,); returns the mean
    training loss of every epoch. ``generator`` draws the fixed batch partition,
    ``noise_seed`` seeds the Gaussian noise."""
    n = len(y)
    batches_per_epoch = n // batch_size
    if batches_per_epoch < 1:
        raise ValueError(f"batch size {batch_size} exceeds the {n} training samples")
    device = x.device
    x = x.flatten(1)
    order = torch.randperm(n, generator=generator, device=device)
    batches = order[:batches_per_epoch * batch_size].view(batches_per_epoch, batch_size)
    gates, classes = model.v.shape[0], model.v.shape[2]
    w = to_working(model.v.detach())
    u = model.u
    std = noise_multiplier * max_grad_norm / batch_size if noise_multiplier > 0 else 0.0
    noise = GaussianNoise(noise_seed, device)

    def step(batch: Batch) -> tuple[torch.Tensor, int]:
        grad, losses = clipped_mean_gradient(batch.x, batch.y, w, u, max_grad_norm, classes)
        w.mul_(1.0 - lr * l2).add_(grad, alpha=-lr)
        if std > 0:
            w.add_(noise.draw(w.numel()).view_as(w), alpha=-lr * std)
        return losses.sum(), batch.size

    try:
        with dp_compute_threads(device):
            history = run_epochs(epochs, cyclic(x, y, batches), step, on_epoch=on_epoch)
    finally:
        noise.close()
    with torch.no_grad():
        model.v.copy_(from_working(w, gates))
    return history
