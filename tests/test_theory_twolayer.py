"""The two-layer ReLU network of docs/methods/a-mg-noise.md A.2: gradient, NTK Gram matrix, smoothed network and
the masked-loss decomposition, each against an independent computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.theorems.smoothing import proxy_relu
from privaudit.theorems.twolayer import (
    gradient,
    least_eigenvalue,
    make_problem,
    mask_inputs,
    masked_loss_decomposition,
    ntk_gram,
    predict,
    smoothed_predict,
)


@pytest.fixture(scope="module")
def small():
    return make_problem(12, 5, 30, seed=4)


def test_inputs_are_unit_norm_and_labels_standardised(small):
    assert np.allclose(np.linalg.norm(small.X, axis=1), 1.0)
    assert small.y.mean() == pytest.approx(0.0, abs=1e-12) and small.y.std() == pytest.approx(1.0)
    assert set(np.unique(small.a)) == {-1.0, 1.0}
    assert set(np.unique(make_problem(12, 5, 30, labels="sign", seed=1).y)) <= {-1.0, 1.0}
    with pytest.raises(ValueError):
        make_problem(4, 3, 2, labels="nope")


def test_gradient_matches_finite_differences(small):
    W, a, X, y = small.W0, small.a, small.X, small.y

    def loss(V):
        r = predict(V, a, X) - y
        return 0.5 * r @ r

    g = gradient(W, a, X, y)
    rng = np.random.default_rng(0)
    for _ in range(5):
        D = rng.standard_normal(W.shape)
        h = 1e-6
        numeric = (loss(W + h * D) - loss(W - h * D)) / (2 * h)
        assert float((g * D).sum()) == pytest.approx(numeric, rel=1e-5)


def test_subnetwork_uses_the_full_width_scaling(small):
    keep = np.arange(10)
    out = predict(small.W0[keep], small.a[keep], small.X, m=30)
    ref = np.maximum(small.X @ small.W0[keep].T, 0) @ small.a[keep] / math.sqrt(30)
    assert np.allclose(out, ref)


def test_ntk_gram_matches_monte_carlo_over_weights(small):
    X = small.X[:4]
    W = np.random.default_rng(1).standard_normal((400_000, X.shape[1]))
    act = (X @ W.T >= 0).astype(float)
    mc = (X @ X.T) * (act @ act.T) / len(W)
    assert np.allclose(ntk_gram(X), mc, atol=4e-3)
    assert np.allclose(np.diag(ntk_gram(X)), 0.5)          # x·x (π − 0)/(2π)
    assert least_eigenvalue(small.X) > 0


def test_smoothed_network_is_the_mean_over_masks(small):
    W, a, X = small.W0, small.a, small.X
    rng = np.random.default_rng(2)
    draws = np.stack([predict(W, a, mask_inputs(X, 0.5, rng)) for _ in range(20_000)])
    se = draws.std(axis=0) / math.sqrt(len(draws))
    gap = np.abs(draws.mean(axis=0) - smoothed_predict(W, a, X, 0.5))
    assert np.all(gap < 4 * se)
    assert np.allclose(smoothed_predict(W, a, X, 0.0), predict(W, a, X))  # κ = 0: the network itself


def test_masked_loss_is_smoothed_loss_plus_output_variance(small):
    W, a, X, y = small.W0, small.a, small.X, small.y
    for kappa in (0.3, 1.0):
        parts = masked_loss_decomposition(W, a, X, y, kappa, 40_000, np.random.default_rng(3))
        assert parts.masked_loss == pytest.approx(parts.smoothed_loss + parts.output_variance,
                                                  abs=3 * parts.masked_loss_se)
        assert parts.output_variance > 10 * parts.masked_loss_se  # the regulariser is really there
        # the theorems' proxy drops s·φ(z/s): its loss does not close the identity
        z = X @ W.T
        s = kappa * np.sqrt((X * X) @ (W * W).T)
        proxy = proxy_relu(z, s) @ a / math.sqrt(len(a)) - y
        assert abs(parts.masked_loss - 0.5 * proxy @ proxy - parts.output_variance) > 5 * parts.masked_loss_se


def test_output_variance_grows_like_kappa_squared(small):
    W, a, X, y = small.W0, small.a, small.X, small.y
    for kappa in (0.01, 0.02):
        parts = masked_loss_decomposition(W, a, X, y, kappa, 20_000, np.random.default_rng(5))
        assert parts.output_variance == pytest.approx(parts.first_order, rel=0.05)
    assert masked_loss_decomposition(W, a, X, y, 0.0, 10, np.random.default_rng(0)).output_variance == 0.0
