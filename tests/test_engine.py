"""The fast training engine agrees with the plain reference (issue: speed never changes results).

- oneDNN dense layers vs ``F.linear`` (values and gradients);
- the dense DP-SGD step vs an explicit per-sample-gradient reference, padding, empty
  batches, noise scale and seeding;
- the fast and reference engines end to end (same metrics for the same seed);
- stacked pool training vs one model after another.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from privaudit.errors import ConfigError
from privaudit.models import build_model
from privaudit.models.fast_linear import FastLinear, fast_layers, linear, onednn_enabled
from privaudit.training import train_model
from privaudit.training.dp_engine import GaussianNoise, GhostDPSGD, poisson_batch, supports_ghost_dense
from privaudit.training.results import resolve_engine
from privaudit.training.stacked import can_stack, stack_groups, train_stacked

CPU = torch.device("cpu")


def _mlp(d=48, width=32, classes=10, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, width), nn.ReLU(), nn.Linear(width, classes))


@pytest.mark.parametrize("bias", [True, False])
def test_fast_linear_matches_f_linear_values_and_gradients(bias):
    if not onednn_enabled():
        pytest.skip("oneDNN linear not available on this build")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 300, generator=g, requires_grad=True)
    w = torch.randn(70, 300, generator=g, requires_grad=True)
    b = torch.randn(70, generator=g, requires_grad=True) if bias else None
    up = torch.randn(37, 70, generator=g)
    out = linear(x, w, b)
    ref = F.linear(x, w, b)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-4)
    grads = torch.autograd.grad((out * up).sum(), [x, w] + ([b] if bias else []))
    refs = torch.autograd.grad((ref * up).sum(), [x, w] + ([b] if bias else []))
    for a, r in zip(grads, refs):
        assert torch.allclose(a, r, rtol=1e-5, atol=1e-4)


def test_fast_layers_swaps_and_restores_linear_classes():
    model = _mlp()
    with fast_layers(model):
        assert all(type(m) is FastLinear for m in model if isinstance(m, nn.Linear))
    assert all(type(m) is nn.Linear for m in model if isinstance(m, nn.Linear))
    assert set(model.state_dict()) == {"1.weight", "1.bias", "3.weight", "3.bias"}


def _per_sample_reference(model, x, y, clip):
    """Σ_i g_i · min(1, C/(‖g_i‖ + 1e-6)), one autograd call per sample."""
    total = [torch.zeros_like(p) for p in model.parameters()]
    for i in range(len(y)):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        norm = float(torch.sqrt(sum((g ** 2).sum() for g in grads)))
        for t, g in zip(total, grads):
            t += g * min(1.0, clip / (norm + 1e-6))
    return total


@pytest.mark.parametrize("batch", [45, 64, 1])
def test_dense_dpsgd_clipped_sum_matches_per_sample_reference(batch):
    """Ghost norms + one weighted product = explicit per-sample clipping (σ = 0), also for
    batch sizes that get padded (45, 1) and a clip bound that binds for some samples only."""
    model = _mlp()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(batch, 3, 4, 4, generator=g) * 2
    y = torch.randint(0, 10, (batch,), generator=g)
    clip = 6.0  # about the median per-sample norm here: binds for some samples only
    expected = 16
    dp = GhostDPSGD(model, clip, 0.0, expected, GaussianNoise(0, CPU))
    losses = dp.compute_grads(x, y)
    fast = [p.grad.clone() for p in model.parameters()]
    ref = _per_sample_reference(model, x, y, clip)
    for f, r in zip(fast, ref):
        assert torch.allclose(f, r / expected, rtol=1e-4, atol=1e-7)
    assert losses.shape == (batch,)
    assert torch.allclose(losses, F.cross_entropy(model(x), y, reduction="none"), atol=1e-6)


def test_dense_dpsgd_norms_bind_some_samples_only():
    """The test above only means something if clipping changes some gradients and not others."""
    model = _mlp()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(64, 3, 4, 4, generator=g) * 2
    y = torch.randint(0, 10, (64,), generator=g)
    dp = GhostDPSGD(model, 6.0, 0.0, 16, GaussianNoise(0, CPU))
    _, inputs, grads = dp.per_sample_terms(x, y)
    norms = dp.per_sample_norms(inputs, grads)
    assert (norms > 6.0).sum() >= 10 and (norms < 6.0).sum() >= 10


def test_dense_dpsgd_noise_scale_and_empty_batch():
    """An empty Poisson batch gives pure noise N(0, σ²C²)/E|B| per coordinate."""
    model = _mlp(d=300, width=200)
    sigma, clip, expected = 1.5, 0.7, 10
    dp = GhostDPSGD(model, clip, sigma, expected, GaussianNoise(3, CPU))
    dp.compute_grads(torch.zeros(0, 3, 10, 10), torch.zeros(0, dtype=torch.long))
    flat = torch.cat([p.grad.ravel() for p in model.parameters()])
    want = sigma * clip / expected
    se = want / np.sqrt(2 * flat.numel())  # standard error of a sample std
    assert abs(float(flat.std()) - want) < 5 * se
    assert abs(float(flat.mean())) < 5 * want / np.sqrt(flat.numel())


def test_gaussian_noise_is_the_generators_sequence():
    """Drawn a step ahead in a thread, the blocks are still exactly the seeded generator's
    sequence, block after block."""
    noise = GaussianNoise(7, CPU)
    blocks = [noise.draw(10_001).clone() for _ in range(3)]
    noise.close()
    g = torch.Generator().manual_seed(7)
    for block in blocks:
        assert torch.equal(block, torch.empty(10_001).normal_(0.0, 1.0, generator=g))
    other = GaussianNoise(8, CPU)
    assert not torch.equal(other.draw(10_001), blocks[0])
    other.close()


def test_dp_compute_threads_restores_thread_count():
    from privaudit.training.dp_engine import dp_compute_threads

    before = torch.get_num_threads()
    with dp_compute_threads(CPU):
        assert torch.get_num_threads() == max(1, before - 1) if before > 1 else 1
    assert torch.get_num_threads() == before


def test_poisson_batch_size_matches_rate():
    g = torch.Generator().manual_seed(0)
    sizes = [len(poisson_batch(2000, 0.05, g, CPU)) for _ in range(400)]
    mean, se = np.mean(sizes), np.sqrt(2000 * 0.05 * 0.95 / 400)
    assert abs(mean - 100) < 5 * se
    assert len(set(sizes)) > 5  # sizes vary (Poisson sampling, not fixed batches)


def test_supports_ghost_dense():
    assert supports_ghost_dense(_mlp())
    assert not supports_ghost_dense(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2, 2)))
    assert not supports_ghost_dense(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)))


def test_engines_give_the_same_non_private_model(digits, tiny):
    cfg = tiny(kappa=0.5, epochs=4)
    fast = train_model(cfg, digits, CPU, engine="fast")
    ref = train_model(cfg, digits, CPU, engine="reference")
    assert fast.metrics["engine"] == "fast" and ref.metrics["engine"] == "reference"
    for key in ("train_accuracy", "test_accuracy"):
        assert fast.metrics[key] == pytest.approx(ref.metrics[key], abs=1.0 / cfg.data.part_size + 1e-9)
    assert fast.metrics["test_loss"] == pytest.approx(ref.metrics["test_loss"], rel=1e-3)
    for p, q in zip(fast.model.parameters(), ref.model.parameters()):
        assert torch.allclose(p, q, atol=1e-4)


def test_engines_account_dp_identically(digits, tiny):
    """Both DP-SGD paths run the same mechanism: same q, steps, σ, hence the same ε, and
    models of comparable utility (they draw different batches and noise)."""
    cfg = tiny(dp=True, noise_multiplier=1.0, epochs=3, part_size=120)
    fast = train_model(cfg, digits, CPU, engine="fast")
    ref = train_model(cfg, digits, CPU, engine="reference")
    for key in ("sample_rate", "steps", "noise_multiplier", "epsilon", "expected_batch_size"):
        assert fast.metrics[key] == pytest.approx(ref.metrics[key], rel=1e-12), key
    again = train_model(cfg, digits, CPU, engine="fast")
    for p, q in zip(fast.model.parameters(), again.model.parameters()):
        assert torch.equal(p, q)


def test_fast_dp_engine_learns(digits, tiny):
    cfg = tiny(dp=True, noise_multiplier=0.5, epochs=15, part_size=300, width=64, batch_size=50)
    result = train_model(cfg, digits, CPU, engine="fast")
    assert result.metrics["test_accuracy"] > 0.5  # 10 classes: chance is 0.1
    assert result.loss_history[-1] < result.loss_history[0]


def test_resolve_engine(monkeypatch):
    assert resolve_engine() == "fast"
    monkeypatch.setenv("PRIVAUDIT_ENGINE", "reference")
    assert resolve_engine() == "reference"
    with pytest.raises(ConfigError):
        resolve_engine("turbo")


@pytest.mark.parametrize("kappa", [0.0, 0.7])
def test_stacked_pool_equals_one_by_one(digits, tiny, kappa):
    base = tiny(kappa=kappa, epochs=5, width=48)
    cfgs = [base.as_reference(4, i).validated() for i in range(4)]
    assert can_stack(cfgs[0], digits.input_shape)
    stacked = train_stacked(cfgs, digits, CPU)
    single = [train_model(c, digits, CPU, stack=False) for c in cfgs]
    for s, o in zip(stacked, single):
        for key in ("train_accuracy", "test_accuracy", "n_train", "n_test"):
            assert s.metrics[key] == pytest.approx(o.metrics[key], abs=1.5 / base.data.part_size), key
        assert s.metrics["test_loss"] == pytest.approx(o.metrics["test_loss"], rel=1e-3)
        assert np.allclose(s.loss_history, o.loss_history, rtol=1e-4)
        for p, q in zip(s.model.parameters(), o.model.parameters()):
            assert torch.allclose(p, q, atol=1e-4)
        assert np.array_equal(s.normaliser.mean, o.normaliser.mean)


def test_models_that_do_not_stack_train_alone(digits, tiny):
    base = tiny(precision="bf16", epochs=1)
    cfgs = [base.as_reference(4, i).validated() for i in range(2)]
    assert not can_stack(cfgs[0], digits.input_shape)
    assert stack_groups(cfgs, digits.input_shape, len(digits.y)) == [[c] for c in cfgs]


def _agree(stacked, single, part_size):
    for s, o in zip(stacked, single):
        for key in ("train_accuracy", "test_accuracy", "n_train", "n_test"):
            assert s.metrics[key] == pytest.approx(o.metrics[key], abs=1.5 / part_size), key
        assert s.metrics["test_loss"] == pytest.approx(o.metrics["test_loss"], rel=1e-4)
        assert np.allclose(s.loss_history, o.loss_history, rtol=1e-5)
        for p, q in zip(s.model.parameters(), o.model.parameters()):
            assert torch.allclose(p, q, atol=1e-6)
        assert np.array_equal(s.normaliser.mean, o.normaliser.mean)
        for key in ("epsilon", "noise_multiplier", "sample_rate", "steps", "accountant"):
            assert s.metrics.get(key) == o.metrics.get(key), key


def test_models_of_every_role_and_setting_stack_as_they_train_alone(digits, tiny):
    """An audit's small MLPs of one schedule train as one stacked run whatever their role, κ,
    seed and pool index; each equals its own run (same draws, float32 summation order aside:
    measured 3e-8 on the weights)."""
    from privaudit.training.stacked import stack_groups

    base = tiny(epochs=4, width=48, part_size=120)
    cfgs = [base, base.as_shadow(), base.as_reference(4, 1), tiny(epochs=4, width=48, part_size=120, kappa=0.7),
            tiny(epochs=4, width=48, part_size=120, kappa=0.3, seed=1).as_reference(4, 2),
            tiny(epochs=4, width=48, part_size=120, kappa=0.5)]  # seed 0 again after seed 1: its own split
    cfgs = [c.validated() for c in cfgs]
    assert stack_groups(cfgs + [base.as_canary().validated()], digits.input_shape, len(digits.y)) == [
        cfgs, [base.as_canary().validated()]]                      # the canary has more members: its own run
    _agree(train_stacked(cfgs, digits, CPU), [train_model(c, digits, CPU, stack=False) for c in cfgs], 120)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_model_has_the_same_bits_whatever_its_stacked_run(digits, tiny, threads):
    """A config hash names one computation: a stackable recipe trained alone (``train``,
    K = 1) is bit for bit the model an audit's stacked run makes beside other models (plain,
    MG noise, every defence made of step terms, DP-SGD with its padded Poisson batches), on
    one thread or two."""
    def same(a, b):
        return all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))

    kw, odd = dict(epochs=3, width=48, part_size=120), dict(epochs=3, width=50, part_size=120)  # rows of 50, 500
    groups = [[tiny(**kw), tiny(kappa=0.7, **kw), tiny(seed=1, **kw).as_shadow(), tiny(**kw).as_reference(4, 2)],
              [tiny(defence="label-smoothing", knob=0.3, **odd), tiny(**odd), tiny(defence="mixup", knob=0.4, **odd),
               tiny(defence="relaxloss", knob=1.5, **odd), tiny(defence="confidence-penalty", knob=1.0, **odd),
               tiny(defence="input-noise", knob=0.5, **odd), tiny(defence="hamp", knob=0.8, **odd)],
              [tiny(dp=True, noise_multiplier=1.0, **kw), tiny(dp=True, noise_multiplier=2.0, kappa=0.5, seed=1, **kw),
               tiny(dp=True, noise_multiplier=0.5, **kw).as_reference(4, 1)]]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for cfgs in groups:
            cfgs = [c.validated() for c in cfgs]
            stacked = train_stacked(cfgs, digits, CPU)
            for k in range(len(cfgs)):
                alone = train_model(cfgs[k], digits, CPU)
                assert alone.metrics["stacked_models"] == 1 and same(stacked[k], alone), cfgs[k].defence.label
                assert stacked[k].loss_history == alone.loss_history
                assert np.array_equal(stacked[k].loss_trace, alone.loss_trace, equal_nan=True)
            assert not same(stacked[0], stacked[1])
    finally:
        torch.set_num_threads(before)


def test_large_stacks_are_cut_into_runs_of_equal_size(digits, tiny):
    """50 models of one schedule: two runs of 25 (at most STACK_GROUP = 32 a run), which the
    local executor trains side by side; whatever the machine, the same runs."""
    from privaudit.training.stacked import STACK_GROUP, stack_groups

    cfgs = [tiny().as_reference(50, i).validated() for i in range(50)]
    runs = stack_groups(cfgs, digits.input_shape, len(digits.y))
    assert STACK_GROUP == 32 and [len(r) for r in runs] == [25, 25] and sum(runs, []) == cfgs
    assert [len(r) for r in stack_groups(cfgs[:33], digits.input_shape, len(digits.y))] == [16, 17]


def test_dpsgd_models_stack_as_they_train_alone(digits, tiny):
    """DP-SGD MLPs of different σ, κ, seeds and roles in one stacked run: each model's Poisson
    batches, clipping, noise stream and ε are those of its own GhostDPSGD run."""
    def dp(sigma, kappa=0.0, seed=0):
        return tiny(epochs=4, width=48, part_size=120, dp=True, noise_multiplier=sigma, kappa=kappa, seed=seed)

    cfgs = [dp(0.5), dp(0.5).as_shadow(), dp(1.0).as_reference(4, 3), dp(1.0, kappa=0.5), dp(2.0, seed=1)]
    cfgs = [c.validated() for c in cfgs]
    assert len({c.defence.label for c in cfgs}) == 4
    stacked = train_stacked(cfgs, digits, CPU)
    _agree(stacked, [train_model(c, digits, CPU, engine="fast", stack=False) for c in cfgs], 120)
    assert all(r.metrics["stacked_models"] == 5 for r in stacked)


def test_stacked_adam_is_torchs_fused_adam_bit_for_bit():
    """The stacked runs' Adam calls the fused kernel directly: the same parameters, step after
    step, as torch.optim.Adam(fused=True) with the same learning rate and weight decay."""
    from privaudit.training.stacked import FusedAdam

    g = torch.Generator().manual_seed(0)
    ours = [torch.randn(3, 7, 5, generator=g), torch.randn(3, 5, generator=g)]
    theirs, start = [p.clone() for p in ours], [p.clone() for p in ours]
    opt_ours = FusedAdam(ours, lr=1e-2, weight_decay=1e-4)
    opt_theirs = torch.optim.Adam(theirs, lr=1e-2, weight_decay=1e-4, fused=True)
    for _ in range(6):
        for a, b in zip(ours, theirs):
            a.grad = torch.randn(a.shape, generator=g)
            b.grad = a.grad.clone()
        opt_ours.step()
        opt_theirs.step()
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    assert not any(torch.equal(a, s) for a, s in zip(ours, start))  # they did move


def test_stacking_rejects_mixed_recipes(digits, tiny):
    with pytest.raises(ValueError):
        train_stacked([tiny().as_reference(4, 0), tiny(width=16).as_reference(4, 1)], digits, CPU)


def test_bf16_precision_config_rules(tiny):
    from privaudit.executor.auditing import audit_plan

    fp32, bf16 = tiny(), tiny(precision="bf16")
    assert "precision" not in fp32.hash_dict()["train"]  # fp32 configs keep their old hash
    assert fp32.config_hash != bf16.config_hash
    with pytest.raises(ConfigError):
        tiny(precision="bf16", dp=True, noise_multiplier=1.0)
    with pytest.raises(ConfigError):
        tiny(precision="fp16")
    plan = audit_plan(bf16, [0.5], [1.0])
    assert [c.train.precision for c in plan] == ["bf16", "bf16", "fp32"]
    assert bf16.as_shadow().train.precision == "bf16"


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_bf16_training_keeps_accuracy(digits, tiny, model):
    """Mixed precision is checked, not assumed: same recipe and seed, accuracy within 5 points."""
    kw = dict(model=model, part_size=300, epochs=8, width=64, batch_size=32)
    fp32 = train_model(tiny(**kw), digits, CPU)
    bf16 = train_model(tiny(precision="bf16", **kw), digits, CPU)
    assert fp32.metrics["test_accuracy"] > 0.7
    assert abs(bf16.metrics["test_accuracy"] - fp32.metrics["test_accuracy"]) <= 0.05
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())  # master weights stay fp32


def test_dense_dpsgd_ignores_caller_padding_rows():
    """Rows from ``size`` on change nothing, whatever they hold."""
    model = _mlp()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(45, 3, 4, 4, generator=g)
    y = torch.randint(0, 10, (45,), generator=g)
    dp = GhostDPSGD(model, 2.0, 0.0, 16, GaussianNoise(0, CPU))
    assert dp.padded_size(45) == 48 and dp.padded_size(48) == 48
    dp.compute_grads(x, y)
    plain = [p.grad.clone() for p in model.parameters()]
    junk = torch.randn(3, 3, 4, 4, generator=g) * 100
    losses = dp.compute_grads(torch.cat([x, junk]), torch.cat([y, torch.tensor([1, 2, 3])]), 45)
    assert losses.shape == (45,)
    for a, b in zip(plain, model.parameters()):
        assert torch.allclose(a, b.grad, atol=1e-7)


def test_dp_compute_threads_frees_a_core_for_dense_stacks_only():
    """The noise thread gets a core of its own where the noise is a share of the step (dense
    stacks, and NoisyCGD's model=None); convolutional models keep every core."""
    from privaudit.training.dp_engine import dp_compute_threads

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        mlp = build_model("mlp", (3, 32, 32), 10, width=16)
        cnn = build_model("cnn", (3, 32, 32), 10, width=16)
        improved = build_model("cnn-improved", (3, 32, 32), 10, width=16, dp=True)
        for model, threads in ((mlp, 1), (None, 1), (cnn, 2), (improved, 2)):
            with dp_compute_threads(CPU, model):
                assert torch.get_num_threads() == threads
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
