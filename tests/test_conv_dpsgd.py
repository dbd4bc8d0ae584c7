"""DP-SGD of convolutional models in one backward pass (privaudit.training.dp_engine).

The per-sample gradients of convolutions (both ways of forming them) against torch.func's,
the clipped sum of the standard and improved CNNs against an explicit per-sample reference
and against Opacus's per-sample gradients, the noise level, and the trainer end to end.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.nn import functional as F

from privaudit.models import build_model
from privaudit.training import train_model
from privaudit.training.dp_engine import (
    GROUPED_FROM_CHANNELS,
    GaussianNoise,
    GhostDPSGD,
    conv_weight_per_sample,
    supports_ghost,
    supports_ghost_dense,
)

CPU = torch.device("cpu")


def _func_per_sample(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-sample gradients of every parameter by torch.func (vmap over grad)."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])
    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)


@pytest.mark.parametrize("c_in", [3, GROUPED_FROM_CHANNELS + 2])
@pytest.mark.parametrize("stride, dilation, padding, kernel", [(1, 1, 2, 5), (2, 2, (1, 0), (3, 2))])
def test_conv_per_sample_gradients_match_torch_func(c_in, stride, dilation, padding, kernel):
    """Both ways (strided patches for few input channels, a grouped convolution for many) give
    torch.func's per-sample weight gradients, also with stride, dilation, uneven padding and a
    non-square kernel."""
    torch.manual_seed(0)
    conv = nn.Conv2d(c_in, 6, kernel, stride=stride, padding=padding, dilation=dilation)
    model = nn.Sequential(conv, nn.ReLU(), nn.Flatten())
    x = torch.randn(7, c_in, 11, 9)
    out_shape = model(x).shape
    model.append(nn.Linear(out_shape[1], 4))
    y = torch.randint(0, 4, (7,))
    z = conv(x)
    b = torch.autograd.grad(F.cross_entropy(model[1:](z), y, reduction="sum"), z)[0]
    ref = _func_per_sample(model, x, y)["0.weight"]
    assert torch.allclose(conv_weight_per_sample(conv, x, b), ref, rtol=1e-4, atol=1e-6)


def _clipped_reference(model, x, y, clip):
    per = _func_per_sample(model, x, y)
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in per.values()))
    factor = (clip / (norms + 1e-6)).clamp(max=1.0)
    return {k: torch.einsum("n,n...->...", factor, g) for k, g in per.items()}, norms


@pytest.mark.parametrize("name, shape, batch", [("cnn", (3, 32, 32), 13), ("cnn-improved", (3, 32, 32), 9),
                                                ("cnn", (1, 8, 8), 1), ("cnn-improved", (1, 8, 8), 24)])
def test_cnn_clipped_sum_matches_per_sample_reference(name, shape, batch):
    """σ = 0: the engine's gradient is Σ_i clip(g_i) / E|B| of the explicit per-sample gradients,
    with a bound that binds for some samples only, for batches that are padded (13, 9, 1) or not."""
    torch.manual_seed(1)
    model = build_model(name, shape, 10, dp=True).eval()  # eval: dropout off, so both sides see one model
    x, y = torch.randn(batch, *shape) * 2, torch.randint(0, 10, (batch,))
    _, norms = _clipped_reference(model, x, y, 1.0)
    clip = float(norms.median())
    ref, _ = _clipped_reference(model, x, y, clip)
    dp = GhostDPSGD(model, clip, 0.0, 16, GaussianNoise(0, CPU))
    losses = dp.compute_grads(x, y)
    for k, p in model.named_parameters():
        assert torch.allclose(p.grad, ref[k] / 16, rtol=1e-4, atol=1e-7), k
    assert torch.allclose(losses, F.cross_entropy(model(x), y, reduction="none"), atol=1e-5)
    if batch > 4:
        assert (norms > clip).sum() >= 2 and (norms < clip).sum() >= 2


def test_cnn_clipped_sum_matches_opacus_per_sample_gradients():
    """The same clipped sum from Opacus's own per-sample gradients (GradSampleModule hooks)."""
    from opacus import GradSampleModule

    torch.manual_seed(2)
    model = build_model("cnn", (3, 32, 32), 10, dp=True)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    clip = 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gsm = GradSampleModule(model)
        F.cross_entropy(gsm(x), y, reduction="sum").backward()
    samples = [p.grad_sample.detach().clone() for p in model.parameters()]
    if hasattr(gsm, "_close"):  # removes Opacus's hooks (as privaudit.training.trainer does)
        gsm._close()
    norms = torch.sqrt(sum(s.flatten(1).pow(2).sum(1) for s in samples))
    factor = (clip / (norms + 1e-6)).clamp(max=1.0)
    for p in model.parameters():
        p.grad = None
    GhostDPSGD(model, clip, 0.0, 16, GaussianNoise(0, CPU)).compute_grads(x, y)
    for p, s in zip(model.parameters(), samples):
        assert torch.allclose(p.grad, torch.einsum("n,n...->...", factor, s) / 16, rtol=1e-4, atol=1e-7)


def test_cnn_noise_level_and_empty_batch():
    """An empty Poisson batch gives pure noise N(0, σ²C²)/E|B| on every parameter."""
    model = build_model("cnn-improved", (3, 32, 32), 10, dp=True)
    sigma, clip, expected = 1.3, 0.8, 20
    GhostDPSGD(model, clip, sigma, expected, GaussianNoise(5, CPU)).compute_grads(
        torch.zeros(0, 3, 32, 32), torch.zeros(0, dtype=torch.long))
    flat = torch.cat([p.grad.ravel() for p in model.parameters()])
    want = sigma * clip / expected
    assert abs(float(flat.std()) - want) < 5 * want / np.sqrt(2 * flat.numel())
    assert abs(float(flat.mean())) < 5 * want / np.sqrt(flat.numel())


def test_supported_models():
    assert supports_ghost(build_model("cnn", (3, 32, 32), 10, dp=True))
    assert supports_ghost(build_model("cnn-improved", (3, 32, 32), 10, dp=True))      # GroupNorm
    assert not supports_ghost(build_model("cnn-improved", (3, 32, 32), 10, dp=False))  # BatchNorm mixes samples
    assert not supports_ghost(nn.Sequential(nn.Conv2d(4, 4, 3, groups=2), nn.Flatten()))
    assert not supports_ghost(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"), nn.Flatten()))
    assert not supports_ghost(nn.Sequential(nn.Conv2d(4, 4, 3, padding="same"), nn.Flatten()))
    assert not supports_ghost(nn.Sequential(nn.GroupNorm(2, 4, affine=False), nn.Flatten()))
    assert supports_ghost_dense(build_model("mlp", (3, 32, 32), 10))
    assert not supports_ghost_dense(build_model("cnn", (3, 32, 32), 10))


@pytest.mark.parametrize("model,learns", [("cnn", 0.35), ("cnn-improved", None), ("cnn-improved-small", 0.15)])
@pytest.mark.slow
def test_trainer_runs_cnn_dpsgd_on_the_fast_engine(digits, tiny, model, learns):
    """CNNs under DP-SGD train on the one-backward engine: the same ε as Opacus's path (same q,
    steps and σ), the same weights for the same seed, and a model that learns (the
    three-block cnn-improved does not learn on 300 digits in 15 epochs under σ 0.8, on
    Opacus's path either: both stay at chance)."""
    short = tiny(model=model, dp=True, noise_multiplier=0.8, epochs=2, part_size=300, batch_size=50)
    fast = train_model(short, digits, CPU, engine="fast")
    ref = train_model(short, digits, CPU, engine="reference")
    assert fast.metrics["engine"] == "fast"
    for key in ("sample_rate", "steps", "noise_multiplier", "epsilon"):
        assert fast.metrics[key] == pytest.approx(ref.metrics[key], rel=1e-12), key
    again = train_model(short, digits, CPU, engine="fast")
    for p, q in zip(fast.model.parameters(), again.model.parameters()):
        assert torch.equal(p, q)
    if learns is None:
        return
    longer = train_model(tiny(model=model, dp=True, noise_multiplier=0.8, epochs=15, part_size=300, batch_size=50,
                              width=100), digits, CPU, engine="fast")
    # Opacus's path reaches 0.49 (cnn) and 0.31 (cnn-improved-small) here (10 classes: chance is 0.1)
    assert longer.metrics["test_accuracy"] > learns and longer.loss_history[-1] < longer.loss_history[0]


def test_cnns_train_channels_last_and_come_back_in_the_standard_layout(digits, tiny):
    """Plain CNN training runs in the channels-last layout (faster convolutions on the CPU): the
    trained model is back in the standard layout, as fast as measured, and learns the same
    as the reference engine's model (same recipe and seed; the kernels differ, so the bits do)."""
    from privaudit.training.trainer import channels_last

    model = build_model("cnn", (1, 8, 8), 10)
    with channels_last(model, CPU) as layout:
        assert layout is torch.channels_last and model[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert all(p.is_contiguous() for p in model.parameters())
    with channels_last(build_model("mlp", (1, 8, 8), 10), CPU) as layout:
        assert layout is None
    cfg = tiny(model="cnn", epochs=6, part_size=300, batch_size=50)
    fast = train_model(cfg, digits, CPU, engine="fast")
    ref = train_model(cfg, digits, CPU, engine="reference")
    assert all(p.is_contiguous() for p in fast.model.parameters())
    assert fast.metrics["test_accuracy"] == pytest.approx(ref.metrics["test_accuracy"], abs=0.05)
    assert fast.metrics["test_accuracy"] > 0.6
    for p, q in zip(fast.model.parameters(), ref.model.parameters()):
        assert torch.allclose(p, q, atol=1e-3)


def test_clip_factors_and_noise_std_are_dp_sgds_formulas_and_every_layer_type_has_its_rule():
    """c_i = min(1, C / (‖g_i‖ + 1e-6)) / E|B|, 0 on padding; the noise's std σC / E|B|; one
    rule per parametrised layer type, which says what it supports."""
    from privaudit.training.dp_engine import LAYER_RULES, PARAM_LAYERS, clip_factors, noise_std, rule_of

    sq = torch.tensor([0.0, 4.0, 0.25, 9.0])
    real = torch.tensor([True, True, True, False])
    got = clip_factors(sq, 1.0, 0.5, real)
    want = torch.tensor([0.5, 0.5 / (2 + 1e-6), 0.5, 0.0])
    torch.testing.assert_close(got, want)
    assert noise_std(1.5, 2.0, 0.25) == 0.75
    assert set(LAYER_RULES) == set(PARAM_LAYERS)
    assert rule_of(nn.Conv2d(3, 4, 3, padding=1)).supports(nn.Conv2d(3, 4, 3, padding=1))
    assert not rule_of(nn.Conv2d(4, 4, 3, groups=2)).supports(nn.Conv2d(4, 4, 3, groups=2))
    assert not rule_of(nn.GroupNorm(2, 4, affine=False)).supports(nn.GroupNorm(2, 4, affine=False))
    assert rule_of(nn.ReLU()) is None
