"""DP-SGD for stacks of dense layers, in one forward and one backward pass.

The mechanism is exactly Opacus's DP-SGD with Poisson sampling (docs/methods.md A.5; Abadi et
al. 2016): each step draws a batch B by including every member independently with
probability q, clips every per-sample gradient to norm C and adds Gaussian noise,

    ĝ = ( Σ_{i∈B} g_i · min(1, C / (‖g_i‖ + 1e-6)) + N(0, σ²C² I) ) / E|B|,

with E|B| = ⌊n q⌋ as Opacus divides, and q, σ and the step count are what the accountant
(:func:`privaudit.accounting.epsilon_from_history`) is given. Only the computation
differs from Opacus's default per-sample hooks, which materialise every g_i:

* For a dense layer z = a Wᵀ + b the per-sample gradient is the outer product
  g_i = b_i a_iᵀ (b_i = ∂ℓ_i/∂z_i), so ‖g_i‖² = ‖a_i‖² ‖b_i‖² (+ ‖b_i‖² for the bias),
  the "ghost norm" of Goodfellow (2015) and Li et al. (2022), O(B·(in+out)) per layer.
* The clipped sum is then one matrix product per layer, Σ_i c_i b_i a_iᵀ = (c ⊙ B)ᵀ A,
  so the step costs one forward, the backward of the activations only (no weight
  gradients are formed until they are clipped) and one weight-gradient product: about
  the cost of a non-private step. Opacus's ghost clipping gets the same norms but needs a
  second full backward pass.

Supported models: ``nn.Sequential`` whose parameters all sit in ``nn.Linear`` layers and
whose other modules act on each sample alone (:data:`PER_SAMPLE_MODULES`); the MLP is such
a model. Others (convolutions, GroupNorm) train through Opacus
(:func:`privaudit.training.trainer`). The tests check the clipped sum against an explicit
per-sample-gradient reference.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import torch
from torch import nn
from torch.nn import functional as F

from privaudit.models.fast_linear import linear, matmul_tn

PAD_TO = 8
PER_SAMPLE_MODULES = (nn.Flatten, nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.Identity)


def supports_ghost_dense(model: nn.Module) -> bool:
    """Whether :class:`DenseDPSGD` can train ``model`` (see the module docstring)."""
    if not isinstance(model, nn.Sequential):
        return False
    return all(isinstance(m, nn.Linear) or (isinstance(m, PER_SAMPLE_MODULES)
                                            and not any(True for _ in m.parameters()))
               for m in model)


class GaussianNoise:
    """The DP noise: standard normal draws from one seeded generator, one block per step.

    On the CPU, drawing the MLP's 1.6 M normals costs ~4 ms of one core (torch's generator,
    the one Opacus uses, is sequential), about as much as the step's matrix products. So the
    draws run one step ahead in a background thread, into one of two reused buffers, while
    the step computes (:func:`dp_compute_threads` leaves that thread a core). The sequence of
    draws is the generator's, whatever the timing, so results are deterministic. On CUDA the
    draw is a plain synchronous ``normal_`` on the device.
    """

    def __init__(self, seed: int, device: torch.device | str):
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self._buffers: list[torch.Tensor] = []
        self._next = None  # future of the block being drawn ahead
        self._index = 0
        self._pool = ThreadPoolExecutor(1) if self.device.type == "cpu" else None

    def _fill(self, i: int) -> torch.Tensor:
        return self._buffers[i].normal_(0.0, 1.0, generator=self.generator)

    def draw(self, numel: int) -> torch.Tensor:
        """A flat tensor of ``numel`` i.i.d. N(0, 1) draws, valid until the next call."""
        if self._pool is None:
            if not self._buffers or self._buffers[0].numel() != numel:
                self._buffers = [torch.empty(numel, device=self.device)]
            return self._fill(0)
        if not self._buffers or self._buffers[0].numel() != numel:
            if self._next is not None:
                self._next.result()
            self._buffers = [torch.empty(numel), torch.empty(numel)]
            self._index = 0
            self._next = self._pool.submit(self._fill, 0)
        block = self._next.result()
        self._index ^= 1
        self._next = self._pool.submit(self._fill, self._index)
        return block

    def close(self) -> None:
        if self._pool is not None:
            if self._next is not None:
                self._next.result()
            self._pool.shutdown()
            self._pool = None


@contextlib.contextmanager
def dp_compute_threads(device: torch.device) -> Iterator[None]:
    """On the CPU, one intra-op thread fewer while DP-SGD trains (at least one), so that
    :class:`GaussianNoise`'s drawing thread has a core; restored afterwards. Measured on
    2 cores: 1.3x the throughput of two compute threads with the noise drawn in between."""
    old = torch.get_num_threads()
    if device.type != "cpu" or old < 2:
        yield
        return
    torch.set_num_threads(old - 1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def poisson_batch(n: int, q: float, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Indices of a Poisson-sampled batch: each of n members independently with probability q."""
    return (torch.rand(n, generator=generator, device=device) < q).nonzero().squeeze(1)


class DenseDPSGD:
    """Clipped, noised gradients for a dense ``nn.Sequential`` (writes ``p.grad``).

    ``expected_batch_size`` is E|B| of the Poisson sampler (Opacus: ⌊n q⌋); the noise comes
    from ``noise``. Call :meth:`compute_grads` once per step, then ``optimizer.step()``.
    """

    def __init__(self, model: nn.Module, max_grad_norm: float, noise_multiplier: float,
                 expected_batch_size: int, noise: GaussianNoise):
        if not supports_ghost_dense(model):
            raise ValueError("DenseDPSGD needs an nn.Sequential of Linear layers and per-sample activations")
        self.model = model
        self.layers = [m for m in model if isinstance(m, nn.Linear)]
        self.max_grad_norm = float(max_grad_norm)
        self.noise_multiplier = float(noise_multiplier)
        self.expected_batch_size = max(int(expected_batch_size), 1)
        self.noise = noise

    def per_sample_terms(self, x: torch.Tensor, y: torch.Tensor
                         ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Per-sample losses (B,), each dense layer's inputs a (B, in) and output gradients
        b = ∂ℓ_i/∂z (B, out). The weights are detached: no weight gradient is formed."""
        h = x
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        for m in self.model:
            if isinstance(m, nn.Linear):
                inputs.append(h.detach())
                bias = m.bias.detach() if m.bias is not None else None
                h = linear(h, m.weight.detach(), bias)
                if not h.requires_grad:
                    h.requires_grad_(True)
                outputs.append(h)
            else:
                h = m(h)
        losses = F.cross_entropy(h, y, reduction="none")
        grads = torch.autograd.grad(losses.sum(), outputs)
        return losses.detach(), inputs, list(grads)

    def per_sample_norms(self, inputs: list[torch.Tensor], grads: list[torch.Tensor]) -> torch.Tensor:
        """‖g_i‖ over all parameters, from the ghost norms ‖a_i‖²‖b_i‖² (+ ‖b_i‖²)."""
        sq = torch.zeros(len(inputs[0]), device=inputs[0].device, dtype=inputs[0].dtype)
        for m, a, b in zip(self.layers, inputs, grads):
            b_sq = b.pow(2).sum(1)
            sq += a.pow(2).sum(1) * b_sq
            if m.bias is not None:
                sq += b_sq
        return sq.sqrt()

    @staticmethod
    def padded_size(size: int) -> int:
        """Rows the batch is padded to: the next multiple of :data:`PAD_TO`. Poisson batch
        sizes change every step and oneDNN builds a kernel for every new shape; padding
        rows get clip factor 0, so they change nothing."""
        return -(-size // PAD_TO) * PAD_TO

    def compute_grads(self, x: torch.Tensor, y: torch.Tensor, size: int | None = None) -> torch.Tensor:
        """Set every parameter's ``.grad`` to the DP-SGD gradient of the batch (x, y) and
        return the per-sample losses. Rows from ``size`` on (default: none) are padding
        (see :meth:`padded_size`; batches that are not padded are padded here). An empty
        batch yields noise only."""
        size = len(y) if size is None else size
        if size and len(y) == size and self.padded_size(size) > size:
            extra = self.padded_size(size) - size
            x = torch.cat([x, x.new_zeros((extra, *x.shape[1:]))])
            y = torch.cat([y, y.new_zeros(extra)])
        scale = 1.0 / self.expected_batch_size  # folded into the clip factors and the noise
        if size:
            losses, inputs, grads = self.per_sample_terms(x, y)
            norms = self.per_sample_norms(inputs, grads)
            factor = (self.max_grad_norm / (norms + 1e-6)).clamp_(max=1.0).mul_(scale)
            factor[size:] = 0.0
            losses = losses[:size]
        else:
            losses = torch.zeros(0, device=x.device)
        params = [p for m in self.layers for p in (m.weight, m.bias) if p is not None]
        std = self.noise_multiplier * self.max_grad_norm * scale
        noise = self.noise.draw(sum(p.numel() for p in params)) if std > 0 else None
        offset = 0
        for i, m in enumerate(self.layers):
            if size:
                cb = grads[i] * factor[:, None]
                gw = matmul_tn(cb, inputs[i])
                gb = cb.sum(0) if m.bias is not None else None
            else:
                gw = torch.zeros_like(m.weight)
                gb = torch.zeros_like(m.bias) if m.bias is not None else None
            for p, g in ((m.weight, gw), (m.bias, gb)):
                if p is None:
                    continue
                if noise is not None:
                    g.add_(noise[offset:offset + p.numel()].view_as(p), alpha=std)
                    offset += p.numel()
                p.grad = g
        return losses

