"""MG noise (docs/methods/a-mg-noise.md A.1): mask statistics, independence, seeding, train-time only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import privaudit.training.loop as loop
import privaudit.training.results as results
from privaudit.core.seeding import generator
from privaudit.training import train_model
from privaudit.training.mg_noise import apply_mg_noise, mg_mask
from privaudit.training.results import predict_logits, role_data

N_ROWS, N_COLS = 1000, 1000   # 1e6 draws
N = N_ROWS * N_COLS


def _corr(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().ravel(), b.double().ravel()
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / torch.sqrt((a @ a) * (b @ b)))


@pytest.mark.parametrize("kappa", [0.1, 0.5, 1.3])
def test_mask_mean_one_std_kappa_gaussian(kappa):
    c = mg_mask((N_ROWS, N_COLS), kappa, generator(1)).double()
    assert c.shape == (N_ROWS, N_COLS) and c.dtype == torch.float64
    se_mean = kappa / math.sqrt(N)
    se_std = kappa / math.sqrt(2 * N)
    assert abs(float(c.mean()) - 1.0) < 5 * se_mean
    assert abs(float(c.std()) - kappa) < 5 * se_std
    # Gaussian shape: P(|c - 1| < kappa) = 0.6827, P(c < 1) = 1/2
    p1 = 0.682689492
    assert abs(float(((c - 1).abs() < kappa).double().mean()) - p1) < 5 * math.sqrt(p1 * (1 - p1) / N)
    assert abs(float((c < 1).double().mean()) - 0.5) < 5 * math.sqrt(0.25 / N)


def test_mask_independent_across_samples_coordinates_and_steps():
    kappa = 0.7
    g = generator(2)
    x = torch.ones(N_ROWS, N_COLS)
    m1 = apply_mg_noise(x, kappa, g)   # x = 1, so the result is the mask itself
    m2 = apply_mg_noise(x, kappa, g)   # the next optimisation step
    tol = 5 / math.sqrt(N)
    assert abs(_corr(m1[:, :-1], m1[:, 1:])) < tol        # neighbouring coordinates
    assert abs(_corr(m1[:-1], m1[1:])) < tol              # neighbouring samples
    assert abs(_corr(m1, m2)) < tol                       # successive steps
    assert not torch.equal(m1, m2)
    assert float((m1 == m2).double().mean()) < 1e-4
    # no shared per-sample or per-coordinate component: row and column means have the
    # variance of N_COLS (resp. N_ROWS) independent draws
    row_means, col_means = m1.double().mean(1), m1.double().mean(0)
    for means, k in ((row_means, N_COLS), (col_means, N_ROWS)):
        ratio = float(means.var()) / (kappa ** 2 / k)
        assert abs(ratio - 1) < 5 * math.sqrt(2 / (len(means) - 1))


def test_mask_applies_per_element_on_image_batches():
    x = torch.randn(64, 3, 8, 8, dtype=torch.float64)
    g = generator(3)
    y = apply_mg_noise(x, 0.4, g)
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
    expected = x * mg_mask(x.shape, 0.4, generator(3), dtype=torch.float64)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    # every element has its own mask value, including the channels of one pixel
    c = y / x
    assert len(torch.unique(c)) == x.numel()


def test_kappa_zero_returns_the_input_unchanged_and_uses_no_randomness():
    x = torch.randn(10, 1, 8, 8)
    g = generator(4)
    state = g.get_state().clone()
    out = apply_mg_noise(x, 0.0, g)
    assert out is x
    assert torch.equal(g.get_state(), state)
    m = mg_mask((5, 5), 0.0, generator(4))
    assert torch.equal(m, torch.ones(5, 5))


def test_same_generator_seed_same_mask_different_seed_different_mask():
    a = mg_mask((50, 64), 0.5, generator(123))
    b = mg_mask((50, 64), 0.5, generator(123))
    c = mg_mask((50, 64), 0.5, generator(124))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    x = torch.randn(50, 64)
    assert torch.equal(apply_mg_noise(x, 0.5, generator(9)), apply_mg_noise(x, 0.5, generator(9)))


def _rows(x: torch.Tensor) -> np.ndarray:
    """A random projection of every row, sorted: compares two sets of rows order-free."""
    flat = x.reshape(len(x), -1).double()
    v = torch.from_numpy(np.random.default_rng(0).standard_normal(flat.shape[1]))
    return np.sort((flat @ v).numpy())


@pytest.mark.parametrize("stack", [False, True])
@pytest.mark.parametrize("dp", [False, True])
def test_mask_is_applied_in_training_with_the_configured_kappa_never_in_predict(monkeypatch, digits, tiny, dp, stack):
    """Spy: every training batch goes through apply_mg_noise with kappa from the config, on
    the normalised member inputs; predict_logits (and so every reported metric) never does.
    Both engines (one by one, and stacked, here with K = 1) mask in this one place."""
    calls: list[tuple[float, torch.Tensor]] = []
    in_predict = {"depth": 0}
    real_apply, real_predict = loop.apply_mg_noise, results.predict_logits

    def spy_apply(x, kappa, g):
        assert in_predict["depth"] == 0, "apply_mg_noise called while predicting"
        calls.append((kappa, x.detach().clone()))
        return real_apply(x, kappa, g)

    def spy_predict(*args, **kwargs):
        in_predict["depth"] += 1
        try:
            return real_predict(*args, **kwargs)
        finally:
            in_predict["depth"] -= 1

    monkeypatch.setattr(loop, "apply_mg_noise", spy_apply)  # the one place a mask is applied
    monkeypatch.setattr(results, "predict_logits", spy_predict)  # the one inference path
    extra = {"dp": True, "noise_multiplier": 1.0} if dp else {}
    cfg = tiny(kappa=0.37, part_size=60, batch_size=20, epochs=3, **extra)
    result = train_model(cfg, digits, stack=stack)
    assert len(calls) == 3 * 3                       # epochs * batches per epoch (1/q for DP)
    assert {k for k, _ in calls} == {0.37}
    if not dp:
        # the shuffled batches of one epoch are exactly the normalised members, once each
        rd = role_data(cfg, digits, torch.device("cpu"))
        epoch1 = torch.cat([x for _, x in calls[:3]])
        np.testing.assert_allclose(_rows(epoch1), _rows(rd.x_in), rtol=1e-6)
    n_train_calls = len(calls)
    x = role_data(cfg, digits, torch.device("cpu"), normaliser=result.normaliser).x_out
    a, b = predict_logits(result.model, x), predict_logits(result.model, x)
    assert torch.equal(a, b)                         # deterministic: no mask at evaluation
    assert len(calls) == n_train_calls


def test_reported_accuracy_is_on_clean_inputs(trained_mg, digits):
    """The saved metrics of a kappa = 1 model equal accuracies recomputed on clean inputs
    with the saved and re-loaded model; masked inputs would give other numbers."""
    ws, cfg, run = trained_mg
    loaded = ws.load_model(run.name, digits.input_shape, digits.num_classes)
    rd = role_data(cfg, digits, torch.device("cpu"), normaliser=loaded.normaliser)
    for x, y, key in ((rd.x_out, rd.y_out, "test_accuracy"), (rd.x_in, rd.y_in, "train_accuracy")):
        logits = predict_logits(loaded.model, x)
        acc = float((logits.argmax(1) == y).float().mean())
        assert acc == run.metrics[key]
    loss = float(torch.nn.functional.cross_entropy(predict_logits(loaded.model, rd.x_out), rd.y_out))
    assert loss == pytest.approx(run.metrics["test_loss"], rel=1e-6)
    # sanity: the model learned something despite kappa = 1, and masks would change the loss
    assert run.metrics["test_accuracy"] > 0.3
    masked = predict_logits(loaded.model, apply_mg_noise(rd.x_out, 1.0, generator(0)))
    masked_loss = float(torch.nn.functional.cross_entropy(masked, rd.y_out))
    assert abs(masked_loss - loss) > 1e-3
