"""Empirical ε lower bounds against mechanisms whose ε is known exactly.

Randomized response with ε = ln 3 (report the true bit with probability e^ε/(1 + e^ε) = 3/4)
is the tight case of ε-DP: its best test has FPR = FNR = 1/4, so ln((1 − FPR)/FNR) = ln 3.
The Gaussian mechanism with sensitivity/σ = μ is μ-GDP with the exact curve
δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong, Roth, Su 2022, Corollary 2.13).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import beta, binom, binomtest, norm

from privaudit.analysis.empirical import (
    best_threshold,
    clopper_pearson,
    epsilon_lower_bound,
    one_run_epsilon_lower_bound,
    one_run_guesses,
    one_run_p_value,
    tpr_at_fpr_with_ci,
)
from privaudit.analysis.metrics import tpr_at_fpr

LN3 = math.log(3.0)


def randomized_response(rng, n, eps, u=None):
    """n trials, half members: (labels, reported bit). ``u`` (n,) uniforms couple several ε."""
    labels = np.arange(n) % 2
    u = rng.random(n) if u is None else u
    truthful = u < math.exp(eps) / (1 + math.exp(eps))
    return labels, np.where(truthful, labels, 1 - labels).astype(float)


def gaussian_trials(rng, n, mu):
    labels = np.arange(n) % 2
    return labels, rng.normal(size=n) + mu * labels


def gdp_epsilon(mu, delta):
    """Exact ε(δ) of a μ-GDP mechanism (the root of δ(ε) = delta)."""
    def excess(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta
    return brentq(excess, 0.0, 100.0, xtol=1e-12)


# ---------------------------------------------------------------- Clopper–Pearson


def test_clopper_pearson_known_values():
    lo, hi = clopper_pearson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.3085, abs=1e-4)
    lo, hi = clopper_pearson(10, 10)
    assert lo == pytest.approx(0.6915, abs=1e-4) and hi == 1.0
    # k = 0: the upper bound solves (1 - p)^n = alpha / 2
    assert clopper_pearson(0, 25, 0.9)[1] == pytest.approx(1 - 0.05 ** (1 / 25), rel=1e-10)


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_clopper_pearson_matches_scipy_binomtest_vectorised(confidence):
    n = 20
    k = np.arange(n + 1)
    lo, hi = clopper_pearson(k, n, confidence)
    assert lo.shape == hi.shape == (n + 1,)
    for i in k:
        ci = binomtest(int(i), n).proportion_ci(confidence_level=confidence, method="exact")
        assert lo[i] == pytest.approx(ci.low, abs=1e-12) and hi[i] == pytest.approx(ci.high, abs=1e-12)
    assert np.all(np.diff(lo) > 0) and np.all(np.diff(hi) > 0)


def test_clopper_pearson_rejects_bad_counts():
    for k, n in ((11, 10), (-1, 10), (0, 0), (1.5, 10)):
        with pytest.raises(ValueError):
            clopper_pearson(k, n)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson(1, 10, confidence=1.0)


# ---------------------------------------------------------------- TPR at FPR with CI

HAND_SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.55, 0.4, 0.3, 0.2])
HAND_LABELS = np.array([1, 1, 0, 1, 0, 0, 1, 0])


def test_tpr_at_fpr_with_ci_hand_example():
    r = tpr_at_fpr_with_ci(HAND_LABELS, HAND_SCORES, 0.25)
    assert (r["tpr"], r["threshold"], r["fpr"]) == (0.75, 0.6, 0.25)
    assert (r["lo"], r["hi"]) == pytest.approx(clopper_pearson(3, 4))
    r = tpr_at_fpr_with_ci(HAND_LABELS, HAND_SCORES, 0.0)
    assert (r["tpr"], r["threshold"], r["fpr"]) == (0.5, 0.8, 0.0)
    r = tpr_at_fpr_with_ci(HAND_LABELS, HAND_SCORES, 0.1, confidence=0.9)
    assert r["lo"] <= r["tpr"] <= r["hi"]


def test_tpr_at_fpr_with_ci_agrees_with_metrics():
    rng = np.random.default_rng(0)
    labels, scores = gaussian_trials(rng, 3000, 1.5)
    scores = np.round(scores, 1)  # ties
    for max_fpr in (0.0, 0.001, 0.01, 0.1, 0.5):
        r = tpr_at_fpr_with_ci(labels, scores, max_fpr)
        assert r["tpr"] == pytest.approx(tpr_at_fpr(labels, scores, max_fpr))
        pred = scores >= r["threshold"]
        assert np.mean(pred[labels == 0]) == pytest.approx(r["fpr"]) and r["fpr"] <= max_fpr
        assert np.mean(pred[labels == 1]) == pytest.approx(r["tpr"])
        assert r["lo"] <= r["tpr"] <= r["hi"]


# ---------------------------------------------------------------- ROC-based ε bound


def test_epsilon_lower_bound_by_hand():
    # no errors at all among 10 + 10: both upper bounds are 1 - 0.025^(1/10)
    labels = np.array([0] * 10 + [1] * 10)
    scores = labels.astype(float)
    u = 1 - 0.025 ** (1 / 10)
    assert epsilon_lower_bound(labels, scores, 0.5) == pytest.approx(math.log((1 - u) / u), rel=1e-10)
    # FP = 0 of 1000, FN = 500 of 1000: the second inequality FNR + e^ε·FPR ≥ 1 − δ binds
    labels = np.array([0] * 1000 + [1] * 1000)
    scores = np.concatenate([np.zeros(1000), np.zeros(500), np.ones(500)])
    fpr_hi, fnr_hi = beta.ppf(0.975, 1, 1000), beta.ppf(0.975, 501, 500)
    want = math.log((1 - 1e-3 - fnr_hi) / fpr_hi)
    assert epsilon_lower_bound(labels, scores, 0.5, delta=1e-3) == pytest.approx(want, rel=1e-10)
    # a threshold above every score predicts nobody a member: FNR = 1, bound 0
    assert epsilon_lower_bound(labels, scores, np.inf) == 0.0


def test_randomized_response_bound_is_valid_at_stated_confidence():
    rng = np.random.default_rng(1)
    cal_labels, cal_scores = randomized_response(rng, 2000, LN3)
    threshold = best_threshold(cal_labels, cal_scores)  # chosen on other data
    assert threshold == 1.0
    bounds = np.array([epsilon_lower_bound(*randomized_response(rng, 200, LN3), threshold) for _ in range(200)])
    assert np.mean(bounds > LN3) <= 0.05 + 0.025
    assert np.all(bounds >= 0)


def test_randomized_response_bound_is_tight_with_many_trials():
    rng = np.random.default_rng(2)
    labels, scores = randomized_response(rng, 1_000_000, LN3)
    bound = epsilon_lower_bound(labels, scores, 1.0)
    assert 0.9 * LN3 < bound <= LN3


def test_uninformative_attack_gives_zero():
    rng = np.random.default_rng(3)
    n = 5000
    cal = np.arange(n) % 2, rng.normal(size=n)
    threshold = best_threshold(*cal)
    assert epsilon_lower_bound(np.arange(n) % 2, rng.normal(size=n), threshold) == 0.0
    assert epsilon_lower_bound(*randomized_response(rng, n, 0.0), 1.0) == 0.0


def test_more_noise_gives_a_smaller_bound():
    rng = np.random.default_rng(4)
    n = 200_000
    u = rng.random(n)  # common random numbers across noise levels
    bounds = [epsilon_lower_bound(*randomized_response(rng, n, eps, u), 1.0) for eps in (3.0, 2.0, 1.0, 0.5, 0.25)]
    assert all(b1 > b2 for b1, b2 in zip(bounds, bounds[1:]))
    assert all(b <= eps for b, eps in zip(bounds, (3.0, 2.0, 1.0, 0.5, 0.25)))
    # Gaussian mechanism: a smaller mean shift (more noise) also lowers the bound
    z = rng.normal(size=n)
    labels = np.arange(n) % 2
    g = [epsilon_lower_bound(labels, z + mu * labels, mu / 2, delta=1e-5) for mu in (3.0, 2.0, 1.0)]
    assert g[0] > g[1] > g[2] > 0


@pytest.mark.parametrize("mu,delta", [(1.0, 1e-2), (2.0, 1e-5), (3.0, 1e-5)])
def test_gaussian_mechanism_bound_never_exceeds_exact_epsilon(mu, delta):
    """A DP-SGD-like check: the audit must stay below the accountant's (here exact) ε."""
    rng = np.random.default_rng(5)
    exact = gdp_epsilon(mu, delta)
    threshold = best_threshold(*gaussian_trials(rng, 100_000, mu), delta=delta)
    bound = epsilon_lower_bound(*gaussian_trials(rng, 100_000, mu), threshold, delta=delta)
    assert 0 < bound <= exact
    small = [epsilon_lower_bound(*gaussian_trials(rng, 400, mu), threshold, delta=delta) for _ in range(100)]
    assert np.mean(np.array(small) > exact) <= 0.05


def test_best_threshold_maximises_the_bound_on_its_data():
    rng = np.random.default_rng(6)
    labels, scores = gaussian_trials(rng, 2000, 2.0)
    scores = np.round(scores, 1)
    t = best_threshold(labels, scores, delta=1e-5)
    best = epsilon_lower_bound(labels, scores, t, delta=1e-5)
    others = [epsilon_lower_bound(labels, scores, c, delta=1e-5) for c in np.unique(scores)]
    assert best == pytest.approx(max(others))


def test_many_counts_of_one_n_read_the_same_bounds_from_a_table():
    """Clopper–Pearson upper bounds of many counts out of one n come from a table of k = 0..n:
    the same values as computed one by one (Beta(k + 1, n − k) quantiles; 1 at k = n)."""
    from privaudit.analysis.empirical import _cp_upper

    level = 0.975
    for n in (1, 37, 500):
        k = np.random.default_rng(n).integers(0, n + 1, size=200).astype(np.float64)
        one_by_one = np.array([1.0 if ki == n else beta.ppf(level, ki + 1, n - ki) for ki in k])
        np.testing.assert_allclose(_cp_upper(k, np.float64(n), level), one_by_one, rtol=1e-12, atol=0)
        direct = np.array([float(_cp_upper(np.array([ki]), np.float64(n), level)[0]) for ki in k])  # no table
        assert np.array_equal(_cp_upper(k, np.float64(n), level), direct)


def test_bound_bad_inputs_raise():
    with pytest.raises(ValueError, match="both"):
        epsilon_lower_bound(np.ones(4), np.arange(4.0), 1.0)
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound(HAND_LABELS, HAND_SCORES, 0.5, delta=1.0)
    with pytest.raises(ValueError, match="shape"):
        best_threshold(HAND_LABELS, HAND_SCORES[:-1])


# ---------------------------------------------------------------- one training run


def _slow_one_run_p_value(r, v, m, eps, delta):
    """The theorem's p-value term by term: f(v) + 2mδ·max_i (f(v−i) − f(v))/i, f(u) = P[B ≥ u]."""
    q = math.exp(eps) / (1 + math.exp(eps))
    f = lambda u: binom.sf(u - 1, r, q)  # noqa: E731
    extra = max(((f(v - i) - f(v)) / i for i in range(1, v + 1)), default=0.0)
    return min(f(v) + 2 * m * delta * extra, 1.0)


def _rr_canaries(rng, m, eps=LN3):
    """Canaries included w.p. 1/2; the 'model' reveals inclusion by randomized response."""
    included = rng.random(m) < 0.5
    truthful = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    reported = np.where(truthful, included, ~included).astype(float)
    k_pos = int(reported.sum())
    return one_run_guesses(reported, included, k_pos, m - k_pos)


def test_one_run_p_value_matches_the_theorem():
    cases = ((50, 40, 100, 0.7, 1e-3), (200, 150, 1000, 1.2, 1e-5), (10, 10, 10, 2.0, 0.01),
             (30, 0, 30, 1.0, 0.1), (100, 70, 100, 0.5, 0.0))
    for r, v, m, eps, delta in cases:
        want = _slow_one_run_p_value(r, v, m, eps, delta)
        assert one_run_p_value(r, v, m, eps, delta) == pytest.approx(want, rel=1e-9)


def test_one_run_bound_by_hand():
    # 10 guesses, all correct, δ = 0: the bound solves q^10 = 0.05, q = e^ε / (1 + e^ε)
    q = 0.05 ** 0.1
    assert one_run_epsilon_lower_bound(10, 10, 10) == pytest.approx(math.log(q / (1 - q)), abs=1e-7)
    # the returned ε is rejected (p-value below 1 - confidence), slightly larger ones are not
    eps = one_run_epsilon_lower_bound(500, 400, 1000, confidence=0.9)
    assert one_run_p_value(500, 400, 1000, eps) < 0.1 <= one_run_p_value(500, 400, 1000, eps + 1e-6)
    assert one_run_epsilon_lower_bound(0, 0, 10) == 0.0
    assert one_run_epsilon_lower_bound(100, 50, 100) == 0.0


def test_one_run_randomized_response_is_valid_and_approaches_truth():
    rng = np.random.default_rng(7)
    bounds = np.array([one_run_epsilon_lower_bound(*_rr_canaries(rng, 1000), 1000) for _ in range(200)])
    # randomized response is the tight case: the failure rate is close to the nominal 5 %
    assert np.mean(bounds > LN3) <= 0.05 + 0.04
    small = one_run_epsilon_lower_bound(*_rr_canaries(rng, 1000), 1000)
    large = one_run_epsilon_lower_bound(*_rr_canaries(rng, 100_000), 100_000)
    assert small < large <= LN3 and large > 0.9 * LN3


def test_one_run_delta_only_lowers_the_bound():
    rng = np.random.default_rng(8)
    r, v = _rr_canaries(rng, 2000)
    b = [one_run_epsilon_lower_bound(r, v, 2000, delta=d) for d in (0.0, 1e-6, 1e-4, 1e-2)]
    assert b[0] >= b[1] >= b[2] >= b[3] and b[0] > b[2]
    assert one_run_epsilon_lower_bound(r, v, 2000, delta=0.5) == 0.0


def test_one_run_random_guesses_give_zero():
    rng = np.random.default_rng(9)
    m = 5000
    included = rng.random(m) < 0.5
    r, v = one_run_guesses(rng.normal(size=m), included, 500, 500)
    assert r == 1000 and one_run_epsilon_lower_bound(r, v, m) == 0.0


def test_one_run_guesses_by_hand_and_errors():
    scores = np.array([0.9, 0.1, 0.5, 0.8, 0.2, 0.7])
    included = np.array([1, 0, 0, 0, 1, 1], bool)
    # top 2: 0.9 (in, right), 0.8 (out, wrong); bottom 2: 0.1 (out, right), 0.2 (in, wrong)
    assert one_run_guesses(scores, included, 2, 2) == (4, 2)
    assert one_run_guesses(scores, included, 1, 0) == (1, 1)
    assert one_run_guesses(scores, included, 0, 0) == (0, 0)
    with pytest.raises(ValueError):
        one_run_guesses(scores, included, 4, 3)
    with pytest.raises(ValueError, match="shape"):
        one_run_guesses(scores[:-1], included, 1, 1)
    with pytest.raises(ValueError):
        one_run_epsilon_lower_bound(10, 11, 20)
    with pytest.raises(ValueError):
        one_run_epsilon_lower_bound(30, 10, 20)
