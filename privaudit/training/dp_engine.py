"""DP-SGD for sequential models of dense, convolutional and group-norm layers, in one
forward and one backward pass.

The mechanism is exactly Opacus's DP-SGD with Poisson sampling (docs/methods/a-mg-noise.md A.5; Abadi et
al. 2016): each step draws a batch B by including every member independently with
probability q, clips every per-sample gradient to norm C and adds Gaussian noise,

    ĝ = ( Σ_{i∈B} g_i · min(1, C / (‖g_i‖ + 1e-6)) + N(0, σ²C² I) ) / E|B|,

with E|B| = ⌊n q⌋ as Opacus divides, and q, σ and the step count are what the accountant
(:func:`privaudit.analysis.accounting.epsilon_from_history`) is given. Only the computation
differs from Opacus, which either materialises every per-sample gradient of every layer
(its default hooks) or gets the norms from a first backward pass and the clipped sum from
a second one (ghost clipping). Here one forward runs with the weights detached, one
backward gives each parametrised layer's output gradient b_i = ∂ℓ_i/∂z_i, and per layer:

* **Dense** z = a Wᵀ + b: g_i = b_i a_iᵀ, so ‖g_i‖² = ‖a_i‖² ‖b_i‖² (+ ‖b_i‖² for the
  bias), the "ghost norm" of Goodfellow (2015) and Li et al. (2022), O(B·(in+out)); the
  clipped sum is one product, Σ_i c_i b_i a_iᵀ = (c ⊙ B)ᵀ A.
* **Convolution** (B, C_in, H, W) → (B, C_out, H', W'): with U_i the unfolded input patches
  (C_in·k², T = H'·W') and B_i the output gradient (C_out, T), g_i = B_i U_iᵀ. The ghost norm
  Σ_{t,s} (U_iᵀU_i)_{ts}(B_iᵀB_i)_{ts} costs O(T²·(C_in·k² + C_out)) a sample, the per-sample
  gradient itself O(T·C_out·C_in·k²); for the paper's CNNs (T = 1,024 and 256, at most
  32·25 inputs per patch) the second is 8 to 45 times cheaper and a gradient holds at most
  25,600 numbers, so it is formed, one batched product for the layer, and the clipped sum
  is the c-weighted sum of those gradients. The bias gradient is Σ_t B_i.
* **GroupNorm** (affine): with x̂ the normalised input, g_i = (Σ_hw b_i ⊙ x̂_i, Σ_hw b_i)
  per channel.

Each layer type is one rule of :data:`LAYER_RULES` (its forward, its rows' squared gradient
norms, its clipped sum), in the style of Opacus's grad samplers; the clip factors and the
noise's std are one formula each (:func:`clip_factors`, :func:`noise_std`), which the stacked
engine (:mod:`privaudit.training.stacked`) uses for K models at once.

Supported models: ``nn.Sequential`` whose parameters all sit in such layers and whose other
modules act on each sample alone (:data:`PER_SAMPLE_MODULES`): the MLP, the standard CNN, and
the improved CNN as built for DP-SGD (GroupNorm for BatchNorm). Others train through Opacus
(:func:`privaudit.training.trainer`). The tests check the clipped sum against an explicit
per-sample-gradient reference and against Opacus.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeGuard, TypeVar

import torch
from torch import nn
from torch.nn import functional as F

from privaudit.models.fast_linear import linear, matmul_tn

PAD_TO = 8
#: modules without parameters that act on each sample alone (dropout draws per element)
PER_SAMPLE_MODULES = (nn.Flatten, nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.Identity, nn.MaxPool2d, nn.AvgPool2d,
                      nn.Dropout)
#: the layers whose per-sample gradients the engine computes (each has its rule, :data:`LAYER_RULES`)
PARAM_LAYERS = (nn.Linear, nn.Conv2d, nn.GroupNorm)
#: the layer type a :class:`LayerRule` computes
_Layer = TypeVar("_Layer", bound=nn.Module)


def supports_ghost(model: nn.Module) -> TypeGuard[nn.Sequential]:
    """Whether :class:`GhostDPSGD` can train ``model`` (see the module docstring)."""
    if not isinstance(model, nn.Sequential):
        return False
    for m in model:
        rule = rule_of(m)
        if rule is not None:
            if not rule.supports(m):
                return False
        elif not (isinstance(m, PER_SAMPLE_MODULES) and not any(True for _ in m.parameters())):
            return False
    return True


def supports_ghost_dense(model: nn.Module) -> bool:
    """Whether ``model`` is a dense stack (Linear layers and per-sample activations only)."""
    return supports_ghost(model) and not any(isinstance(m, (nn.Conv2d, nn.GroupNorm)) for m in model)


#: from this many input channels on, a convolution's per-sample gradients come from one
#: grouped convolution backward, below it from strided patches and one batched product
#: (each the faster on its side, docs/performance.md). A rule by shape, not a timing, so
#: that the same seed always gives the same bits.
GROUPED_FROM_CHANNELS = 8


def conv_weight_per_sample(m: nn.Conv2d, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-sample weight gradients (B, C_out, C_in, k_h, k_w) of a convolution with input
    ``a`` (B, C_in, H, W) and output gradient ``b`` (B, C_out, H', W'): g_i = B_i U_iᵀ with
    U_i the input patches (C_in·k_h·k_w, H'·W').

    Few input channels: U is a strided view of the zero-padded input, copied once, and one
    batched product forms every g_i. Many: the batch becomes the groups of one convolution
    (input (1, B·C_in, H, W), output gradient (1, B·C_out, H', W'), B groups), whose weight
    gradient is every g_i at once (:data:`GROUPED_FROM_CHANNELS`)."""
    n, c, h, w = a.shape
    out_c, (kh, kw) = b.shape[1], m.kernel_size
    if c >= GROUPED_FROM_CHANNELS:
        weight = a.new_empty(n * out_c, c, kh, kw)
        _, gw, _ = torch.ops.aten.convolution_backward(
            b.reshape(1, n * out_c, *b.shape[2:]), a.reshape(1, n * c, h, w), weight, None, list(m.stride),
            list(m.padding), list(m.dilation), False, [0, 0], n, [False, True, False])
        return gw.view(n, out_c, c, kh, kw)
    assert not isinstance(m.padding, str)  # padding given as numbers (ConvRule.supports)
    (ph, pw), (sh, sw), (dh, dw) = m.padding, m.stride, m.dilation
    padded = F.pad(a, (pw, pw, ph, ph))
    s_n, s_c, s_h, s_w = padded.stride()
    oh, ow = b.shape[2:]
    patches = padded.as_strided((n, c, kh, kw, oh, ow), (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw))
    patches = patches.reshape(n, c * kh * kw, oh * ow)
    return torch.bmm(b.flatten(2), patches.transpose(1, 2)).view(n, out_c, c, kh, kw)



class DrawAhead:
    """Two reused buffers, the next one filled by ``fill(buffer)`` in a background thread
    while the caller computes with the current one (``background=False``: filled on demand,
    into the first buffer). Whatever the timing, the fills run one after another in call
    order, so a generator behind ``fill`` gives the same draws as without the thread."""

    def __init__(self, buffers: list[torch.Tensor], fill: Callable[[torch.Tensor], torch.Tensor],
                 background: bool):
        self.buffers, self.fill, self.index = buffers, fill, 0
        self.pool = ThreadPoolExecutor(1) if background else None
        self.pending = self.pool.submit(fill, buffers[0]) if self.pool else None

    def next(self) -> torch.Tensor:
        """The next filled buffer, valid until the following call."""
        if self.pool is None:
            return self.fill(self.buffers[0])
        assert self.pending is not None  # submitted whenever there is a pool
        block = self.pending.result()
        self.index ^= 1
        self.pending = self.pool.submit(self.fill, self.buffers[self.index])
        return block

    def close(self) -> None:
        if self.pool is not None:
            assert self.pending is not None  # submitted whenever there is a pool
            self.pending.result()
            self.pool.shutdown()
            self.pool = None


class GaussianNoise:
    """The DP noise: standard normal draws from one seeded generator, one block per step.

    On the CPU, drawing a dense model's normals (one per parameter; torch's generator, the
    one Opacus uses, is sequential) costs about as much as the step's matrix products
    (docs/performance.md). So the
    draws run one step ahead in a background thread (:class:`DrawAhead`), into one of two
    reused buffers, while the step computes (:func:`dp_compute_threads` leaves that thread a
    core for dense stacks; a convolutional model's far smaller draw shares the cores). The
    sequence of draws is the generator's, whatever the timing, so results are deterministic.
    On CUDA the draw is a plain synchronous ``normal_`` on the device.
    """

    def __init__(self, seed: int, device: torch.device | str):
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self._ahead: DrawAhead | None = None
        self._numel = -1

    def draw(self, numel: int) -> torch.Tensor:
        """A flat tensor of ``numel`` i.i.d. N(0, 1) draws, valid until the next call."""
        if numel != self._numel:  # a new block size: new buffers (the block drawn ahead is used first)
            old, self._numel = self._ahead, numel
            if old is not None:
                old.close()
            cpu = self.device.type == "cpu"
            self._ahead = DrawAhead([torch.empty(numel, device=self.device) for _ in range(2 if cpu else 1)],
                                    lambda buf: buf.normal_(0.0, 1.0, generator=self.generator), cpu)
        assert self._ahead is not None  # made on the first draw (no block size matches -1)
        return self._ahead.next()

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()


@contextlib.contextmanager
def dp_compute_threads(device: torch.device, model: nn.Module | None = None) -> Iterator[None]:
    """On the CPU, one intra-op thread fewer while DP-SGD trains a dense stack (at least one),
    so that :class:`GaussianNoise`'s drawing thread has a core; restored afterwards.

    A rule by shape: a dense layer's step costs about 3 multiply-adds per parameter and
    sample, so the noise (one normal per parameter, a sequential generator) is a fixed share
    of a dense stack's step, which a core of its own for the noise speeds up. A convolution
    reuses each weight at every position, so its step costs hundreds of multiply-adds per
    parameter and sample and the noise is negligible: convolutional models (``model`` given
    and not a dense stack) keep every core (docs/performance.md measures both sides).
    ``model=None`` (NoisyCGD's dense gates) counts as a dense stack."""
    old = torch.get_num_threads()
    dense = model is None or supports_ghost_dense(model)
    if device.type != "cpu" or old < 2 or not dense:
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


def clip_factors(sq_norms: torch.Tensor, max_grad_norm: float, scale: float, real: torch.Tensor) -> torch.Tensor:
    """DP-SGD's clip-and-scale factor of each row: c_i = min(1, C / (‖g_i‖ + 1e-6)) / E|B|
    (``scale`` = 1 / E|B|) from the rows' squared gradient norms, 0 where ``real`` is False
    (padding). The one formula of both engines: the clipped sum is Σ_i c_i g_i."""
    return (max_grad_norm / (sq_norms.sqrt() + 1e-6)).clamp_(max=1.0).mul_(scale) * real


def noise_std(noise_multiplier: float, max_grad_norm: float, scale: float) -> float:
    """The std of the Gaussian noise added to the clipped sum divided by E|B|: σ C / E|B|."""
    return noise_multiplier * max_grad_norm * scale


class LayerRule(Generic[_Layer]):
    """How the engine treats one kind of parametrised layer, in the style of Opacus's grad
    samplers (:data:`LAYER_RULES`): its forward with the weights detached, keeping what its
    per-sample gradients are made of; each row's squared gradient norm; and the clipped sum
    Σ_i c_i g_i as the layer's weight and bias gradients."""

    #: whether the per-sample gradients are formed (kept for the clipped sum) or only their norms
    forms: bool = True

    def supports(self, m: _Layer) -> bool:
        """Whether this layer's settings are the ones the rule computes."""
        return True

    def forward(self, m: _Layer, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(what the per-sample gradients are made of, the layer's output)."""
        raise NotImplementedError

    def per_sample(self, m: _Layer, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The per-sample gradients (B, *weight) and (B, *bias) (None without a bias)."""
        raise NotImplementedError

    def add_sq_norms(self, sq: torch.Tensor, m: _Layer, a: torch.Tensor, b: torch.Tensor,
                     formed: tuple[torch.Tensor, torch.Tensor | None] | None) -> None:
        """Add ‖g_i‖² of each row over the layer's parameters to ``sq``, weight then bias (from
        ``formed`` when the rule forms them)."""
        assert formed is not None
        gw, gb = formed
        sq += gw.flatten(1).pow(2).sum(1)
        if gb is not None:
            sq += gb.pow(2).sum(1)

    def clipped_sum(self, m: _Layer, a: torch.Tensor, b: torch.Tensor, factor: torch.Tensor,
                    formed: tuple[torch.Tensor, torch.Tensor | None] | None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Σ_i c_i g_i as (weight gradient, bias gradient): the c-weighted sum of the formed ones."""
        assert formed is not None
        assert isinstance(m.weight, torch.Tensor)  # a parametrised layer's weight (torch types it Tensor | Module)
        pw, pb = formed
        return (factor @ pw.flatten(1)).view_as(m.weight), (factor @ pb if pb is not None else None)


class DenseRule(LayerRule[nn.Linear]):
    """z = a Wᵀ + b: g_i = b_i a_iᵀ, never formed; ‖g_i‖² = ‖a_i‖² ‖b_i‖² (+ ‖b_i‖² for the
    bias), the ghost norm; the clipped sum one product, (c ⊙ B)ᵀ A."""

    forms = False

    def forward(self, m: nn.Linear, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bias = m.bias.detach() if isinstance(m.bias, torch.Tensor) else None  # a Parameter or None
        return h.detach(), linear(h, m.weight.detach(), bias)

    def add_sq_norms(self, sq: torch.Tensor, m: nn.Linear, a: torch.Tensor, b: torch.Tensor,
                     formed: tuple[torch.Tensor, torch.Tensor | None] | None) -> None:
        b_sq = b.pow(2).sum(1)
        sq += a.pow(2).sum(1) * b_sq
        if m.bias is not None:
            sq += b_sq

    def clipped_sum(self, m: nn.Linear, a: torch.Tensor, b: torch.Tensor, factor: torch.Tensor,
                    formed: tuple[torch.Tensor, torch.Tensor | None] | None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        cb = b * factor[:, None]
        return matmul_tn(cb, a), (cb.sum(0) if m.bias is not None else None)


class ConvRule(LayerRule[nn.Conv2d]):
    """A convolution: g_i = B_i U_iᵀ formed (:func:`conv_weight_per_sample`), the bias's Σ_t B_i
    (zero padding given as numbers, one group)."""

    def supports(self, m: nn.Conv2d) -> bool:
        return m.padding_mode == "zeros" and not isinstance(m.padding, str) and m.groups == 1

    def forward(self, m: nn.Conv2d, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bias = m.bias.detach() if m.bias is not None else None
        return h.detach(), F.conv2d(h, m.weight.detach(), bias, m.stride, m.padding, m.dilation)

    def per_sample(self, m: nn.Conv2d, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return conv_weight_per_sample(m, a, b), (b.flatten(2).sum(2) if m.bias is not None else None)


class GroupNormRule(LayerRule[nn.GroupNorm]):
    """Affine GroupNorm x̂ γ + β: g_i = (Σ_hw b_i ⊙ x̂_i, Σ_hw b_i) per channel, formed."""

    def supports(self, m: nn.GroupNorm) -> bool:
        return bool(m.affine)

    def forward(self, m: nn.GroupNorm, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert isinstance(m.weight, torch.Tensor) and isinstance(m.bias, torch.Tensor)  # affine (supports)
        xhat = F.group_norm(h, m.num_groups, None, None, m.eps)
        shape = (1, -1) + (1,) * (h.dim() - 2)
        return xhat.detach(), xhat * m.weight.detach().view(shape) + m.bias.detach().view(shape)

    def per_sample(self, m: nn.GroupNorm, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return (b * a).flatten(2).sum(2), b.flatten(2).sum(2)      # (B, C) each


#: how the engine computes each of :data:`PARAM_LAYERS`' per-sample gradients (one rule a layer type, in order)
LAYER_RULES: dict[type, LayerRule[Any]] = dict(zip(PARAM_LAYERS, (DenseRule(), ConvRule(), GroupNormRule()),
                                                   strict=True))


def rule_of(m: nn.Module) -> LayerRule[Any] | None:
    """The :data:`LAYER_RULES` entry of ``m``'s type (a subclass takes its base's), or None."""
    return next((rule for kind, rule in LAYER_RULES.items() if isinstance(m, kind)), None)


class GhostDPSGD:
    """Clipped, noised gradients for a supported ``nn.Sequential`` (writes ``p.grad``).

    ``expected_batch_size`` is E|B| of the Poisson sampler (Opacus: ⌊n q⌋); the noise comes
    from ``noise``, one block per step over the parameters in layer order (weight, then bias).
    Call :meth:`compute_grads` once per step, then ``optimizer.step()``.
    """

    def __init__(self, model: nn.Module, max_grad_norm: float, noise_multiplier: float,
                 expected_batch_size: int, noise: GaussianNoise):
        if not supports_ghost(model):
            raise ValueError("GhostDPSGD needs an nn.Sequential of Linear, Conv2d (zero padding, one group) and "
                             "affine GroupNorm layers and per-sample modules")
        self.model = model
        self.layers = [m for m in model if isinstance(m, PARAM_LAYERS)]
        self.rules = [rule_of(m) for m in self.layers]
        self.max_grad_norm = float(max_grad_norm)
        self.noise_multiplier = float(noise_multiplier)
        self.expected_batch_size = max(int(expected_batch_size), 1)
        self.noise = noise

    def per_sample_terms(self, x: torch.Tensor, y: torch.Tensor
                         ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Per-sample losses (B,), what each parametrised layer's per-sample gradient is made
        of (a dense or convolutional layer's input, a GroupNorm's normalised input x̂) and its
        output gradient b = ∂ℓ_i/∂z. The weights are detached: no weight gradient is formed."""
        h = x
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        for m in self.model:
            rule = rule_of(m)
            if rule is None:
                h = m(h)
                continue
            a, h = rule.forward(m, h)
            inputs.append(a)
            if not h.requires_grad:
                h.requires_grad_(True)
            outputs.append(h)
        losses = F.cross_entropy(h, y, reduction="none")
        grads = torch.autograd.grad(losses.sum(), outputs)
        return losses.detach(), inputs, list(grads)

    def per_sample_sq_norms(self, inputs: list[torch.Tensor], grads: list[torch.Tensor],
                            formed: dict[int, tuple] | None = None) -> torch.Tensor:
        """‖g_i‖² over all parameters, layer by layer as its rule computes it (the formed
        per-sample gradients stored in ``formed`` by layer index)."""
        sq = torch.zeros(len(inputs[0]), device=inputs[0].device, dtype=inputs[0].dtype)
        for i, (m, rule, a, b) in enumerate(zip(self.layers, self.rules, inputs, grads)):
            assert rule is not None
            made = rule.per_sample(m, a, b) if rule.forms else None
            if made is not None and formed is not None:
                formed[i] = made
            rule.add_sq_norms(sq, m, a, b, made)
        return sq

    def per_sample_norms(self, inputs: list[torch.Tensor], grads: list[torch.Tensor],
                         formed: dict[int, tuple] | None = None) -> torch.Tensor:
        """‖g_i‖ over all parameters (:meth:`per_sample_sq_norms`)."""
        return self.per_sample_sq_norms(inputs, grads, formed).sqrt()

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
        formed: dict[int, tuple] = {}
        if size:
            losses, inputs, grads = self.per_sample_terms(x, y)
            real = torch.arange(len(y), device=y.device) < size
            factor = clip_factors(self.per_sample_sq_norms(inputs, grads, formed), self.max_grad_norm, scale, real)
            losses = losses[:size]
        else:
            losses = torch.zeros(0, device=x.device)
        params = [p for m in self.layers for p in (m.weight, m.bias) if p is not None]
        std = noise_std(self.noise_multiplier, self.max_grad_norm, scale)
        noise = self.noise.draw(sum(p.numel() for p in params)) if std > 0 else None
        offset = 0
        for i, (m, rule) in enumerate(zip(self.layers, self.rules)):
            assert rule is not None
            if not size:
                gw = torch.zeros_like(m.weight)
                gb = torch.zeros_like(m.bias) if m.bias is not None else None
            else:
                gw, gb = rule.clipped_sum(m, inputs[i], grads[i], factor, formed.get(i))
            for p, g in ((m.weight, gw), (m.bias, gb)):
                if p is None:
                    continue
                assert g is not None  # a bias gradient exactly when there is a bias
                if noise is not None:
                    g.add_(noise[offset:offset + p.numel()].view_as(p), alpha=std)
                    offset += p.numel()
                p.grad = g
        return losses
