"""Training: architectures, BatchNorm → GroupNorm under DP, reproducibility from the seed."""

from __future__ import annotations

import time

import pytest
import torch
from opacus.validators import ModuleValidator
from torch import nn

from privaudit.core.config import MODELS
from privaudit.errors import ConfigError
from privaudit.models import build_model
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace
from privaudit.training import resolve_device, train_model

CPU = torch.device("cpu")
TIMING_KEYS = {"train_seconds", "fit_seconds", "epoch_seconds"}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 32, 32)])
@pytest.mark.parametrize("dp", [False, True])
def test_every_model_builds_for_digits_and_cifar_shapes(name, shape, dp):
    torch.manual_seed(0)
    model = build_model(name, shape, 10, width=16, dp=dp).eval()
    out = model(torch.randn(5, *shape))
    assert out.shape == (5, 10) and out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_mlp_width_and_cnn_layers():
    mlp = build_model("mlp", (3, 32, 32), 10, width=37)
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [(3072, 37), (37, 10)]
    cnn = build_model("cnn", (3, 32, 32), 10, width=100)
    convs = [m for m in cnn.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.padding) for c in convs] == [(32, (5, 5), (2, 2)), (32, (5, 5), (0, 0))]
    assert any(isinstance(m, nn.Tanh) for m in cnn.modules())
    # the authors' shapes: 32 -> pool 16 -> unpadded 5x5: 12 -> pool 6, so 32 * 6 * 6 features, then n_hidden 100
    assert [(lin.in_features, lin.out_features)
            for lin in cnn.modules() if isinstance(lin, nn.Linear)] == [(1152, 100), (100, 10)]
    # on 8x8 digits the second convolution is padded (4x4 would vanish): the documented deviation
    small = build_model("cnn", (1, 8, 8), 10, width=100)
    assert [c.padding for c in small.modules() if isinstance(c, nn.Conv2d)] == [(2, 2), (2, 2)]
    assert small(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    with pytest.raises(ConfigError, match="resnet"):
        build_model("resnet", (1, 8, 8), 10)


def test_cnn_improved_uses_groupnorm_under_dp_and_batchnorm_otherwise():
    plain = build_model("cnn-improved", (3, 32, 32), 10, width=256, dp=False)
    private = build_model("cnn-improved", (3, 32, 32), 10, width=256, dp=True)
    bn = [m for m in plain.modules() if isinstance(m, nn.BatchNorm2d)]
    gn = [m for m in private.modules() if isinstance(m, nn.GroupNorm)]
    assert len(bn) == 6 and not any(isinstance(m, nn.GroupNorm) for m in plain.modules())
    assert len(gn) == 6 and not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in private.modules())
    assert [m.num_channels for m in gn] == [32, 32, 64, 64, 128, 128]
    assert ModuleValidator.validate(private, strict=False) == []
    assert ModuleValidator.validate(plain, strict=False) != []
    # the attack and DP sweeps' variant: a third block of 128 filters, dropout 0.2, 0.3, 0.4, dense 256, dropout 0.5
    assert [m.p for m in plain.modules() if isinstance(m, nn.Dropout)] == [0.2, 0.3, 0.4, 0.5]
    assert [(lin.in_features, lin.out_features)
            for lin in plain.modules() if isinstance(lin, nn.Linear)] == [(2048, 256), (256, 10)]
    # Figure 4's two-block variant: dense 100 after 64 filters at 8x8
    small = build_model("cnn-improved-small", (3, 32, 32), 10, width=100)
    assert [m.p for m in small.modules() if isinstance(m, nn.Dropout)] == [0.2, 0.3, 0.5]
    assert [(lin.in_features, lin.out_features)
            for lin in small.modules() if isinstance(lin, nn.Linear)] == [(4096, 100), (100, 10)]


def test_default_widths_follow_the_paper():
    from privaudit.core.config import make_config

    assert {m: make_config(model=m, dataset="cifar10").model.width
            for m in ("mlp", "cnn", "cnn-improved", "cnn-improved-small")} == {
        "mlp": 512, "cnn": 100, "cnn-improved": 256, "cnn-improved-small": 100}
    assert make_config(model="cnn-improved-small", dataset="cifar10").train.weight_decay == 1e-5


def test_dp_cnn_improved_trains_with_groupnorm(digits, tiny):
    cfg = tiny(model="cnn-improved", part_size=40, epochs=1, dp=True, noise_multiplier=1.0)
    result = train_model(cfg, digits)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in result.model.modules())
    assert sum(isinstance(m, nn.GroupNorm) for m in result.model.modules()) == 6
    assert result.metrics["steps"] == 2 and result.metrics["epsilon"] > 0
    plain = train_model(tiny(model="cnn-improved", part_size=40, epochs=1), digits)
    assert sum(isinstance(m, nn.BatchNorm2d) for m in plain.model.modules()) == 6


def test_train_metrics_are_consistent(digits, tiny):
    cfg = tiny(part_size=60, epochs=4)
    r = train_model(cfg, digits)
    m = r.metrics
    assert m["n_train"] == m["n_test"] == 60
    assert m["generalisation_gap"] == pytest.approx(m["train_accuracy"] - m["test_accuracy"])
    for k in ("train_accuracy", "test_accuracy"):
        assert 0 <= m[k] <= 1 and (m[k] * 60) == pytest.approx(round(m[k] * 60), abs=1e-4)
    assert len(r.loss_history) == 4 and r.loss_history[-1] < r.loss_history[0]
    assert not r.model.training and next(r.model.parameters()).device.type == "cpu"
    assert "epsilon" not in m


@pytest.mark.parametrize("extra", [{}, {"dp": True, "noise_multiplier": 1.0}])
def test_epoch_clock_counts_the_epochs_and_not_the_set_up(monkeypatch, digits, tiny, extra):
    """fit_seconds starts once the optimiser is built (torch.optim's first use imports
    torch._dynamo: seconds a process) and is the sum of the epochs' durations."""
    import privaudit.training.trainer as trainer
    built = trainer.make_optimizer
    set_up = 0.3

    def slow_optimizer(*args, **kw):  # a set-up of at least ``set_up`` seconds
        t = time.perf_counter()
        while time.perf_counter() - t < set_up:
            pass
        return built(*args, **kw)

    monkeypatch.setattr(trainer, "make_optimizer", slow_optimizer)
    m = train_model(tiny(part_size=60, epochs=3, **extra), digits, stack=False).metrics
    assert len(m["epoch_seconds"]) == 3 and min(m["epoch_seconds"]) > 0
    assert m["fit_seconds"] == pytest.approx(sum(m["epoch_seconds"]), abs=1e-3)
    assert m["train_seconds"] - m["fit_seconds"] >= set_up


def _weights(ws: Workspace, name: str) -> dict[str, torch.Tensor]:
    return ws.load_model(name, (1, 8, 8)).model.state_dict()


@pytest.mark.parametrize("extra", [
    {"kappa": 0.5},
    {"model": "cnn-improved", "kappa": 0.3, "width": 16},          # dropout + BatchNorm
    {"dp": True, "noise_multiplier": 1.0, "kappa": 0.2},           # Poisson sampling + noise
])
def test_same_seed_same_metrics_and_weights_different_seed_different_weights(tmp_path, data_cache, tiny, extra):
    cfg = tiny(part_size=60, epochs=2, seed=7, **extra)
    runs = []
    for i in range(2):
        ws = Workspace(tmp_path / f"ws{i}").ensure_writable()
        runs.append((ws, ensure_model(cfg, ws, data_cache, CPU)))
    (ws_a, a), (ws_b, b) = runs
    assert not a.reused and not b.reused
    def strip(m):
        return {k: v for k, v in m.items() if k not in TIMING_KEYS}

    assert strip(a.metrics) == strip(b.metrics)
    assert a.metrics["loss_history"] == b.metrics["loss_history"]
    wa, wb = _weights(ws_a, a.name), _weights(ws_b, b.name)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    # another seed: other weights (and another split)
    other = tiny(part_size=60, epochs=2, seed=8, **extra)
    ws_c = Workspace(tmp_path / "ws-other").ensure_writable()
    c = ensure_model(other, ws_c, data_cache, CPU)
    wc = _weights(ws_c, c.name)
    assert not all(torch.equal(wa[k], wc[k]) for k in wa if wa[k].is_floating_point())
    assert strip(c.metrics) != strip(a.metrics)


def test_ensure_model_reuses_an_existing_model(tmp_path, data_cache, tiny):
    ws = Workspace(tmp_path).ensure_writable()
    cfg = tiny(epochs=1)
    first = ensure_model(cfg, ws, data_cache, CPU)
    again = ensure_model(cfg, ws, data_cache, CPU)
    assert not first.reused and again.reused
    assert again.metrics == first.metrics and again.path == first.path


def test_mg_noise_changes_training_only_through_the_mask(digits, tiny):
    """kappa = 0 draws no mask, so it is exactly plain training; kappa > 0 changes the model."""
    base = train_model(tiny(epochs=2), digits)
    again = train_model(tiny(epochs=2, kappa=0.0), digits)
    masked = train_model(tiny(epochs=2, kappa=0.5), digits)
    sd0, sd1, sd2 = (r.model.state_dict() for r in (base, again, masked))
    assert all(torch.equal(sd0[k], sd1[k]) for k in sd0)
    assert not all(torch.equal(sd0[k], sd2[k]) for k in sd0)


def test_training_leaves_the_global_rng_alone(digits, tiny):
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    train_model(tiny(epochs=1, kappa=0.5), digits)
    assert torch.equal(torch.rand(3), expected)


def test_resolve_device():
    assert resolve_device("cpu") == CPU
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ConfigError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="`device` cpu"):
            resolve_device("cuda")


@pytest.mark.parametrize("name", ["mlp", "cnn", "cnn-improved", "cnn-improved-small"])
def test_inference_path_equals_the_plain_forward_pass(name):
    """predict_logits (inference mode, channels-last, its own batch size) gives the plain
    NCHW forward pass's logits within float rounding, and leaves the model as it was."""
    from privaudit.models import build_model
    from privaudit.training.results import predict_logits

    torch.manual_seed(0)
    model = build_model(name, (3, 32, 32), 10, width=64)
    x = torch.randn(150, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        plain = model(x)
    got = predict_logits(model, x)
    assert got.shape == (150, 10) and not got.requires_grad
    assert torch.allclose(got, plain, rtol=1e-4, atol=1e-4)
    conv = next((m for m in model.modules() if isinstance(m, torch.nn.Conv2d)), None)
    if conv is not None:
        assert conv.weight.is_contiguous()  # back in the standard layout
        model.to(memory_format=torch.channels_last)  # a model in channels-last stays so
        predict_logits(model, x[:10])
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
