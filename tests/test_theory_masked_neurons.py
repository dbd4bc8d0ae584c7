"""Training with randomly masked neurons (docs/methods/c-masked-neurons.md C): the vectorised rounds against slow
per-neuron references, and the paper's claims on small instances."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privaudit.theorems.masked_neurons import (
    cell_rng,
    final_error,
    masked_neurons_experiment,
    masked_round,
    masked_training,
    sample_masks,
)
from privaudit.theorems.twolayer import make_problem


def _slow_masked_loss_gradient(W, a, X, y, keep):
    """∇_W ½‖y − f_keep(W, X)‖², f_keep = (1/√m) Σ_{r kept} a_r ReLU(w_rᵀx), one neuron and one sample at a time."""
    m = len(a)
    out = np.zeros(len(y))
    for i in range(len(y)):
        out[i] = sum(a[r] * max(W[r] @ X[i], 0.0) for r in range(m) if keep[r]) / math.sqrt(m)
    grad = np.zeros_like(W)
    for r in range(m):
        if keep[r]:
            for i in range(len(y)):
                if W[r] @ X[i] > 0:
                    grad[r] += (out[i] - y[i]) * a[r] / math.sqrt(m) * X[i]
    return grad


def _slow_round(W, a, X, y, masks, tau, lr):
    """Each subnetwork from W, τ steps; each neuron averages the updates of the subnetworks holding it."""
    updates = {r: [] for r in range(len(a))}
    for keep in masks:
        V = W.copy()
        for _ in range(tau):
            V = V - lr * _slow_masked_loss_gradient(V, a, X, y, keep)
        for r in np.flatnonzero(keep):
            updates[r].append(V[r] - W[r])
    out = W.copy()
    for r, ups in updates.items():
        if ups:
            out[r] = W[r] + np.mean(ups, axis=0)
    return out


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: these small batched steps gain nothing from more, and on a busy machine
    OpenMP threads contending for the cores slow them a hundredfold."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def tiny():
    return make_problem(8, 4, 12, seed=7)


def test_p1_tau1_bernoulli_is_dropout_training(tiny):
    """Dropout: each step one Bernoulli(ξ) mask over neurons, a GD step on the masked (unscaled) loss."""
    xi, lr, rounds = 0.5, 0.3, 15
    ours = masked_training(tiny, kind="bernoulli", p=1, local_steps=1, xi=xi, lr=lr, rounds=rounds,
                           rng=np.random.default_rng(3))
    rng = np.random.default_rng(3)
    W = tiny.W0.copy()
    errors = [float(np.sum((tiny.y - xi * np.maximum(tiny.X @ W.T, 0) @ tiny.a / math.sqrt(12)) ** 2))]
    for _ in range(rounds):
        keep = rng.random(12) < xi
        W = W - lr * _slow_masked_loss_gradient(W, tiny.a, tiny.X, tiny.y, keep)
        errors.append(float(np.sum((tiny.y - xi * np.maximum(tiny.X @ W.T, 0) @ tiny.a / math.sqrt(12)) ** 2)))
    assert np.allclose(ours, errors, rtol=1e-10)
    assert ours[-1] < 0.5 * ours[0]


@pytest.mark.parametrize("kind,p,tau", [("bernoulli", 3, 1), ("bernoulli", 3, 2), ("categorical", 3, 3)])
def test_round_matches_the_per_neuron_reference(tiny, kind, p, tau):
    masks = sample_masks(kind, p, 12, 0.4, np.random.default_rng(11))
    fast = masked_round(tiny.W0, tiny.a, tiny.X, tiny.y, masks, tau, 0.2)
    slow = _slow_round(tiny.W0, tiny.a, tiny.X, tiny.y, masks, tau, 0.2)
    assert np.allclose(fast, slow, atol=1e-12)
    untouched = ~masks.any(axis=0)
    assert np.array_equal(fast[untouched], tiny.W0[untouched])


def test_masks():
    rng = np.random.default_rng(0)
    cat = sample_masks("categorical", 4, 1000, 0.0, rng)
    assert np.array_equal(cat.sum(axis=0), np.ones(1000))             # every neuron in exactly one subnetwork
    bern = sample_masks("bernoulli", 5, 20_000, 0.3, rng)
    assert bern.mean() == pytest.approx(0.3, abs=0.005)
    with pytest.raises(ValueError):
        sample_masks("dirichlet", 2, 10, 0.5, rng)


def _floor(problem, seed, kind, p, tau, xi, lr, rounds):
    errors = masked_training(problem, kind=kind, p=p, local_steps=tau, xi=xi, lr=lr, rounds=rounds,
                             rng=cell_rng(seed, kind, p, tau, xi))
    return final_error(errors, rounds // 5)


def test_bernoulli_error_decreases_with_the_number_of_subnetworks():
    """θ = 1 − (1 − ξ)^p grows with p: a lower floor at fixed ξ (multi-sample dropout beats dropout)."""
    ps = (1, 2, 4, 8)
    floors = np.array([[_floor(make_problem(30, 16, 400, labels="gaussian", seed=s), s, "bernoulli", p, 1, 0.5,
                               0.3, 200) for p in ps] for s in range(3)])
    assert np.all(np.diff(floors.mean(axis=0)) < 0)
    assert np.all(floors[:, -1] < 0.5 * floors[:, 0])


@pytest.mark.slow
def test_categorical_error_grows_with_local_steps():
    """IST with every setting converged (p = 2, d > n as in the paper's data): more local steps, higher floor."""
    taus = (1, 4, 8)
    floors = np.array([[_floor(make_problem(20, 64, 400, labels="gaussian", seed=s), s, "categorical", 2, t, 0.5,
                               0.3, 400) for t in taus] for s in range(3)])
    mean = floors.mean(axis=0)
    assert np.all(np.diff(mean) > 0)
    assert mean[-1] > 1.2 * mean[0]


def test_cells_do_not_depend_on_the_rest_of_the_grid():
    problem = make_problem(10, 6, 40, seed=0)
    a = masked_neurons_experiment(problem, lr=0.2, rounds=12, bernoulli_ps=(2,), xis=(0.5,), categorical_ps=(2,),
                                  steps=(2,), special_cases=())
    b = masked_neurons_experiment(problem, lr=0.2, rounds=12, bernoulli_ps=(1, 2), xis=(0.5, 0.75),
                                  categorical_ps=(2, 4), steps=(1, 2), special_cases=())
    pick = b.bernoulli[(b.bernoulli["p"] == 2) & (b.bernoulli["xi"] == 0.5)]["final_error"].iloc[0]
    assert pick == a.bernoulli["final_error"].iloc[0]
    pick = b.categorical[(b.categorical["p"] == 2) & (b.categorical["local_steps"] == 2)]["final_error"].iloc[0]
    assert pick == a.categorical["final_error"].iloc[0]
