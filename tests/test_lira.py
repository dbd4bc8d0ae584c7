"""LiRA on synthetic Gaussian statistics where the optimal test is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm, spearmanr
from sklearn.metrics import roc_auc_score

from privaudit.attacks.lira import lira_scores, logit_scaled_confidence


def _keep(rng, n_models, n):
    """keep[m, i]: each sample IN in exactly half of the models (the LiRA code's layout)."""
    return np.argsort(rng.random((n_models, n)), axis=0) < n_models // 2


def _params(rng, n, equal_std=False):
    mu_out = rng.normal(0.0, 1.0, (n, 1))
    mu_in = mu_out + rng.uniform(0.5, 3.0, (n, 1))
    if equal_std:
        sd_in = sd_out = np.ones((n, 1))
    else:
        sd_in, sd_out = rng.uniform(0.5, 1.5, (n, 1)), rng.uniform(0.5, 1.5, (n, 1))
    return mu_in, sd_in, mu_out, sd_out


def _world(seed, n_models, n=2000, n_queries=2, equal_std=False):
    """Reference statistics, a target drawn from the same Gaussians, and the true LLR."""
    rng = np.random.default_rng(seed)
    mu_in, sd_in, mu_out, sd_out = _params(rng, n, equal_std)
    keep = _keep(rng, n_models, n)
    eps = rng.normal(size=(n_models, n, n_queries))
    ref = np.where(keep[:, :, None], mu_in + sd_in * eps, mu_out + sd_out * eps)
    member = rng.random(n) < 0.5
    e_t = rng.normal(size=(n, n_queries))
    target = np.where(member[:, None], mu_in + sd_in * e_t, mu_out + sd_out * e_t)
    true_llr = (norm.logpdf(target, mu_in, sd_in) - norm.logpdf(target, mu_out, sd_out)).mean(axis=1)
    true_off = norm.logcdf((target - mu_out) / sd_out).mean(axis=1)
    return dict(ref=ref, keep=keep, target=target, member=member, true_llr=true_llr, true_off=true_off,
                params=(mu_in, sd_in, mu_out, sd_out), rng=rng)


def _exact_moments(eps, keep, mu_in, sd_in, mu_out, sd_out):
    """Reference stats whose IN / OUT sample mean and population std are exactly the given ones."""
    out = np.empty_like(eps)
    for mask, mu, sd in ((keep, mu_in, sd_in), (~keep, mu_out, sd_out)):
        w = mask[:, :, None]
        cnt = w.sum(axis=0)
        m = (eps * w).sum(axis=0) / cnt
        s = np.sqrt((((eps - m) ** 2) * w).sum(axis=0) / cnt)
        out = np.where(w, mu + sd * (eps - m) / s, out)
    return out


# ---------------------------------------------------------------- logit-scaled confidence


def _slow_phi(z, y):
    p = [math.exp(v - max(z)) for v in z]
    total = sum(p)
    p = [v / total for v in p]
    return math.log(p[y]) - math.log(sum(v for i, v in enumerate(p) if i != y))


def test_logit_scaled_confidence_matches_direct_formula():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (3, 5, 2, 7))  # (M, n, A, C)
    labels = rng.integers(0, 7, 5)
    phi = logit_scaled_confidence(logits, labels[None, :, None])
    assert phi.shape == (3, 5, 2) and phi.dtype == np.float64
    for m in range(3):
        for i in range(5):
            for a in range(2):
                assert phi[m, i, a] == pytest.approx(_slow_phi(list(logits[m, i, a]), labels[i]), rel=1e-10, abs=1e-12)
    # (n, 1) labels broadcast the same way; plain (N,) labels for (N, C) logits
    np.testing.assert_allclose(logit_scaled_confidence(logits, labels[:, None]), phi, rtol=0, atol=0)
    flat = logit_scaled_confidence(logits[0, :, 0], labels)
    np.testing.assert_allclose(flat, phi[0, :, 0], rtol=1e-12)


def test_logit_scaled_confidence_is_finite_when_p_y_rounds_to_one():
    # p_y = 1 - 1e-15 with 9 other classes at logit 0: φ = log((1 - 1e-15) / 1e-15)
    p = 1 - 1e-15
    z_y = math.log(9 * p / (1 - p))
    logits = np.array([[z_y] + [0.0] * 9])
    phi = logit_scaled_confidence(logits, np.array([0]))
    assert np.isfinite(phi).all()
    assert phi[0] == pytest.approx(math.log(p / (1 - p)), rel=1e-9)
    # softmax gives p_y == 1.0 exactly here; the naive log p - log(1 - p) would be inf
    phi = logit_scaled_confidence(np.array([[800.0, 0.0, -5.0], [0.0, 800.0, 0.0]]), np.array([0, 0]))
    assert phi[0] == pytest.approx(800.0 - math.log1p(math.exp(-5.0)), rel=1e-14)
    assert phi[1] == pytest.approx(-800.0, rel=1e-14)


def test_logit_scaled_confidence_rejects_bad_shapes():
    logits = np.zeros((3, 5, 2, 4))
    with pytest.raises(ValueError, match="broadcast"):
        logit_scaled_confidence(logits, np.zeros(5, dtype=int))  # aligned with A = 2, not n
    with pytest.raises(ValueError, match="C >= 2"):
        logit_scaled_confidence(np.zeros((5, 1)), np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        logit_scaled_confidence(logits, np.full((1, 5, 1), 4))
    with pytest.raises(ValueError, match="integer"):
        logit_scaled_confidence(logits, np.full((1, 5, 1), 0.5))


# ---------------------------------------------------------------- LiRA scores: exact cases


def test_exact_moments_reproduce_closed_forms():
    """With reference stats whose moments are exactly the true ones, LiRA is the closed form."""
    rng = np.random.default_rng(1)
    n, n_models, n_queries = 300, 16, 2
    mu_in, sd_in, mu_out, sd_out = _params(rng, n)
    keep = _keep(rng, n_models, n)
    ref = _exact_moments(rng.normal(size=(n_models, n, n_queries)), keep, mu_in, sd_in, mu_out, sd_out)
    target = rng.normal(0, 2, (n, n_queries))
    want_on = (norm.logpdf(target, mu_in, sd_in) - norm.logpdf(target, mu_out, sd_out)).mean(axis=1)
    want_off = norm.logcdf((target - mu_out) / sd_out).mean(axis=1)
    np.testing.assert_allclose(lira_scores(target, ref, keep), want_on, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lira_scores(target, ref, keep, online=False), want_off, rtol=1e-9, atol=1e-9)
    # one std for all samples: the global (pooled) variance is exactly that std
    mu_in, _, mu_out, _ = _params(rng, n)
    ref = _exact_moments(rng.normal(size=(n_models, n, n_queries)), keep, mu_in, 0.7, mu_out, 1.3)
    want = (norm.logpdf(target, mu_in, 0.7) - norm.logpdf(target, mu_out, 1.3)).mean(axis=1)
    np.testing.assert_allclose(lira_scores(target, ref, keep, global_variance=True), want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lira_scores(target, ref, keep, global_variance=False), want, rtol=1e-9, atol=1e-9)


def test_one_query_and_symmetric_in_out_give_zero():
    rng = np.random.default_rng(2)
    keep = _keep(rng, 8, 50)
    ref = rng.normal(size=(8, 50))
    target = rng.normal(size=50)
    assert lira_scores(target, ref, keep).shape == (50,)
    np.testing.assert_array_equal(lira_scores(target, ref, keep), lira_scores(target[:, None], ref[:, :, None], keep))
    # IN and OUT reference stats identical -> likelihood ratio 1 -> score 0
    sym = np.concatenate([ref[:4], ref[:4]])
    sym_keep = np.repeat([True, False], 4)[:, None] & np.ones((1, 50), bool)
    np.testing.assert_allclose(lira_scores(target, sym, sym_keep), 0.0, atol=1e-12)


def test_samples_without_in_or_out_models_fall_back():
    rng = np.random.default_rng(3)
    keep = _keep(rng, 8, 6)
    keep[:, 0] = False  # no IN model: online falls back to offline
    keep[:, 1] = True  # no OUT model: tested against every sample's OUT statistics pooled
    ref = rng.normal(size=(8, 6, 2))
    target = rng.normal(size=(6, 2))
    on = lira_scores(target, ref, keep)
    off = lira_scores(target, ref, keep, online=False)
    assert on[0] == off[0] and off[0] < 0
    out = ~keep
    pooled = ref[out]  # (pairs, A) of every OUT (model, sample)
    want = np.mean(norm.logcdf((target[1] - pooled.mean(0)) / pooled.std(0)))
    assert on[1] == off[1] == pytest.approx(want) and off[1] < 0
    everyone_in = lira_scores(target, ref, np.ones_like(keep), online=False)
    assert np.all(everyone_in == 0.0)  # no OUT pair at all: no information, 0
    assert np.all(np.isfinite(on)) and np.all(np.isfinite(lira_scores(target, ref, keep, global_variance=True)))
    # a sample whose reference stats are all equal: the std is floored, scores stay finite
    ref[:, 2, :] = 1.0
    assert np.all(np.isfinite(lira_scores(target, ref, keep, min_std=1e-3)))


def test_bad_inputs_raise():
    rng = np.random.default_rng(4)
    keep = _keep(rng, 4, 10)
    ref, target = rng.normal(size=(4, 10, 2)), rng.normal(size=(10, 2))
    with pytest.raises(ValueError, match="ref_stats"):
        lira_scores(target, ref[:, :, :1], keep)
    with pytest.raises(ValueError, match="ref_stats"):
        lira_scores(target, ref[:, :9], keep)
    with pytest.raises(ValueError, match="ref_keep"):
        lira_scores(target, ref, keep[:, :9])
    with pytest.raises(ValueError, match="boolean"):
        lira_scores(target, ref, keep * 2)
    with pytest.raises(ValueError, match="target_stats"):
        lira_scores(target[None], ref, keep)
    with pytest.raises(ValueError, match="finite"):
        lira_scores(np.where(target > 1, np.nan, target), ref, keep)
    with pytest.raises(ValueError, match="min_std"):
        lira_scores(target, ref, keep, min_std=0.0)


# ---------------------------------------------------------------- LiRA scores: statistics


def test_online_with_many_models_ranks_like_the_optimal_test():
    w = _world(seed=10, n_models=256)
    scores = lira_scores(w["target"], w["ref"], w["keep"])
    assert spearmanr(scores, w["true_llr"]).statistic > 0.99
    auc, best = roc_auc_score(w["member"], scores), roc_auc_score(w["member"], w["true_llr"])
    assert auc == pytest.approx(best, abs=0.01) and auc > 0.8


def test_more_reference_models_get_closer_to_optimal():
    err, rho = {}, {}
    for n_models in (4, 16, 256):
        w = _world(seed=11, n_models=n_models)
        s = lira_scores(w["target"], w["ref"], w["keep"], min_std=1e-3)
        err[n_models] = np.median(np.abs(s - w["true_llr"]))
        rho[n_models] = spearmanr(s, w["true_llr"]).statistic
    assert err[4] > err[16] > err[256]
    assert rho[4] < rho[16] < rho[256]


def test_global_and_per_sample_variance_agree_when_variances_are_equal():
    w = _world(seed=12, n_models=256, equal_std=True)
    per_sample = lira_scores(w["target"], w["ref"], w["keep"])
    pooled = lira_scores(w["target"], w["ref"], w["keep"], global_variance=True)
    assert np.corrcoef(per_sample, pooled)[0, 1] > 0.99
    # and the pooled variant is the better one with few models (the paper's observation)
    few = _world(seed=13, n_models=4, equal_std=True)
    auc = {g: roc_auc_score(few["member"], lira_scores(few["target"], few["ref"], few["keep"], global_variance=g))
           for g in (False, True)}
    assert auc[True] > auc[False]


def test_offline_converges_to_closed_form_logcdf():
    w = _world(seed=14, n_models=4000, n=200, n_queries=1)
    off = lira_scores(w["target"], w["ref"], w["keep"], online=False)
    np.testing.assert_allclose(off, w["true_off"], rtol=0.05, atol=0.02)
    assert spearmanr(off, w["true_off"]).statistic > 0.999
    # higher = more member: offline score still separates members
    assert roc_auc_score(w["member"], off) > 0.75
