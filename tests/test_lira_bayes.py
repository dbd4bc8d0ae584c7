"""LiRA with shrunk means under a difficulty prior, RMIA without ties and its published
signal: closed forms, slow references and simulated worlds with a known answer
(docs/methods/d-attacks.md D.7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.analysis.metrics import tpr_at_fpr
from privaudit.attacks.lira import (
    difficulty_bins,
    joint_mean_posterior,
    lira_bayes_scores,
    lira_scores,
    lira_shrunk_scores,
)
from privaudit.attacks.rmia import interpolated_count, rmia_scores, taylor_soft_margin


def _gap_world(seed, n_models, n=6000, with_mu_out=False):
    """A world where the membership gap is a function of difficulty (plus a little noise) and
    the spread grows with it: what the gap prior assumes. Complementary pairs of references.
    ``with_mu_out``: also return each sample's true OUT mean."""
    rng = np.random.default_rng(seed)
    mu_out = rng.normal(1.0, 2.0, n)
    mu_in = mu_out + 2.5 / (1.0 + np.exp(mu_out - 1.0)) + 0.2 * rng.normal(size=n)
    sd_out = 0.6 + 0.3 / (1.0 + np.exp(-mu_out))
    sd_in = 0.7 * sd_out
    keep = np.zeros((n_models, n), bool)
    for j in range(0, n_models, 2):
        half = rng.random(n) < 0.5
        keep[j], keep[j + 1] = half, ~half

    def draw(k):
        return np.where(k, mu_in + sd_in * rng.normal(size=k.shape), mu_out + sd_out * rng.normal(size=k.shape))

    member = rng.random(n) < 0.5
    world = draw(member[None])[0], draw(keep), keep, member
    return (*world, mu_out) if with_mu_out else world


def test_joint_posterior_matches_a_slow_gaussian_solve():
    rng = np.random.default_rng(0)
    x, y, gap = rng.normal(size=3)
    v_out, v_in, tau2 = rng.uniform(0.1, 2.0, 3)
    # the same model written as a linear-Gaussian regression in (μ_out, D) with the prior as a row
    design = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    obs = np.array([x, y, gap])
    w = np.diag([1 / v_out, 1 / v_in, 1 / tau2])
    cov = np.linalg.inv(design.T @ w @ design)
    mean = cov @ design.T @ w @ obs
    m_out, var_out, m_in, var_in = joint_mean_posterior(*map(np.array, (x, v_out, y, v_in, gap, tau2)))
    assert m_out == pytest.approx(mean[0]) and var_out == pytest.approx(cov[0, 0])
    assert m_in == pytest.approx(mean.sum()) and var_in == pytest.approx(cov.sum())


def test_joint_posterior_limits():
    # a wide gap prior: each side keeps its own mean and sampling variance
    m_out, var_out, m_in, var_in = joint_mean_posterior(*map(np.array, (1.0, 0.5, 3.0, 0.25, 0.0, 1e12)))
    assert (m_out, var_out, m_in, var_in) == pytest.approx((1.0, 0.5, 3.0, 0.25), rel=1e-6)
    # no IN model: the IN mean is the OUT mean plus the gap, as uncertain as both together
    m_out, var_out, m_in, var_in = joint_mean_posterior(*map(np.array, (1.0, 0.5, 0.0, np.inf, 2.0, 0.3)))
    assert (m_out, var_out, m_in, var_in) == pytest.approx((1.0, 0.5, 3.0, 0.8))
    # no OUT model: the other way round
    m_out, var_out, m_in, var_in = joint_mean_posterior(*map(np.array, (0.0, np.inf, 3.0, 0.25, 2.0, 0.3)))
    assert (m_out, var_out, m_in, var_in) == pytest.approx((1.0, 0.55, 3.0, 0.25))


def test_joint_posterior_with_an_out_prior_matches_a_slow_gaussian_solve():
    rng = np.random.default_rng(3)
    x, y, gap, m0 = rng.normal(size=4)
    v_out, v_in, tau2, v0 = rng.uniform(0.1, 2.0, 4)
    design = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])  # the prior on μ_out as a fourth row
    obs = np.array([x, y, gap, m0])
    w = np.diag([1 / v_out, 1 / v_in, 1 / tau2, 1 / v0])
    cov = np.linalg.inv(design.T @ w @ design)
    mean = cov @ design.T @ w @ obs
    got = joint_mean_posterior(*map(np.array, (x, v_out, y, v_in, gap, tau2)), out_prior=(np.array(m0), np.array(v0)))
    assert got == pytest.approx((mean[0], cov[0, 0], mean.sum(), cov.sum()))
    # no model on either side: the prior and the gap alone
    got = joint_mean_posterior(*map(np.array, (0.0, np.inf, 0.0, np.inf, gap, tau2)),
                               out_prior=(np.array(m0), np.array(v0)))
    assert got == pytest.approx((m0, v0, m0 + gap, v0 + tau2))


@pytest.mark.parametrize("k", [4, 8])
def test_a_true_out_prior_finds_more_members_than_a_flat_one(k):
    """A prior centred on each sample's true OUT mean, as uncertain as a quarter of the OUT
    spread, finds more members at 0.1 % FPR than the flat prior, over 4 worlds each."""
    gains = []
    for seed in range(4):
        target, ref, keep, member, mu_out = _gap_world(seed, k, with_mu_out=True)
        noisy = mu_out + 0.15 * np.random.default_rng(seed + 100).normal(size=mu_out.shape)
        learned = lira_bayes_scores(target, ref, keep, out_prior=(noisy[:, None], np.array([0.15**2])))
        flat = lira_bayes_scores(target, ref, keep)
        gains.append(tpr_at_fpr(member.astype(int), learned, 0.001) - tpr_at_fpr(member.astype(int), flat, 0.001))
    assert min(gains) > 0, gains


def test_difficulty_bins_are_quantiles():
    d = np.random.default_rng(1).normal(size=2000)
    b = difficulty_bins(d, per_bin=500)
    assert sorted(np.bincount(b)) == [500] * 4
    assert np.all(np.diff(b[np.argsort(d)]) >= 0)  # bin 0 the lowest
    assert difficulty_bins(d[:10], per_bin=500).tolist() == [0] * 10


@pytest.mark.parametrize("k", [4, 8])
def test_bayes_beats_shrunk_variances_where_the_gap_follows_difficulty(k):
    """With 2 or 4 references per side the shrunk means find more members at 0.1 % FPR than
    shrunk variances alone, over 4 worlds each (a trend that must hold: the gap prior is true)."""
    gains = []
    for seed in range(4):
        target, ref, keep, member = _gap_world(seed, k)
        bayes = tpr_at_fpr(member.astype(int), lira_bayes_scores(target, ref, keep), 0.001)
        shrunk = tpr_at_fpr(member.astype(int), lira_shrunk_scores(target, ref, keep), 0.001)
        gains.append(bayes - shrunk)
    assert min(gains) > 0, gains


def test_bayes_with_many_references_is_per_sample_lira():
    """64 references: the data outweigh the priors, and the scores rank almost as per-sample
    LiRA's (here the gap prior's spread, 0.2, is still near the IN mean's sampling error)."""
    from scipy.stats import spearmanr

    target, ref, keep, _ = _gap_world(5, 64, n=3000)
    rho = spearmanr(lira_bayes_scores(target, ref, keep), lira_scores(target, ref, keep)).statistic
    assert rho > 0.98


def test_bayes_falls_back_to_global_lira_without_spread():
    for models in (1, 2):  # one reference; one complementary pair: one model per side
        target, ref, keep, _ = _gap_world(2, 2, n=1000)
        target, ref, keep = target, ref[:models], keep[:models]
        for online in (True, False):
            np.testing.assert_array_equal(lira_bayes_scores(target, ref, keep, online=online),
                                          lira_scores(target, ref, keep, online=online, global_variance=True))


def test_bayes_offline_uses_out_models_and_is_one_sided():
    target, ref, keep, _ = _gap_world(3, 8, n=2000)
    s = lira_bayes_scores(target, ref, keep, online=False)
    assert np.all(s <= 0)  # a log-probability
    assert np.all(np.isfinite(s))
    higher = lira_bayes_scores(target + 1.0, ref, keep, online=False)
    assert np.all(higher > s)  # a larger φ is more evidence of membership, sample by sample


def test_interpolated_count_is_the_count_made_strictly_increasing():
    rng = np.random.default_rng(0)
    z = np.sort(rng.lognormal(size=200))
    v = np.sort(rng.lognormal(size=5000) * 3)
    s = interpolated_count(z, v)
    assert np.all(np.diff(s) > 0)
    count = np.searchsorted(z, v, side="right") / z.size
    assert np.all((s > count - 1 / z.size - 1e-12) & (s < count + 1e-12))
    assert s.max() < 1 and s.min() > -1 / z.size
    assert interpolated_count(z, z[[10]])[0] == pytest.approx(10 / z.size)  # at a population value


def test_untied_rmia_ranks_as_the_likelihood_ratio():
    """One target: the untied score orders the audited samples exactly as LR(x) does, where
    the plain count ties every sample above the population's largest ratio."""
    rng = np.random.default_rng(1)
    p_ref_x, p_ref_z = rng.uniform(0.05, 0.9, (4, 300)), rng.uniform(0.05, 0.9, (4, 50))
    p_x, p_z = rng.uniform(0.0, 1.0, 300), rng.uniform(0.0, 0.6, 50)
    plain = rmia_scores(p_x, p_ref_x, p_z, p_ref_z, a=0.5)
    untied = rmia_scores(p_x, p_ref_x, p_z, p_ref_z, a=0.5, interpolate=True)
    lr = p_x / (0.5 * (1.5 * p_ref_x.mean(axis=0) + 0.5))
    assert (plain == 1.0).sum() > 10
    np.testing.assert_array_equal(np.argsort(untied), np.argsort(lr))


def test_taylor_soft_margin_matches_its_formula_and_tends_to_softmax():
    rng = np.random.default_rng(2)
    z, y = rng.normal(0, 2, (6, 10)), np.arange(6)

    def slow(logits, label, m=0.6, n=4, temperature=2.0):
        u = logits / temperature
        e = lambda v: sum(v**i / math.factorial(i) for i in range(n + 1))  # noqa: E731
        true = e(u[label] - m)
        return true / (true + sum(e(c) for j, c in enumerate(u) if j != label))

    np.testing.assert_allclose(taylor_soft_margin(z, y), [slow(z[i], y[i]) for i in range(6)])
    assert np.all((taylor_soft_margin(z * 50, y) > 0) & (taylor_soft_margin(z * 50, y) < 1))  # even order
    # a high order, no margin, temperature 1: the softmax itself
    soft = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(taylor_soft_margin(z, y, margin=0.0, order=40, temperature=1.0),
                               soft[np.arange(6), y], rtol=1e-9)
    with pytest.raises(ValueError, match="even"):
        taylor_soft_margin(z, y, order=3)


def test_the_pool_attacks_run_the_shrunk_means_and_rmia_without_ties():
    """``pool_scores`` names the new LiRA variants, scores them as :func:`lira_bayes_scores`
    does, and RMIA's scores on one target no longer tie at the top."""
    from privaudit.attacks.pool_attacks import pool_scores
    from privaudit.attacks.registry import PER_SAMPLE_ATTACKS, REFERENCE_ATTACKS

    rng = np.random.default_rng(3)
    m, n, z, c = 8, 400, 30, 5
    labels, pop_labels = rng.integers(0, c, n), rng.integers(0, c, z)
    keep = np.zeros((m, n), bool)
    for j in range(0, m, 2):
        keep[j] = rng.random(n) < 0.5
        keep[j + 1] = ~keep[j]
    boost = np.zeros((m, n, 1, c))
    boost[np.arange(m)[:, None], np.arange(n)[None, :], 0, labels[None, :]] = 2.0 * keep
    logits = rng.normal(size=(m, n, 1, c)) + boost
    pop_logits = rng.normal(size=(m, z, 1, c))
    target = rng.normal(size=(n, 1, c)) * 3.0
    attacks = ("lira-bayes-online", "lira-bayes-offline", "rmia")
    assert set(attacks) <= set(REFERENCE_ATTACKS) and set(attacks) <= set(PER_SAMPLE_ATTACKS)
    s = pool_scores(target, rng.normal(size=(z, 1, c)), labels, pop_labels, logits, pop_logits, keep, attacks=attacks)
    from privaudit.attacks.lira import logit_scaled_confidence

    phi = logit_scaled_confidence(logits, labels[None, :, None])
    np.testing.assert_allclose(s["lira-bayes-online"],
                               lira_bayes_scores(logit_scaled_confidence(target, labels[:, None]), phi, keep),
                               rtol=1e-9)
    top = s["rmia"] >= (z - 1) / z  # above the population's largest ratio
    assert top.sum() > 5 and len(np.unique(s["rmia"][top])) == top.sum()
