"""NoisyCGD, noisy cyclic gradient descent, on the convex two-layer ReLU approximation
(docs/methods/b-hidden-state.md B.2), and DP-SGD on the same model, the paper's comparator (B.4).

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

import contextlib
from collections.abc import Callable

import torch
from torch.nn import functional as F

from privaudit.models.convex_relu import ConvexReLU, logits_and_gates, to_working
from privaudit.models.fast_linear import matmul_tn
from privaudit.training.dp_engine import GaussianNoise, dp_compute_threads
from privaudit.training.loop import Batch, cyclic, poisson, run_epochs

Iterate = Callable[[int, torch.Tensor], None]  # (epoch, W in the working layout)


def from_working(w: torch.Tensor, gates: int) -> torch.Tensor:
    """Inverse of :func:`privaudit.models.convex_relu.to_working`."""
    pc, d = w.shape
    return w.view(gates, pc // gates, d).permute(0, 2, 1).contiguous()


def per_sample_gradient_norms(x: torch.Tensor, residual: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """‖∇_v ℓ_j‖ = ‖x_j‖ ‖r_j‖ sqrt(Σ_i g_ji), shape (B,)."""
    return x.norm(dim=1) * residual.norm(dim=1) * gates.sum(1).sqrt()


def clipped_mean_gradient(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, u: torch.Tensor, clip: float,
                          num_classes: int, divisor: float | None = None,
                          size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(1/b) Σ_j clip(∇ℓ_j, C) in the working layout (P·C, d), and the per-sample losses.
    ``divisor`` replaces b (DP-SGD divides by the expected Poisson batch size); rows from
    ``size`` on are padding and carry no weight."""
    logits, gates = logits_and_gates(x, w, u, num_classes)
    losses = F.cross_entropy(logits, y, reduction="none")
    residual = torch.softmax(logits, dim=1)
    residual[torch.arange(len(y), device=y.device), y] -= 1.0
    factor = (clip / (per_sample_gradient_norms(x, residual, gates) + 1e-6)).clamp_(max=1.0) / (divisor or len(y))
    if size is not None:
        factor[size:] = 0.0
    a = (gates[:, :, None] * (residual * factor[:, None])[:, None, :]).reshape(len(y), -1)  # (B, P·C)
    return matmul_tn(a, x), losses


def train_noisycgd(model: ConvexReLU, x: torch.Tensor, y: torch.Tensor, *, noise_multiplier: float,
                   max_grad_norm: float, batch_size: int, epochs: int, lr: float, l2: float,
                   generator: torch.Generator, noise_seed: int,
                   on_epoch: Callable[[int, int, float], None] | None = None,
                   on_iterate: Iterate | None = None) -> list[float]:
    """Train ``model`` in place on members ``x`` (n, ...), ``y`` (n,); returns the mean
    training loss of every epoch. ``generator`` draws the fixed batch partition,
    ``noise_seed`` seeds the Gaussian noise; ``on_iterate(epoch, W)`` sees the iterate (in
    the working layout, read-only) after every epoch."""
    n = len(y)
    batches_per_epoch = n // batch_size
    if batches_per_epoch < 1:
        raise ValueError(f"batch size {batch_size} exceeds the {n} training samples")
    x = x.flatten(1)
    order = torch.randperm(n, generator=generator, device=x.device)
    batches = order[:batches_per_epoch * batch_size].view(batches_per_epoch, batch_size)
    classes = model.v.shape[2]
    w = to_working(model.v.detach())
    u = model.u
    std = noise_multiplier * max_grad_norm / batch_size if noise_multiplier > 0 else 0.0
    noise = GaussianNoise(noise_seed, x.device)

    def step(batch: Batch, epoch: int) -> tuple[torch.Tensor, int]:
        grad, losses = clipped_mean_gradient(batch.x, batch.y, w, u, max_grad_norm, classes)
        w.mul_(1.0 - lr * l2).add_(grad, alpha=-lr)
        if std > 0:
            w.add_(noise.draw(w.numel()).view_as(w), alpha=-lr * std)
        return losses.sum(), batch.size

    return _run(model, w, cyclic(x, y, batches), step, epochs, noise, batch_size, on_epoch, on_iterate)


def train_convex_dpsgd(model: ConvexReLU, x: torch.Tensor, y: torch.Tensor, *, noise_multiplier: float,
                       max_grad_norm: float, sample_rate: float, epochs: int, lr: float, l2: float,
                       generator: torch.Generator, noise_seed: int,
                       on_epoch: Callable[[int, int, float], None] | None = None,
                       on_iterate: Iterate | None = None) -> list[float]:
    """DP-SGD on the convex approximation: round(1/q) Poisson batches an epoch (each member
    independently with rate q = ``sample_rate``), the clipped sum plus N(0, σ²C² I) divided by
    the expected batch size ⌊nq⌋ as Opacus does (docs/methods/a-mg-noise.md A.5), then the same step
    v ← v − η(ĝ + λv). The paper's comparator runs it with λ = 0 (docs/methods/b-hidden-state.md B.4)."""
    n = len(y)
    expected = max(int(n * sample_rate), 1)
    x = x.flatten(1)
    w = to_working(model.v.detach())
    u, classes = model.u, model.v.shape[2]
    std = noise_multiplier * max_grad_norm / expected if noise_multiplier > 0 else 0.0
    noise = GaussianNoise(noise_seed, x.device)

    def step(batch: Batch, epoch: int) -> tuple[torch.Tensor, int]:
        grad, losses = clipped_mean_gradient(batch.x, batch.y, w, u, max_grad_norm, classes, expected, batch.size)
        if l2:
            w.mul_(1.0 - lr * l2)
        w.add_(grad, alpha=-lr)
        if std > 0:
            w.add_(noise.draw(w.numel()).view_as(w), alpha=-lr * std)
        return losses[:batch.size].sum(), batch.size

    steps = max(int(round(1.0 / sample_rate)), 1)
    return _run(model, w, poisson(x, y, sample_rate, steps, generator, lambda size: size), step, epochs, noise,
                expected, on_epoch, on_iterate)


#: from this batch size on, the products keep every core while the noise is drawn (:func:`_threads`)
SHARED_NOISE_BATCH = 256


def _threads(device: torch.device, batch_size: float):
    """The cores of the products. A step costs about 2b multiply-adds per parameter (the
    logits and the gradient): from a batch of :data:`SHARED_NOISE_BATCH` on (the paper's
    b = 1,000: 2,000 per parameter, against about 3 × 128 for the MLP at batch 128) the one
    normal per parameter is a small share, and leaving its drawing thread a core of its own
    (:func:`dp_compute_threads`) would slow the products down (docs/performance.md); smaller
    batches give it one."""
    return contextlib.nullcontext() if batch_size >= SHARED_NOISE_BATCH else dp_compute_threads(device)


def _run(model: ConvexReLU, w: torch.Tensor, batches, step, epochs: int, noise: GaussianNoise, batch_size: float,
         on_epoch: Callable[[int, int, float], None] | None, on_iterate: Iterate | None) -> list[float]:
    """The epochs of either algorithm on the working copy ``w``, written back into ``model``."""
    def after(epoch: int, total: int, loss: float) -> None:
        if on_epoch is not None:
            on_epoch(epoch, total, loss)
        if on_iterate is not None:
            on_iterate(epoch, w)

    try:
        with _threads(w.device, batch_size):
            history = run_epochs(epochs, batches, step, on_epoch=after)
    finally:
        noise.close()
    with torch.no_grad():
        model.v.copy_(from_working(w, model.v.shape[0]))
    return history
