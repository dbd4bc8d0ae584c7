"""Dense layers through oneDNN's matrix multiply on x86 CPUs.

PyTorch's CPU ``torch.mm`` goes to MKL's sgemm. On AMD CPUs MKL takes its AVX2 code path
even where the CPU has AVX-512, and oneDNN, which PyTorch also ships and already uses for
convolutions, runs the same matrices far faster (``benchmarks/common.py:matmul_peak``
measures both; docs/performance.md).
Dense layers dominate an MLP's work, so privaudit routes them through oneDNN's matmul
primitive (``torch.ops.mkldnn._linear_pointwise``, the op torch.compile's CPU backend
emits for linear layers) with a small autograd function:

    forward:        y  = x Wᵀ + b          (B, in) × (out, in)ᵀ  -> oneDNN
    weight grad:    dW = gᵀ x              (out, B) × (in, B)ᵀ    -> oneDNN
    input grad:     dx = g W               only when x needs it   -> torch.mm
    bias grad:      db = Σ_batch g

Results equal ``torch.nn.functional.linear`` up to float32 summation order (checked by the
tests). Where the op is missing (non-x86 builds), the tensors are not float32 CPU tensors,
or the input is not 2-D, the layer falls back to ``F.linear``; ``fast_layers`` only swaps
the class of ``nn.Linear`` modules for the duration of a ``with`` block, so saved models
and Opacus see plain ``nn.Linear``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

_OP = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
ENV_DISABLE = "PRIVAUDIT_PLAIN_LINEAR"


def onednn_available() -> bool:
    """Whether the oneDNN linear path can be used (x86 build with mkldnn, not disabled)."""
    if os.environ.get(ENV_DISABLE):
        return False
    if _OP is None or not torch.backends.mkldnn.is_available():
        return False
    try:
        _OP(torch.ones(1, 1), torch.ones(1, 1), None, "none", [], "")
        return True
    except (RuntimeError, NotImplementedError):
        return False


_AVAILABLE: bool | None = None


def onednn_enabled() -> bool:
    """:func:`onednn_available`, checked once per process."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = onednn_available()
    return _AVAILABLE


def onednn_matmul_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a bᵀ for 2-D float32 CPU tensors a (m, k), b (n, k) through oneDNN; shape (m, n)."""
    assert _OP is not None  # called only where onednn_enabled()
    return _OP(a.contiguous(), b.contiguous(), None, "none", [], "")


def matmul_tn(b: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """bᵀ a for b (B, out), a (B, in): a weight gradient, shape (out, in); through oneDNN on
    float32 CPU tensors where available, else ``torch.mm``."""
    if b.device.type == "cpu" and b.dtype == torch.float32 and onednn_enabled():
        return onednn_matmul_nt(b.t(), a.t())
    return b.t() @ a


class _OneDNNLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        assert _OP is not None  # applied only where onednn_enabled()
        return _OP(x.contiguous(), weight.contiguous(), bias, "none", [], "")

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, weight = ctx.saved_tensors
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = g @ weight
        if ctx.needs_input_grad[1]:
            gw = matmul_tn(g, x)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb


def _eligible(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (x.dim() == 2 and x.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32 and onednn_enabled())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` with the oneDNN path where eligible (same maths, same autograd)."""
    if _eligible(x, weight):
        return _OneDNNLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


class FastLinear(nn.Linear):
    """``nn.Linear`` whose forward uses :func:`linear`; same parameters and state dict."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


@contextlib.contextmanager
def fast_layers(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block, every plain ``nn.Linear`` of ``model`` runs as :class:`FastLinear`
    (a class swap, no copies); on exit they are plain ``nn.Linear`` again."""
    swapped = [m for m in model.modules() if type(m) is nn.Linear]
    for m in swapped:
        m.__class__ = FastLinear
    try:
        yield model
    finally:
        for m in swapped:
            m.__class__ = nn.Linear
