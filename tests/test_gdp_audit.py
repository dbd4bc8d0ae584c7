"""ε from the whole trade-off curve (privaudit/analysis/gdp.py, docs/methods/d-attacks.md D.6).

Simulated μ-GDP data: member scores N(μ, 1), non-member scores N(0, 1) (−loss with member
losses N(0, 1) and non-member losses N(μ, 1)): every threshold test on them has the trade-off
curve f_μ exactly, so the true μ is known. The one-run tests use the Gaussian mechanism that
releases μ·S_j + N(0, 1) for every canary j, which is exactly μ-GDP in each canary.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import beta, binom, norm

from privaudit.analysis import empirical, hidden_state
from privaudit.analysis.empirical import (
    _epsilon_from_counts,
    best_threshold,
    epsilon_lower_bound,
    epsilon_lower_bound_bonferroni,
    one_run_epsilon_lower_bound,
)
from privaudit.analysis.gdp import (
    BONFERRONI_CANDIDATES,
    bonferroni_thresholds,
    fdp_one_run_epsilon_lower_bound,
    fdp_one_run_mu_lower_bound,
    fdp_one_run_p_value,
    gdp_delta,
    gdp_epsilon,
    gdp_lower_bound,
    gdp_lower_bound_bonferroni,
    gdp_mu_for_epsilon,
    mu_from_counts,
)

N_SIDE = 5_000            # members and non-members per simulated set
LABELS = np.repeat([1, 0], N_SIDE)


def gdp_scores(rng, mu, size=2 * N_SIDE):
    labels = np.repeat([1, 0], size // 2)
    return labels, rng.normal(size=size) + mu * labels


# ---------------------------------------------------------------- μ ↔ (ε, δ)


def test_gdp_conversion_against_closed_forms():
    """δ(0) = 2Φ(μ/2) − 1 in closed form; δ(ε) as written with Φ; ε(μ, δ) and μ(ε, δ) invert it."""
    for mu in (0.1, 0.5, 1.0, 2.0, 5.0):
        assert gdp_delta(0.0, mu) == pytest.approx(2 * norm.cdf(mu / 2) - 1, rel=1e-12)
        for eps in (0.3, 1.0, 4.0):
            naive = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
            assert gdp_delta(eps, mu) == pytest.approx(naive, rel=1e-9, abs=1e-15)
        for delta in (1e-8, 1e-5, 1e-2):
            eps = gdp_epsilon(mu, delta)
            assert gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-6)
            if eps > 0:
                assert gdp_mu_for_epsilon(eps, delta) == pytest.approx(mu, rel=1e-8)
    # δ(0) = 2Φ(μ/2) − 1 at μ = 2Φ⁻¹((1 + δ)/2): ε = 0 exactly at and below it
    mu0 = 2 * norm.ppf((1 + 1e-2) / 2)
    assert gdp_epsilon(mu0 * 0.999, 1e-2) == 0.0 and gdp_epsilon(mu0 * 1.01, 1e-2) > 0
    assert gdp_epsilon(0.0, 1e-5) == 0.0 and gdp_delta(1.0, 0.0) == 0.0


def test_gdp_conversion_over_arrays_and_from_hidden_state():
    mus = np.array([[0.2, 1.0], [0.0, 3.0]])
    eps = gdp_epsilon(mus, 1e-5)
    assert eps.shape == (2, 2) and eps.dtype == np.float64
    assert [gdp_epsilon(float(m), 1e-5) for m in mus.ravel()] == list(eps.ravel())
    deltas = gdp_delta(np.array([0.5, 1.0, 2.0]), 1.5)
    assert deltas.shape == (3,) and deltas[1] == gdp_delta(1.0, 1.5)
    # the formulas moved; hidden_state's callers keep importing them from there
    assert hidden_state.gdp_epsilon is gdp_epsilon and hidden_state.gdp_delta is gdp_delta
    assert hidden_state.gdp_mu_for_epsilon is gdp_mu_for_epsilon


# ---------------------------------------------------------------- μ from counts


def _slow_mu(fp, n_neg, fn, n_pos, confidence):
    level = 1 - (1 - confidence) / 2
    fpr_hi = 1.0 if fp == n_neg else beta.ppf(level, fp + 1, n_neg - fp)
    fnr_hi = 1.0 if fn == n_pos else beta.ppf(level, fn + 1, n_pos - fn)
    return max(norm.ppf(1 - fpr_hi) - norm.ppf(fnr_hi), 0.0)


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.999])
def test_mu_from_counts_against_a_scalar_reference(confidence):
    rng = np.random.default_rng(1)
    # array n (the betaincinv path)
    n_neg, n_pos = rng.integers(1, 400, 60), rng.integers(1, 400, 60)
    fp, fn = rng.integers(0, n_neg + 1), rng.integers(0, n_pos + 1)
    fp[:5], fn[5:10], fp[10:12], fn[10:12] = 0, 0, n_neg[10:12], n_pos[10:12]
    got = mu_from_counts(fp, n_neg, fn, n_pos, confidence)
    want = [_slow_mu(*c, confidence) for c in zip(fp, n_neg, fn, n_pos)]
    assert got.shape == (60,) and np.allclose(got, want, rtol=1e-9, atol=1e-12)
    # one n for every count (the cached table path of _cp_upper), and a scalar call
    k = np.arange(0, 201, 5)
    got = mu_from_counts(k, 200, k[::-1], 200, confidence)
    assert np.allclose(got, [_slow_mu(a, 200, b, 200, confidence) for a, b in zip(k, k[::-1])], rtol=1e-9, atol=1e-12)
    assert isinstance(mu_from_counts(3, 100, 40, 100, confidence), float)
    assert mu_from_counts(3, 100, 40, 100, confidence) == pytest.approx(_slow_mu(3, 100, 40, 100, confidence), rel=1e-9)


def test_mu_from_counts_is_never_nan_and_falls_with_errors():
    assert mu_from_counts(10, 10, 10, 10) == 0.0 and mu_from_counts(10, 10, 0, 10) == 0.0
    assert mu_from_counts(0, 1, 0, 1) == 0.0
    mu = mu_from_counts(np.arange(0, 101), 100, 0, 100)
    assert not np.any(np.isnan(mu)) and np.all(np.diff(mu) <= 0) and mu[0] > 0
    assert mu_from_counts(0, 10**6, 0, 10**6) == pytest.approx(-2 * norm.ppf(1 - 0.025 ** 1e-6), rel=1e-6)


# ---------------------------------------------------------------- coverage on simulated μ-GDP data


@pytest.mark.parametrize("mu", [1.0, 2.0])
@pytest.mark.slow
def test_coverage_of_both_strategies_on_simulated_gdp_data(mu):
    """400 seeded sets of 5,000 + 5,000 samples; the calibration strategy gets its own,
    independent calibration set per replicate. The 95 % lower bound on μ must lie below the
    true μ in ≥ 95 % of sets and above 0.8·μ in more than half. Measured (seeds 20241 and
    20242, δ = 1e-5; run with -s to print them):

        μ = 1: calibration covers 99.5 %, > 0.8μ in 89.0 % (mean μ_lo 0.886);
               Bonferroni (T = 100) covers 100 %, > 0.8μ in 100 % (mean 0.892)
        μ = 2: calibration covers 99.75 %, > 0.8μ in 99.5 % (mean 1.870);
               Bonferroni covers 100 %, > 0.8μ in 100 % (mean 1.875)

    Both are conservative (Clopper–Pearson and the union bound), so ≥ 95 % is asserted as it
    stands despite 400 sets' sampling noise (±1.1 % at 95 %). Calibrating on a second set
    often picks a tail threshold that its noise favoured, where the evaluated bound is more
    variable: hence its lower > 0.8μ rate at μ = 1.
    """
    rng = np.random.default_rng(20240 + int(mu))
    cal, bon = [], []
    for _ in range(400):
        scores = rng.normal(size=2 * N_SIDE) + mu * LABELS
        calib = rng.normal(size=2 * N_SIDE) + mu * LABELS
        cal.append(gdp_lower_bound(LABELS, scores, LABELS, calib, delta=1e-5).mu)
        bon.append(gdp_lower_bound_bonferroni(LABELS, scores, delta=1e-5).mu)
    rates = {name: (float(np.mean(np.array(b) <= mu)), float(np.mean(np.array(b) > 0.8 * mu)),
                    round(float(np.mean(b)), 3)) for name, b in (("calibration", cal), ("bonferroni", bon))}
    print(f"mu = {mu}: (coverage, > 0.8 mu, mean) = {rates}")
    for name, (cover, strong, _) in rates.items():
        assert cover >= 0.95, (name, cover)
        assert strong > 0.5, (name, strong)


def test_result_fields_and_json():
    rng = np.random.default_rng(3)
    labels, scores = gdp_scores(rng, 1.5, 4000)
    c_labels, c_scores = gdp_scores(rng, 1.5, 4000)
    cal = gdp_lower_bound(labels, scores, c_labels, c_scores, delta=1e-5)
    bon = gdp_lower_bound_bonferroni(labels, scores, delta=1e-5, candidates=20)
    assert (cal.strategy, cal.candidates, cal.confidence, cal.delta) == ("calibration", 1, 0.95, 1e-5)
    assert bon.strategy == "bonferroni" and 1 < bon.candidates <= 20
    for b in (cal, bon):
        doc = json.loads(json.dumps(b.to_dict(), allow_nan=False))
        assert set(doc) == {"mu", "epsilon", "delta", "threshold", "strategy", "candidates", "fpr", "fnr",
                            "confidence"}
        pred = scores >= b.threshold
        assert b.fpr == np.mean(pred[labels == 0]) and b.fnr == np.mean(~pred[labels == 1])
        assert b.epsilon == gdp_epsilon(b.mu, 1e-5) and 0 < b.mu < 1.5
    # the calibration bound is formula (2) at its threshold on the evaluated data, full confidence
    fp, fn = int(np.sum(scores[labels == 0] >= cal.threshold)), int(np.sum(scores[labels == 1] < cal.threshold))
    assert cal.mu == mu_from_counts(fp, 2000, fn, 2000, 0.95)
    # Bonferroni: the maximum over the label-free grid at 1 − 0.05/T
    cand = bonferroni_thresholds(scores, 20)
    fps = [int(np.sum(scores[labels == 0] >= t)) for t in cand]
    fns = [int(np.sum(scores[labels == 1] < t)) for t in cand]
    assert bon.mu == pytest.approx(max(mu_from_counts(np.array(fps), 2000, np.array(fns), 2000,
                                                      1 - 0.05 / cand.size)), rel=1e-12)
    assert BONFERRONI_CANDIDATES == 100


def test_bonferroni_grid_ignores_the_labels():
    rng = np.random.default_rng(4)
    labels, scores = gdp_scores(rng, 1.0, 2000)
    grid = bonferroni_thresholds(scores)
    # 100 probit-spaced levels from 5/N to 1 - 5/N; neighbouring tail levels can share an order statistic
    assert 90 <= grid.size <= 100 and np.all(np.diff(grid) > 0)
    assert grid[0] == np.sort(scores)[4] and grid[-1] == np.sort(scores)[-6]  # about 5 samples beyond each end
    assert np.array_equal(grid, bonferroni_thresholds(rng.permutation(scores)))  # the pooled scores only
    a = gdp_lower_bound_bonferroni(labels, scores, delta=1e-5)
    assert a.threshold in grid and a.candidates == grid.size
    # ties collapse, and the confidence is split over the distinct candidates only
    tied = gdp_lower_bound_bonferroni(labels, np.round(scores), delta=1e-5)
    assert tied.candidates == bonferroni_thresholds(np.round(scores)).size <= np.unique(np.round(scores)).size < 10


def test_epsilon_bonferroni_on_the_same_candidates():
    """The Clopper–Pearson ε counterpart (empirical.epsilon_lower_bound_bonferroni): the same
    label-free candidates as the μ bound, each candidate's epsilon_lower_bound at confidence
    1 − 0.05/T, the largest (ties to the largest threshold) returned with its rates; never
    above the GDP ε of the same candidates (same counts, module docstring)."""
    rng = np.random.default_rng(5)
    labels, scores = gdp_scores(rng, 1.5, 4000)
    eps = epsilon_lower_bound_bonferroni(labels, scores, delta=1e-5, candidates=20)
    gdp = gdp_lower_bound_bonferroni(labels, scores, delta=1e-5, candidates=20)
    cand = bonferroni_thresholds(scores, 20)
    each = [epsilon_lower_bound(labels, scores, t, delta=1e-5, confidence=1 - 0.05 / cand.size) for t in cand]
    assert eps.candidates == gdp.candidates == cand.size and eps.threshold in cand
    assert eps.epsilon == pytest.approx(max(each), rel=1e-12) and eps.threshold == cand[np.argmax(each)]
    pred = scores >= eps.threshold
    assert eps.fpr == np.mean(pred[labels == 0]) and eps.fnr == np.mean(~pred[labels == 1])
    assert (eps.delta, eps.confidence) == (1e-5, 0.95) and 0 < eps.epsilon <= gdp.epsilon
    # the grid is shared, not copied: gdp re-exports empirical's
    assert bonferroni_thresholds is empirical.bonferroni_thresholds
    assert BONFERRONI_CANDIDATES == empirical.BONFERRONI_CANDIDATES
    # perfectly separated: the ε of zero errors at 1 − 0.05/T/2 per rate
    sep = epsilon_lower_bound_bonferroni(np.repeat([1, 0], 50), np.repeat([1.0, 0.0], 50), delta=0.0)
    hi = 1 - (0.05 / 2 / 2) ** (1 / 50)
    assert sep.candidates == 2 and sep.epsilon == pytest.approx(np.log((1 - hi) / hi), rel=1e-9)


# ---------------------------------------------------------------- against the (ε, δ) bound


@pytest.mark.parametrize("delta", [1e-5, 1e-2, 0.3])
def test_gdp_epsilon_never_below_the_clopper_pearson_bound_on_the_same_counts(delta):
    """Module docstring: the point (FPR_hi, FNR_hi) lies on f_{μ_lo}, which lies above the
    (ε(μ_lo, δ), δ) region's boundary, so on the same counts ε_lo ≥ the (ε, δ) bound, tiny
    counts and large δ included."""
    for n in (3, 40, 2_000):
        k = np.unique(np.linspace(0, n, 41).round())
        fp, fn = (a.ravel() for a in np.meshgrid(k, k))
        mu = mu_from_counts(fp, n, fn, n)
        gdp = gdp_epsilon(mu, delta)
        cp = _epsilon_from_counts(fp, n, fn, n, delta, 0.95)
        assert np.all(gdp >= cp - 1e-9), (n, np.max(cp - gdp))


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0, 3.0])
def test_gdp_bound_beats_the_clopper_pearson_bound_at_its_best_threshold(mu):
    """On simulated GDP data, the (ε, δ) bound at the threshold best_threshold picks on
    calibration data, against ε of the GDP estimate at that same threshold and with its own
    calibrated threshold: the GDP ε is the larger (by a wide margin: the (ε, δ) bound uses one
    point of the curve as if the curve were the (ε, δ) polygon)."""
    rng = np.random.default_rng(7)
    labels, scores = gdp_scores(rng, mu, 20_000)
    c_labels, c_scores = gdp_scores(rng, mu, 20_000)
    t = best_threshold(c_labels, c_scores, delta=1e-5)
    cp = epsilon_lower_bound(labels, scores, t, delta=1e-5)
    fp, fn = int(np.sum(scores[labels == 0] >= t)), int(np.sum(scores[labels == 1] < t))
    same_t = gdp_epsilon(mu_from_counts(fp, 10_000, fn, 10_000), 1e-5)
    own = gdp_lower_bound(labels, scores, c_labels, c_scores, delta=1e-5)
    assert same_t >= cp and own.epsilon >= cp and own.epsilon <= gdp_epsilon(mu, 1e-5)
    assert own.epsilon > 1.5 * cp


# ---------------------------------------------------------------- the f-DP one-run audit


def test_fdp_p_value_is_monotone_in_mu_and_the_bound_in_the_counts():
    p = [fdp_one_run_p_value(100, 80, 1000, mu) for mu in np.linspace(0, 3, 31)]
    assert all(a <= b for a, b in zip(p, p[1:])) and p[0] < 0.05 < p[-1] <= 1.0
    bounds = [fdp_one_run_mu_lower_bound(200, v, 1000) for v in range(100, 201, 10)]
    assert all(a <= b for a, b in zip(bounds, bounds[1:])) and bounds[0] == 0.0 and bounds[-1] > 1.0
    assert fdp_one_run_mu_lower_bound(200, 170, 1000, confidence=0.99) < fdp_one_run_mu_lower_bound(200, 170, 1000)
    # the bound is where the test's p-value crosses 1 − confidence
    mu = fdp_one_run_mu_lower_bound(100, 80, 1000)
    assert fdp_one_run_p_value(100, 80, 1000, mu * 0.999) < 0.05 < fdp_one_run_p_value(100, 80, 1000, mu * 1.001)


def test_fdp_rejects_nothing_without_evidence():
    assert fdp_one_run_mu_lower_bound(0, 0, 10) == 0.0
    assert fdp_one_run_mu_lower_bound(100, 50, 1000) == 0.0
    assert fdp_one_run_mu_lower_bound(100, 20, 1000) == 0.0
    assert fdp_one_run_p_value(100, 0, 1000, 1.0) == 1.0
    assert fdp_one_run_epsilon_lower_bound(100, 55, 1000, delta=1e-5) == 0.0


def _relaxed_maximum(r, v, m, mu, grid=150):
    """max P[W ≥ v] over every distribution of W on a 1/grid lattice meeting the f_μ-DP
    constraints (3) of the module docstring: ψ(X_i) ≤ Y_{i−1}, i = 1..r (brute force)."""
    bars = np.array(list(itertools.combinations(range(grid + r), r)))
    bars = np.concatenate([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), grid + r)], axis=1)
    p = (np.diff(bars, axis=1) - 1) / grid
    k = np.arange(r + 1)
    x = np.cumsum((p * k)[:, ::-1], axis=1)[:, ::-1] / m
    y = np.cumsum((p * (r - k))[:, ::-1], axis=1)[:, ::-1] / m
    feasible = np.all(norm.cdf(norm.ppf(np.minimum(x[:, 1:], 1.0)) - mu) <= y[:, :-1] + 1e-12, axis=1)
    return p[feasible][:, v:].sum(axis=1).max()


@pytest.mark.parametrize("r, v, m, mu", [(3, 3, 3, 1.0), (3, 2, 6, 0.5), (3, 3, 6, 0.0), (3, 3, 12, 2.0)])
@pytest.mark.slow
def test_fdp_p_value_is_the_exact_maximum_under_the_constraints(r, v, m, mu):
    """The recursion's p-value is the maximum of P[W ≥ v] over constraints (3): never below
    the brute-force lattice maximum, and within the lattice's resolution above it."""
    exact = fdp_one_run_p_value(r, v, m, mu)
    brute = _relaxed_maximum(r, v, m, mu)
    assert brute <= exact + 1e-9
    assert exact - brute < 0.02


def test_fdp_p_value_bounds_the_gaussian_mechanism_and_chance():
    """Monte Carlo: the Gaussian mechanism is μ-GDP in each canary, so its P[W ≥ v] (top k
    guessed IN, bottom k OUT) must not exceed the p-value; at μ = 0 (no information) W is
    Binomial(r, ½), which the p-value must not undercut either."""
    rng = np.random.default_rng(11)
    for m, k, mu, sims in ((200, 20, 1.0, 4000), (1000, 50, 2.0, 1500)):
        s = rng.random((sims, m)) < 0.5
        order = np.argsort(mu * s + rng.normal(size=(sims, m)), axis=1)
        w = (np.take_along_axis(s, order[:, m - k:], 1).sum(1) + (~np.take_along_axis(s, order[:, :k], 1)).sum(1))
        for v in np.unique(np.quantile(w, [0.5, 0.9, 0.99]).astype(int)):
            freq = np.mean(w >= v)
            assert freq <= fdp_one_run_p_value(2 * k, int(v), m, mu) + 3 * math.sqrt(freq * (1 - freq) / sims) + 1e-3
    # all 100 guesses right with μ = 2: P ≈ 0.60 measured, the bound 0.655: close to tight
    assert fdp_one_run_p_value(100, 100, 1000, 2.0) == pytest.approx(0.655, abs=0.005)
    for r, v in ((10, 8), (20, 15), (50, 30), (100, 62)):
        assert fdp_one_run_p_value(r, v, 1000, 0.0) >= binom.sf(v - 1, r, 0.5) - 1e-12


# (r, v) -> (f-DP ε, Steinke et al.'s ε) at m = 1000, δ = 1e-5, 95 %: pinned in gdp.py's docstring
STEINKE_FIGURES = {(100, 70): (0.653, 0.469), (100, 95): (3.323, 2.165), (500, 350): (1.194, 0.683),
                   (500, 475): (4.569, 2.598)}


def test_fdp_epsilon_is_at_least_steinkes_where_the_paper_claims_it():
    for r in (100, 200, 300, 500):
        for frac in (0.7, 0.8, 0.9, 0.95):
            v = round(frac * r)
            fdp = fdp_one_run_epsilon_lower_bound(r, v, 1000, delta=1e-5)
            steinke = one_run_epsilon_lower_bound(r, v, 1000, delta=1e-5)
            assert fdp >= steinke > 0, (r, v, fdp, steinke)
    for (r, v), (fdp, steinke) in STEINKE_FIGURES.items():
        assert fdp_one_run_epsilon_lower_bound(r, v, 1000, delta=1e-5) == pytest.approx(fdp, abs=2e-3)
        assert one_run_epsilon_lower_bound(r, v, 1000, delta=1e-5) == pytest.approx(steinke, abs=2e-3)
    # δ = 1e-3: Steinke's δ term 2mδ = 2 swamps its tail; the f-DP bound still rejects
    assert one_run_epsilon_lower_bound(100, 80, 1000, delta=1e-3) == 0.0
    assert fdp_one_run_epsilon_lower_bound(100, 80, 1000, delta=1e-3) > 0.9


def test_fdp_epsilon_below_steinkes_just_above_chance():
    """The documented exception: a few correct guesses beyond chance, small r. At μ = 0 the
    constraints (3) allow a larger tail than Binomial(r, ½) (they forget that the canaries are
    independent), so the f-DP test has less power at the edge of rejection."""
    fdp = fdp_one_run_epsilon_lower_bound(100, 60, 1000, delta=1e-5)
    steinke = one_run_epsilon_lower_bound(100, 60, 1000, delta=1e-5)
    assert fdp == pytest.approx(0.044, abs=2e-3) and steinke == pytest.approx(0.050, abs=2e-3) and fdp < steinke


# ---------------------------------------------------------------- bad input


def _one_line_error(fn, *args, match, **kwargs):
    with pytest.raises(ValueError, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_bad_input_names_what_is_missing():
    rng = np.random.default_rng(2)
    labels, scores = gdp_scores(rng, 1.0, 200)
    ones = np.ones(10, dtype=int)
    _one_line_error(gdp_lower_bound, ones, np.arange(10.0), labels, scores, delta=1e-5,
                    match="evaluated data have no non-members")
    _one_line_error(gdp_lower_bound, labels, scores, 0 * ones, np.arange(10.0), delta=1e-5,
                    match="calibration data have no members")
    _one_line_error(gdp_lower_bound, labels, scores, [], [], delta=1e-5, match="calibration data are empty")
    _one_line_error(gdp_lower_bound_bonferroni, [], [], delta=1e-5, match="evaluated data are empty")
    _one_line_error(gdp_lower_bound_bonferroni, labels, scores[:-1], delta=1e-5, match="evaluated data: .*shape")
    _one_line_error(gdp_lower_bound_bonferroni, labels, np.where(labels, np.nan, scores), delta=1e-5,
                    match="finite")
    _one_line_error(gdp_lower_bound_bonferroni, labels, scores, delta=0.0, match="delta must lie in")
    _one_line_error(gdp_lower_bound_bonferroni, labels, scores, delta=1e-5, candidates=0, match="candidates")
    _one_line_error(gdp_lower_bound, labels, scores, labels, scores, delta=1e-5, confidence=1.0, match="confidence")
    _one_line_error(mu_from_counts, 5, 4, 0, 4, match="counts")
    _one_line_error(mu_from_counts, 1, 4, 0, 0, match="counts")
    _one_line_error(fdp_one_run_mu_lower_bound, 10, 11, 100, match="num_correct <= num_guesses")
    _one_line_error(fdp_one_run_p_value, 10, 5, 100, -1.0, match="mu")
    _one_line_error(gdp_epsilon, -1.0, 1e-5, match="mu")
    _one_line_error(gdp_mu_for_epsilon, 0.0, 1e-5, match="epsilon")
    # one member and one non-member suffice; the bound is then 0, not NaN
    tiny = gdp_lower_bound_bonferroni([1, 0], [1.0, 0.0], delta=1e-5)
    assert tiny.mu == 0.0 and tiny.epsilon == 0.0
