"""DP-SGD: ε accounting against Opacus's accountants, known values, calibration, fallback."""

from __future__ import annotations

import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

import privaudit.analysis.accounting as dpsgd
from privaudit.analysis.accounting import calibrate_noise_multiplier, dpsgd_epsilon, epsilon_from_history
from privaudit.core.config import make_config
from privaudit.errors import ConfigError
from privaudit.training import train_model


def _opacus_epsilon(acc_cls, sigma, q, steps, delta):
    acc = acc_cls()
    acc.history = [(sigma, q, steps)]
    return float(acc.get_epsilon(delta=delta))


@pytest.mark.parametrize("sigma, expected", [(1.0, 4.1), (2.0, 1.4)])
def test_known_epsilon_values_papers_a5(sigma, expected):
    """docs/methods/a-mg-noise.md A.5: PRV, q = 1/105, 5,250 steps, δ = 1e-5: σ = 1 → ε ≈ 4.1, σ = 2 → ε ≈ 1.4."""
    eps, name = dpsgd_epsilon(sigma, 1 / 105, 5250, 1e-5)
    assert name == "prv"
    assert eps == pytest.approx(expected, abs=0.15)


def test_epsilon_trends():
    """More noise → smaller ε; more steps → larger ε; larger δ → smaller ε."""
    eps = [dpsgd_epsilon(s, 0.01, 500, 1e-5)[0] for s in (0.8, 1.0, 1.5, 3.0)]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    by_steps = [dpsgd_epsilon(1.0, 0.01, t, 1e-5)[0] for t in (100, 400, 1600)]
    assert all(a < b for a, b in zip(by_steps, by_steps[1:]))
    assert dpsgd_epsilon(1.0, 0.01, 400, 1e-3)[0] < dpsgd_epsilon(1.0, 0.01, 400, 1e-5)[0]


def test_epsilon_from_history_matches_opacus_and_names_the_accountant():
    hist = [(1.1, 0.02, 300)]
    eps, name = epsilon_from_history(hist, 1e-5)
    assert name == "prv" and eps == _opacus_epsilon(PRVAccountant, 1.1, 0.02, 300, 1e-5)
    eps_rdp, name_rdp = epsilon_from_history(hist, 1e-5, accountant="rdp")
    assert name_rdp == "rdp" and eps_rdp == _opacus_epsilon(RDPAccountant, 1.1, 0.02, 300, 1e-5)
    assert eps_rdp > eps   # RDP is the looser bound


class _FailingPRV:
    """Stands in for the PRV accountant where it breaks (e.g. out of memory at tiny σ)."""

    def __init__(self, exc):
        self.exc, self.history = exc, []

    def get_epsilon(self, delta, **kwargs):
        raise self.exc


def _patch_prv(monkeypatch, make_failing):
    real = dpsgd.create_accountant
    asked = []

    def fake(mechanism):
        asked.append(mechanism)
        return make_failing() if mechanism == "prv" else real(mechanism=mechanism)

    monkeypatch.setattr(dpsgd, "create_accountant", fake)
    dpsgd._epsilon_cached.cache_clear()  # ε is computed once per process: ask the stand-in afresh
    return asked


@pytest.mark.parametrize("exc", [MemoryError("Unable to allocate 7.25 GiB"), ValueError("domain too small"),
                                 RuntimeError("std::bad_alloc")])
def test_epsilon_falls_back_to_rdp_when_prv_fails(monkeypatch, exc):
    """Wherever PRV breaks, the RDP bound is reported and named."""
    asked = _patch_prv(monkeypatch, lambda: _FailingPRV(exc))
    eps, name = epsilon_from_history([(1.0, 0.1, 10)], 1e-5)
    assert asked == ["rdp", "prv", "rdp"]  # RDP screen, PRV fails, RDP reported
    assert name == "rdp"
    assert eps == _opacus_epsilon(RDPAccountant, 1.0, 0.1, 10, 1e-5)


@pytest.mark.slow
def test_very_large_epsilon_never_asks_prv(monkeypatch):
    """PRV at σ = 0.1 with many steps needs gigabytes (MemoryError / bad_alloc on a 6 GiB
    limit): beyond PRV_MAX_EPSILON under RDP, the RDP bound is reported without trying PRV."""
    asked = _patch_prv(monkeypatch, lambda: _FailingPRV(AssertionError("PRV must not be asked")))
    eps, name = epsilon_from_history([(0.1, 0.5, 1000)], 1e-5)
    assert asked == ["rdp"] and name == "rdp"
    assert eps == _opacus_epsilon(RDPAccountant, 0.1, 0.5, 1000, 1e-5)
    assert eps > dpsgd.PRV_MAX_EPSILON
    sigma, name = calibrate_noise_multiplier(500.0, 1e-5, 0.5, 1000)
    assert name == "rdp" and "prv" not in asked
    assert dpsgd_epsilon(sigma, 0.5, 1000, 1e-5, accountant="rdp")[0] <= 500.0


def test_epsilon_falls_back_to_rdp_when_prv_is_not_finite(monkeypatch):
    class InfPRV(_FailingPRV):
        def get_epsilon(self, delta, **kwargs):
            return float("inf")

    _patch_prv(monkeypatch, lambda: InfPRV(None))
    eps, name = epsilon_from_history([(1.0, 0.1, 10)], 1e-5)  # RDP ε is small: PRV is asked
    assert name == "rdp" and eps == _opacus_epsilon(RDPAccountant, 1.0, 0.1, 10, 1e-5)


def test_epsilon_is_computed_once_per_setting(monkeypatch):
    """An audit's models of one DP-SGD setting share their history: the accountants run once."""
    asked = _patch_prv(monkeypatch, PRVAccountant)  # the real accountants, counted
    first = epsilon_from_history([(1.0, 0.1, 10)], 1e-5)
    again = epsilon_from_history([[1, 0.1, 10]], 1e-5)  # the same setting, written as Opacus's lists
    assert again == first and first[1] == "prv" and asked == ["rdp", "prv"]
    assert first[0] == _opacus_epsilon(PRVAccountant, 1.0, 0.1, 10, 1e-5)


def test_epsilon_error_when_every_accountant_fails(monkeypatch):
    monkeypatch.setattr(dpsgd, "create_accountant", lambda mechanism: _FailingPRV(ValueError("nope")))
    dpsgd._epsilon_cached.cache_clear()
    with pytest.raises(ConfigError, match="nope"):
        epsilon_from_history([(1.0, 0.1, 10)], 1e-5)
    # a named accountant is not silently replaced by another one
    asked = _patch_prv(monkeypatch, lambda: _FailingPRV(ValueError("prv broke")))
    with pytest.raises(ConfigError, match="prv broke"):
        epsilon_from_history([(1.0, 0.1, 10)], 1e-5, accountant="prv")
    assert asked == ["prv"]


@pytest.mark.parametrize("target, q, steps", [(1.0, 0.01, 100), (8.0, 0.1, 50), (0.5, 0.05, 200),
                                              (2.0, 1 / 105, 5250)])
@pytest.mark.slow
def test_calibrated_sigma_never_overshoots(target, q, steps):
    sigma, name = calibrate_noise_multiplier(target, 1e-5, q, steps)
    eps, _ = dpsgd_epsilon(sigma, q, steps, 1e-5, accountant=name)
    assert name == "prv"
    assert eps <= target
    assert eps >= target - 0.01 - 1e-9          # Opacus's tolerance: at most 0.01 below
    # a slightly smaller σ would overshoot: the calibrated σ is (nearly) the smallest one
    assert dpsgd_epsilon(sigma * 0.97, q, steps, 1e-5, accountant=name)[0] > target - 0.01


def test_unreachable_target_epsilon_is_a_config_error():
    with pytest.raises(ConfigError, match="`target_epsilon`"):
        calibrate_noise_multiplier(1e-6, 1e-5, 1.0, 1)


# -- through the trainer --------------------------------------------------------------------

@pytest.fixture(scope="module")
def dp_run(digits):
    cfg = make_config(model="mlp", dataset="digits", width=32, part_size=60, epochs=2, batch_size=20,
                      dp=True, noise_multiplier=1.3, max_grad_norm=1.0, delta=1e-5, seed=2)
    return cfg, train_model(cfg, digits)


def test_reported_epsilon_equals_opacus_prv_for_the_trained_run(dp_run):
    cfg, result = dp_run
    m = result.metrics
    # 60 members, batch 20 → q = 1/3, 3 Poisson batches per epoch, 2 epochs
    assert m["sample_rate"] == pytest.approx(1 / 3)
    assert m["steps"] == 6
    assert m["noise_multiplier"] == 1.3 and m["delta"] == 1e-5
    assert m["expected_batch_size"] == pytest.approx(20.0)
    assert m["accountant"] == "prv" and m["calibrated"] is False
    expected = _opacus_epsilon(PRVAccountant, 1.3, m["sample_rate"], m["steps"], 1e-5)
    assert m["epsilon"] == pytest.approx(expected, rel=1e-9)
    assert len(result.loss_history) == cfg.train.epochs


@pytest.mark.slow
def test_run_calibrated_to_a_target_epsilon(digits):
    cfg = make_config(model="mlp", dataset="digits", width=32, part_size=60, epochs=2, batch_size=20,
                      dp=True, target_epsilon=3.0, seed=2)
    m = train_model(cfg, digits).metrics
    assert m["calibrated"] is True and m["accountant"] == "prv"
    assert m["epsilon"] <= 3.0
    assert m["epsilon"] == pytest.approx(3.0, abs=0.05)
    expected = _opacus_epsilon(PRVAccountant, m["noise_multiplier"], m["sample_rate"], m["steps"], 1e-5)
    assert m["epsilon"] == pytest.approx(expected, rel=1e-9)


def test_dp_noise_is_in_the_loop(digits):
    """Same recipe, 30 steps: without DP the MLP learns the digits; with σ = 30 (noise std
    1.5 per coordinate of the mean clipped gradient) it stays near chance (1/10)."""
    kw = dict(model="mlp", dataset="digits", width=32, part_size=60, epochs=10, batch_size=20, seed=2)
    plain = train_model(make_config(**kw), digits).metrics
    noisy = train_model(make_config(dp=True, noise_multiplier=30.0, **kw), digits).metrics
    assert plain["train_accuracy"] > 0.5
    assert noisy["train_accuracy"] < 0.3
    assert noisy["steps"] == 30 and noisy["epsilon"] < 0.5
