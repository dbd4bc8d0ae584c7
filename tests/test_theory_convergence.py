"""Figure 3(a) and 3(b) of docs/methods/a-mg-noise.md A.2: masked GD converges at plain GD's early rate to a
floor that grows with κ; FedAvg with one local step is centralised masked GD."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.theorems.convergence import convergence_experiment, floor_of, loglog_slope, masked_gd
from privaudit.theorems.federated import federated_gd, shards
from privaudit.theorems.twolayer import make_problem


@pytest.fixture(scope="module")
def figure3a():
    problem = make_problem(500, 20, 100, seed=0)
    return convergence_experiment(problem, kappas=(0.0, 0.4, 0.6, 1.0, 2.0), lr=0.005, iterations=2000, seed=0)


@pytest.mark.slow
def test_floors_increase_with_kappa(figure3a):
    s = figure3a.summary.set_index("kappa")
    floors = s["floor"].to_numpy()
    assert np.all(np.diff(floors) > 0)
    assert s.loc[0.0, "floor"] < 0.5 * s.loc[0.4, "floor"]
    assert s.loc[[0.6, 1.0, 2.0], "plateaued"].all()
    # floor ∝ κ² in the middle of the grid (it saturates near the initial loss at κ = 2)
    ratio = s.loc[1.0, "floor"] / s.loc[0.6, "floor"]
    assert 0.7 * (1.0 / 0.6) ** 2 < ratio < 1.5 * (1.0 / 0.6) ** 2
    assert 1.0 < figure3a.slope < 3.0


@pytest.mark.slow
def test_plain_gd_keeps_decreasing(figure3a):
    plain = figure3a.curves[figure3a.curves["kappa"] == 0]["clean_loss"].to_numpy()
    assert not bool(figure3a.summary.set_index("kappa").loc[0.0, "plateaued"])
    assert np.all(np.diff(plain[1000:]) < 0)                   # still falling, monotonically
    assert plain[-1] < 0.8 * plain[1500]


@pytest.mark.slow
def test_early_rate_does_not_depend_on_kappa(figure3a):
    rates = figure3a.summary.set_index("kappa")["early_rate"]
    assert rates.loc[0.0] > 0.03                                 # real progress: L₂₀ < 0.55 L₀
    for kappa in (0.4, 0.6, 1.0):
        assert rates.loc[kappa] == pytest.approx(rates.loc[0.0], rel=0.1)


@pytest.mark.slow
def test_output_variance_is_what_holds_the_floor_up(figure3a):
    s = figure3a.summary.set_index("kappa")
    for kappa in (0.6, 1.0):
        assert s.loc[kappa, "masked_loss"] == pytest.approx(
            s.loc[kappa, "smoothed_loss"] + s.loc[kappa, "output_variance"], rel=0.03)
    assert s.loc[0.0, "output_variance"] == 0.0
    assert s.loc[0.6, "output_variance"] < s.loc[1.0, "output_variance"]


def test_same_seed_same_numbers():
    problem = make_problem(40, 6, 20, seed=2)
    a, _ = masked_gd(problem, 0.5, 0.05, 30, np.random.default_rng(9))
    b, _ = masked_gd(problem, 0.5, 0.05, 30, np.random.default_rng(9))
    c, _ = masked_gd(problem, 0.5, 0.05, 30, np.random.default_rng(10))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_floor_and_slope_helpers():
    flat = np.r_[np.linspace(10, 1, 50), np.ones(40)]
    assert floor_of(flat, 20, 0.05) == (1.0, True)
    falling = np.geomspace(10, 0.1, 90)
    assert floor_of(falling, 20, 0.05)[1] is False
    kappas = np.array([0.2, 0.4, 0.8])
    slope, intercept = loglog_slope(kappas, 3.0 * kappas ** 2)
    assert slope == pytest.approx(2.0) and np.exp(intercept) == pytest.approx(3.0)
    assert np.isnan(loglog_slope(kappas[:1], kappas[:1])[0])


def test_fedavg_with_one_local_step_is_centralised_masked_gd():
    problem = make_problem(60, 8, 30, seed=1)
    central, _ = masked_gd(problem, 0.3, 0.01, 25, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    rng_shards = np.random.default_rng(5)
    shards(60, 4, rng_shards)                  # federated_gd draws its shards first, then the masks
    centralised_after_shards, _ = masked_gd(problem, 0.3, 0.01, 25, rng_shards)
    fed = federated_gd(problem, kappa=0.3, local_steps=1, workers=4, rounds=25, lr=0.01, rng=rng)
    assert np.allclose(fed, centralised_after_shards, rtol=1e-10)
    assert not np.allclose(fed, central, rtol=1e-6)           # a different mask stream really differs


def test_fedavg_local_steps_and_masks():
    problem = make_problem(100, 10, 50, seed=3)
    runs = {(tau, kappa): federated_gd(problem, kappa=kappa, local_steps=tau, workers=5, rounds=150, lr=0.05,
                                       rng=np.random.default_rng(0))
            for tau in (1, 5) for kappa in (0.0, 1.0)}
    # more local steps per round: more progress per round
    assert runs[(5, 0.0)][20] < runs[(1, 0.0)][20]
    # the mask raises the loss reached, whatever τ; more local steps lower it less under the mask
    for tau in (1, 5):
        assert runs[(tau, 1.0)][-10:].mean() > 5 * runs[(tau, 0.0)][-10:].mean()
    assert runs[(5, 1.0)][-10:].mean() > 0.7 * runs[(1, 1.0)][-10:].mean()


def test_shards_are_disjoint_and_cover():
    parts = shards(23, 4, np.random.default_rng(0))
    joined = np.sort(np.concatenate(parts))
    assert np.array_equal(joined, np.arange(23)) and {len(p) for p in parts} <= {5, 6}
    with pytest.raises(ValueError):
        shards(3, 4, np.random.default_rng(0))
