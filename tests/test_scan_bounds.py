"""``privaudit scan``'s ε and μ lower bounds hold at their stated 95 % on simulated μ-GDP data
(privaudit/scanning/run.py: ``fixed_score_bounds``, ``fold_bounds``; docs/scan.md).

Simulated μ-GDP losses: member scores (−loss) N(μ, 1), non-member scores N(0, 1); every
threshold test on them has the trade-off curve f_μ exactly, so the true μ, and the true
ε(μ, δ) = ``gdp_epsilon``, are known. A 95 % lower bound may exceed the truth in at most 5 %
of sets; with S sets the number of violations of a valid bound is at most Binomial(S, 0.05),
so a count above its 95 % quantile (``binom.ppf(0.95, S, 0.05)``) would reject validity at
5 %. Both bounds are conservative (Clopper–Pearson, Bonferroni), so the observed rates are far
below 5 %.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.stats import binom

from privaudit.analysis.empirical import epsilon_lower_bound_bonferroni
from privaudit.analysis.gdp import gdp_epsilon, gdp_lower_bound_bonferroni
from privaudit.attacks.crossval import fold_ids
from privaudit.scanning.inputs import check
from privaudit.scanning.run import fixed_score_bounds, fold_bounds, scan

DELTA = 1e-5
#: (members = non-members per set, true μ, sets): 1,350 sets in all, about 5 s
CONFIGS = [(5_000, 0.5, 150), (5_000, 1.0, 150), (5_000, 2.0, 150),
           (500, 0.5, 300), (500, 1.0, 300), (500, 2.0, 300)]
#: mean μ bound / μ must reach these (0.05 below the measured means in the docstring below)
TIGHTNESS_FLOOR = {(5_000, 0.5): 0.74, (5_000, 1.0): 0.85, (5_000, 2.0): 0.89,
                   (500, 0.5): 0.30, (500, 1.0): 0.61, (500, 2.0): 0.75}


def _allowed(sets: int) -> int:
    """The 95 % binomial upper quantile of violations of a valid 95 % bound in ``sets`` sets."""
    return int(binom.ppf(0.95, sets, 0.05))


@functools.cache
def _bounds(n: int, mu: float, sets: int) -> tuple[np.ndarray, np.ndarray]:
    """(μ bounds, ε bounds) of ``sets`` seeded sets of n + n μ-GDP scores, by scan's function."""
    rng = np.random.default_rng(int(1000 * mu) + n)
    labels = np.repeat([1, 0], n)
    scores = rng.normal(size=(sets, 2 * n)) + mu * labels
    out = [fixed_score_bounds(labels, s, delta=DELTA, confidence=0.95) for s in scores]
    return np.array([b["gdp_mu"] for b in out]), np.array([b["eps_lower_bound"] for b in out])


@pytest.mark.parametrize("n, mu, sets", CONFIGS)
def test_fixed_score_bounds_cover_the_true_mu_and_epsilon(n, mu, sets):
    """Measured (seeded; -s prints them), violations of μ ≤ true μ and of ε ≤ ε(μ, 1e-5), and
    the tightness, mean μ bound / μ (mean ε bound / true ε):

        5,000 + 5,000: μ = 0.5: 0/150 and 0/150, 0.798 (0.36)
                       μ = 1:   0/150 and 0/150, 0.891 (0.41)
                       μ = 2:   0/150 and 0/150, 0.938 (0.38)
        500 + 500:     μ = 0.5: 0/300 and 0/300, 0.354 (0.11)
                       μ = 1:   0/300 and 0/300, 0.664 (0.22)
                       μ = 2:   0/300 and 0/300, 0.802 (0.24)

    (allowed: 11 of 150, 20 of 300). The Clopper–Pearson ε is far below ε(μ, δ): it tests one
    point of the curve against the (ε, δ) polygon, whose corner at δ = 1e-5 lies deep in the
    tail; the μ bound uses the curve's Gaussian shape.
    """
    mus, eps = _bounds(n, mu, sets)
    true_eps = gdp_epsilon(mu, DELTA)
    mu_bad, eps_bad = int(np.sum(mus > mu)), int(np.sum(eps > true_eps))
    print(f"n = {n}, mu = {mu}: violations mu {mu_bad}/{sets}, eps {eps_bad}/{sets}; "
          f"mean mu bound / mu {np.mean(mus) / mu:.3f}, mean eps bound / eps {np.mean(eps) / true_eps:.3f}")
    assert mu_bad <= _allowed(sets) and eps_bad <= _allowed(sets)
    assert np.all(mus >= 0) and np.all(eps >= 0)
    # the bounds say something: well above 0 on average (floors 0.05 below the measured means)
    assert np.mean(mus) / mu >= TIGHTNESS_FLOOR[n, mu]


def test_all_sets_together_stay_below_the_binomial_quantile():
    """The 1,350 sets pooled: a valid bound violates in at most 83 (the 95 % quantile of
    Binomial(1350, 0.05)); measured 0 for μ and 0 for ε."""
    mu_bad = sum(int(np.sum(_bounds(*c)[0] > c[1])) for c in CONFIGS)
    eps_bad = sum(int(np.sum(_bounds(*c)[1] > gdp_epsilon(c[1], DELTA))) for c in CONFIGS)
    total = sum(c[2] for c in CONFIGS)
    assert mu_bad <= _allowed(total) and eps_bad <= _allowed(total), (mu_bad, eps_bad, total)


def test_one_gdp_losses_give_a_tight_mu_bound():
    """5,000 + 5,000 losses with an exactly 1-GDP curve: scan's mean μ bound is ≥ 0.85
    (measured 0.891 over 150 sets, each above 0.8; the cross-validated bound it replaced had median 0.08)."""
    mus, _ = _bounds(5_000, 1.0, 150)
    assert np.mean(mus) >= 0.85
    assert np.mean(mus > 0.8) > 0.9  # measured: all 150


def test_scan_of_losses_reports_these_bounds():
    """``scan`` on a losses-only input reports :func:`fixed_score_bounds` of −loss, its threshold
    strategy and the FPR each chosen candidate reached."""
    rng = np.random.default_rng(7)
    n = 5_000
    loss_in, loss_out = 20.0 - rng.normal(1.0, 1.0, n), 20.0 - rng.normal(0.0, 1.0, n)
    r = scan(check({"loss_in": loss_in, "loss_out": loss_out}), permutations=99)
    labels, scores = np.repeat([1, 0], n), -np.concatenate([loss_in, loss_out])
    want = fixed_score_bounds(labels, scores, delta=DELTA, confidence=0.95)
    m = r.metrics["loss"]
    for key, value in want.items():
        assert m[key] == value, key
    assert m["threshold_strategy"] == "bonferroni: 100 label-free candidate thresholds, each at confidence 1 − α/100"
    assert m["eps_lower_bound"] == epsilon_lower_bound_bonferroni(labels, scores, delta=DELTA).epsilon
    assert m["gdp_mu"] == gdp_lower_bound_bonferroni(labels, scores, delta=DELTA).mu
    assert m["eps_fpr"] == np.mean(scores[n:] >= m["eps_threshold"])
    assert m["gdp_fpr"] == np.mean(scores[n:] >= m["gdp_threshold"])
    assert 0.7 < m["gdp_mu"] <= 1.0 and 0 < m["eps_lower_bound"] <= gdp_epsilon(1.0, DELTA)


def _trained_scores(rng, n: int, mu: float, fold: np.ndarray, sets: int, dim: int = 4) -> np.ndarray:
    """``sets`` sets of scores (sets, 2n) of a linear attack trained on the other folds: the
    mechanism releases x ~ N(μ·u, I) for a member and N(0, I) for a non-member (u a unit vector
    in ``dim`` dimensions, so it is exactly μ-GDP), and fold k is scored by w_k·x, w_k the
    members' minus the non-members' mean x over the other folds."""
    labels = np.repeat([1, 0], n)
    x = rng.normal(size=(sets, 2 * n, dim)) + (mu / np.sqrt(dim)) * labels[:, None]
    scores = np.empty((sets, 2 * n))
    for k in np.unique(fold):
        train, test = fold != k, fold == k
        w = (x[:, train & (labels == 1)].mean(axis=1) - x[:, train & (labels == 0)].mean(axis=1))  # (sets, dim)
        scores[:, test] = np.einsum("snd,sd->sn", x[:, test], w)
    return scores


@pytest.mark.parametrize("n, mu, sets", [(500, 1.0, 150), (500, 2.0, 150), (5_000, 1.0, 40)])
def test_fold_bounds_cover_a_score_trained_on_the_other_folds(n, mu, sets):
    """The classifier's strategy (each fold's own scores at 1 − α/K, T candidates within) on a
    linear attack trained fold by fold. Measured violations of μ and ε: 0/150 and 0/150 at
    500 + 500 (μ = 1, 2) and 0/40 at 5,000 + 5,000; mean μ bound / μ 0.305, 0.590 and 0.781
    (one fold's data at a smaller α: looser than :func:`fixed_score_bounds`)."""
    rng = np.random.default_rng(31 + n + int(10 * mu))
    labels = np.repeat([1, 0], n)
    fold = fold_ids(labels, 5, 0)
    out = [fold_bounds(labels, s, fold, delta=DELTA, confidence=0.95)
           for s in _trained_scores(rng, n, mu, fold, sets)]
    mus = np.array([b["gdp_mu"] for b in out])
    eps = np.array([b["eps_lower_bound"] for b in out])
    mu_bad, eps_bad = int(np.sum(mus > mu)), int(np.sum(eps > gdp_epsilon(mu, DELTA)))
    print(f"folds, n = {n}, mu = {mu}: violations mu {mu_bad}/{sets}, eps {eps_bad}/{sets}; "
          f"mean mu bound / mu {np.mean(mus) / mu:.3f}")
    assert mu_bad <= _allowed(sets) and eps_bad <= _allowed(sets)
    assert np.mean(mus) > 0.2 * mu
    assert out[0]["threshold_strategy"].startswith("bonferroni within folds: each of 5 folds' out-of-fold scores")


def test_fold_bounds_are_the_largest_fold_bound_at_alpha_over_k():
    """Each fold bounded alone at confidence 1 − 0.05/5, the largest reported; a fold's bound
    does not move when another fold's labels change."""
    rng = np.random.default_rng(3)
    labels = np.repeat([1, 0], 400)
    scores = rng.normal(size=800) + 1.5 * labels
    fold = fold_ids(labels, 5, 0)
    got = fold_bounds(labels, scores, fold, delta=DELTA, confidence=0.95)
    per = [gdp_lower_bound_bonferroni(labels[fold == k], scores[fold == k], delta=DELTA, confidence=0.99)
           for k in range(5)]
    per_eps = [epsilon_lower_bound_bonferroni(labels[fold == k], scores[fold == k], delta=DELTA, confidence=0.99)
               for k in range(5)]
    best = int(np.argmax([b.mu for b in per]))
    assert got["gdp_mu"] == per[best].mu and got["gdp_fpr"] == per[best].fpr
    assert got["eps_lower_bound"] == max(b.epsilon for b in per_eps)
    assert got["gdp_mu"] < fixed_score_bounds(labels, scores, delta=DELTA, confidence=0.95)["gdp_mu"]
