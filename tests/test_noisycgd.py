"""The convex two-layer ReLU approximation and NoisyCGD (docs/methods/b-hidden-state.md B.1–B.2)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from privaudit.models.convex_relu import ConvexReLU
from privaudit.training.noisycgd import (
    clipped_mean_gradient,
    from_working,
    logits_and_gates,
    per_sample_gradient_norms,
    to_working,
    train_noisycgd,
)


def _problem(n=40, d=12, classes=4, gates=6, seed=0):
    torch.manual_seed(seed)
    model = ConvexReLU(d, classes, gates)
    with torch.no_grad():
        model.v.normal_(0, 0.3)
    g = torch.Generator().manual_seed(seed)
    return model, torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g)


def test_forward_matches_the_feature_definition():
    """logits_c = Σ_i 1[u_iᵀx ≥ 0] xᵀ v_{i,:,c}, computed from the materialised features."""
    model, x, _ = _problem()
    gates = (x @ model.u.t() >= 0).float()
    features = (gates[:, :, None] * x[:, None, :]).reshape(len(x), -1)  # (B, P·d)
    explicit = features @ model.v.detach().reshape(-1, model.v.shape[2])
    assert torch.allclose(model(x), explicit, atol=1e-5)
    w = to_working(model.v.detach())
    assert torch.equal(from_working(w, model.v.shape[0]), model.v.detach())
    logits, _ = logits_and_gates(x, w, model.u, model.v.shape[2])
    assert torch.allclose(logits, explicit, atol=1e-5)


def test_closed_form_per_sample_gradients_equal_autograd():
    model, x, y = _problem()
    w = to_working(model.v.detach())
    clip = 6.0  # about the median per-sample gradient norm here
    fast, _ = clipped_mean_gradient(x, y, w, model.u, clip, model.v.shape[2])
    total = torch.zeros_like(model.v)
    norms = []
    for j in range(len(y)):
        model.zero_grad()
        F.cross_entropy(model(x[j:j + 1]), y[j:j + 1]).backward()
        gj = model.v.grad.clone()
        norms.append(float(gj.norm()))
        total += gj * min(1.0, clip / (norms[-1] + 1e-6))
    assert torch.allclose(from_working(fast, model.v.shape[0]), total / len(y), atol=1e-6)
    logits, gates = logits_and_gates(x, w, model.u, model.v.shape[2])
    residual = torch.softmax(logits, 1) - F.one_hot(y, model.v.shape[2])
    assert torch.allclose(per_sample_gradient_norms(x, residual, gates), torch.tensor(norms), rtol=1e-5)
    assert min(norms) < clip < max(norms)  # the bound binds for some samples only


def test_objective_is_strongly_convex():
    """F(v₂) ≥ F(v₁) + ⟨∇F(v₁), v₂ − v₁⟩ + λ/2 ‖v₂ − v₁‖² on random pairs."""
    model, x, y = _problem()
    lam = 0.1

    def objective(v):
        logits = torch.func.functional_call(model, {"v": v, "u": model.u}, (x,))
        return F.cross_entropy(logits, y) + lam / 2 * (v ** 2).sum()

    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        v1 = torch.randn(model.v.shape, generator=g)
        v2 = v1 + torch.randn(model.v.shape, generator=g) * 0.5
        v1.requires_grad_(True)
        f1 = objective(v1)
        (grad,) = torch.autograd.grad(f1, v1)
        with torch.no_grad():
            f2 = objective(v2)
            bound = f1 + (grad * (v2 - v1)).sum() + lam / 2 * ((v2 - v1) ** 2).sum()
        assert float(f2) >= float(bound) - 1e-5


def test_noiseless_training_converges_to_the_optimum():
    """σ = 0, a clip bound that never binds, full-batch steps: the gradient of the strongly
    convex objective goes to zero and the loss drops."""
    model, x, y = _problem(n=64)
    x = x * 0.3  # features of norm ~2.5: the loss is ~3-smooth, so a step of 0.3 contracts
    lam, lr = 0.1, 0.3
    history = train_noisycgd(model, x, y, noise_multiplier=0.0, max_grad_norm=1e6, batch_size=64, epochs=600,
                             lr=lr, l2=lam, generator=torch.Generator().manual_seed(0), noise_seed=0)
    assert history[-1] < history[0]
    v = model.v.detach().clone().requires_grad_(True)
    logits = torch.func.functional_call(model, {"v": v, "u": model.u}, (x,))
    objective = F.cross_entropy(logits, y) + lam / 2 * (v ** 2).sum()
    (grad,) = torch.autograd.grad(objective, v)
    assert float(grad.norm()) < 1e-4 * float(v.detach().norm())


def test_noise_has_the_stated_std():
    """Zero inputs give zero gradients: one step with η = 1, λ = 0 leaves −noise, std σC/b."""
    d, classes, gates, b = 200, 10, 50, 100
    model = ConvexReLU(d, classes, gates)
    sigma, clip = 3.0, 0.7
    train_noisycgd(model, torch.zeros(b, d), torch.zeros(b, dtype=torch.long), noise_multiplier=sigma,
                   max_grad_norm=clip, batch_size=b, epochs=1, lr=1.0, l2=0.0,
                   generator=torch.Generator().manual_seed(0), noise_seed=5)
    v = model.v.detach().ravel()
    want = sigma * clip / b
    se = want / (2 * v.numel()) ** 0.5
    assert abs(float(v.std()) - want) < 5 * se
    assert abs(float(v.mean())) < 5 * want / v.numel() ** 0.5


def test_batches_are_fixed_disjoint_and_cyclic():
    """Same seed, same model; the remainder n mod b is never used."""
    model_a, x, y = _problem(n=45)
    model_b = ConvexReLU(12, 4, 6)
    model_b.load_state_dict(model_a.state_dict())
    kw = dict(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=10, epochs=3, lr=0.1, l2=0.01, noise_seed=3)
    train_noisycgd(model_a, x, y, generator=torch.Generator().manual_seed(9), **kw)
    train_noisycgd(model_b, x, y, generator=torch.Generator().manual_seed(9), **kw)
    assert torch.equal(model_a.v, model_b.v)
    with pytest.raises(ValueError):
        train_noisycgd(ConvexReLU(12, 4, 6), x[:5], y[:5], generator=torch.Generator(), **kw)


# -- wired into configs, training, the command line and reports -----------------------------

from privaudit.analysis.hidden_state import noisycgd_epsilon  # noqa: E402
from privaudit.core.config import make_config  # noqa: E402
from privaudit.errors import ConfigError  # noqa: E402
from privaudit.training import train_model  # noqa: E402


def test_convex_relu_config_rules():
    cfg = make_config(model="convex-relu", dataset="digits", dp=True, noise_multiplier=5.0)
    assert cfg.defence.mechanism == "noisycgd" and cfg.defence.name == "noisycgd"
    assert cfg.model.width == 100 and cfg.train.weight_decay == 0.174 and cfg.train.lr == 3.1e-4
    assert "-ncgd-s5-" in cfg.run_name
    assert "mechanism" not in make_config(dp=True, noise_multiplier=1.0).hash_dict()["defence"]  # old hashes kept
    for bad in (dict(model="convex-relu", kappa=0.5),                                  # MG noise
                dict(model="convex-relu", dp=True, noise_multiplier=1.0, mechanism="dpsgd"),
                dict(model="mlp", dp=True, noise_multiplier=1.0, mechanism="noisycgd"),  # not convex
                dict(model="convex-relu", dp=True, noise_multiplier=1.0, lr=10.0, weight_decay=0.2),
                dict(model="convex-relu", dp=True, noise_multiplier=1.0, weight_decay=0.0),
                dict(model="convex-relu", batch_size=1000)):                            # > part size
        with pytest.raises(ConfigError):
            make_config(dataset="digits", **bad)


def test_train_model_noisycgd_reports_the_hidden_state_epsilon(digits):
    cfg = make_config(model="convex-relu", dataset="digits", dp=True, noise_multiplier=5.0, epochs=20,
                      width=16, part_size=200)
    result = train_model(cfg, digits, "cpu")
    m = result.metrics
    want = noisycgd_epsilon(5.0, 200, 64, 20, 3.1e-4, 0.174, 1e-5)
    assert m["epsilon"] == pytest.approx(want.epsilon, rel=1e-12)
    assert m["accountant"] == "hidden-state GDP" and m["steps"] == 3 * 20
    calibrated = train_model(make_config(model="convex-relu", dataset="digits", dp=True, target_epsilon=8.0,
                                         epochs=20, width=16, part_size=200), digits, "cpu")
    assert calibrated.metrics["epsilon"] == pytest.approx(8.0, rel=1e-9) and calibrated.metrics["calibrated"]
    plain = train_model(make_config(model="convex-relu", dataset="digits", epochs=20, width=16, part_size=200),
                        digits, "cpu")
    assert "epsilon" not in plain.metrics
    assert plain.metrics["test_accuracy"] > m["test_accuracy"] - 0.02 and plain.metrics["test_accuracy"] > 0.7
