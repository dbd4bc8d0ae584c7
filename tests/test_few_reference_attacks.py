"""Attacks for few reference models: LiRA with shrunk variances and the quantile-regression
attack, on simulated data where the right answer is known (docs/methods/d-attacks.md D.7, D.8)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.special import digamma, polygamma
from scipy.stats import norm, spearmanr
from scipy.stats import t as student_t

from privaudit.analysis.metrics import auc_score
from privaudit.attacks.lira import estimate_prior, lira_scores, lira_shrunk_scores
from privaudit.attacks.quantile import QuantileAttack

# ------------------------------------------------------------------ simulated LiRA worlds

def _world(seed, n_models, *, n=4000, hetero=False, balanced=True, n_queries=1):
    """Reference φ, a target drawn from the same Gaussians, membership and keep.

    Every sample has its own OUT mean and its own IN shift; the per-sample standard
    deviations are all 1 (``hetero`` False) or log-uniform on [0.2, 5] per sample and side.
    ``balanced``: each sample IN in exactly half of the models (complementary layout);
    otherwise IN in each model with probability ½ independently.
    """
    rng = np.random.default_rng(seed)
    mu_out = rng.normal(0.0, 2.0, (n, 1))
    mu_in = mu_out + rng.uniform(0.0, 2.0, (n, 1))
    if hetero:
        sd_in = np.exp(rng.uniform(np.log(0.2), np.log(5.0), (n, 1)))
        sd_out = np.exp(rng.uniform(np.log(0.2), np.log(5.0), (n, 1)))
    else:
        sd_in = sd_out = np.ones((n, 1))
    if balanced and n_models > 1:
        keep = np.argsort(rng.random((n_models, n)), axis=0) < n_models // 2
    else:
        keep = rng.random((n_models, n)) < 0.5
    eps = rng.normal(size=(n_models, n, n_queries))
    ref = np.where(keep[:, :, None], mu_in + sd_in * eps, mu_out + sd_out * eps)
    member = rng.random(n) < 0.5
    e = rng.normal(size=(n, n_queries))
    target = np.where(member[:, None], mu_in + sd_in * e, mu_out + sd_out * e)
    return target, ref, keep, member


def _aucs(seed, n_models, **kw):
    target, ref, keep, member = _world(seed, n_models, **kw)
    out = {}
    for online in (True, False):
        tag = "online" if online else "offline"
        out["shrunk", tag] = auc_score(member, lira_shrunk_scores(target, ref, keep, online=online))
        out["per-sample", tag] = auc_score(member, lira_scores(target, ref, keep, online=online))
        out["global", tag] = auc_score(member, lira_scores(target, ref, keep, online=online, global_variance=True))
    return out


# ------------------------------------------------------------------ slow reference version

def _slow_prior(values, nu0_given):
    """(ν0, σ0²) from the per-sample value lists of one side and query, or None."""
    s2 = np.array([np.var(v, ddof=1) for v in values if len(v) >= 2])
    d = np.array([len(v) - 1.0 for v in values if len(v) >= 2])
    if s2.size == 0:
        return None
    s2 = np.maximum(s2, 1e-5 * np.median(s2))
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    if nu0_given is None:
        excess = e.var(ddof=1) - polygamma(1, d / 2).mean()
        nu0 = np.inf if excess <= 0 else 2 * brentq(lambda x: polygamma(1, x) - excess, 1e-10, 1e10, xtol=1e-14)
    else:
        nu0 = nu0_given
    shift = 0.0 if np.isinf(nu0) else digamma(nu0 / 2) - np.log(nu0 / 2)
    return nu0, float(np.exp(e.mean() + shift))


def _slow_shrunk(target, ref, keep, *, online, prior_strength=None):
    """lira_shrunk_scores, one sample and query at a time with scipy.stats.t."""
    n_models, n, n_queries = ref.shape
    scores = np.zeros(n)
    for i in range(n):
        llr, off = [], []
        for a in range(n_queries):
            ins = [ref[keep[:, j], j, a] for j in range(n)]
            outs = [ref[~keep[:, j], j, a] for j in range(n)]
            p_out, p_in = _slow_prior(outs, prior_strength), _slow_prior(ins, prior_strength)
            if online:
                p_out, p_in = p_out or p_in, p_in or p_out
                if p_in is None:
                    side = ref[:, :, a][keep]
                    p_in = (np.inf if prior_strength is None else prior_strength, side.var() if side.size >= 2 else 1.0)
            if p_out is None:
                side = ref[:, :, a][~keep]
                p_out = (np.inf if prior_strength is None else prior_strength, side.var() if side.size >= 2 else 1.0)

            def predictive(v, prior):
                nu0, var0 = prior
                k = len(v)
                ss = ((v - v.mean()) ** 2).sum()
                if np.isinf(nu0):
                    post, dof = var0, np.inf
                else:
                    post, dof = (nu0 * var0 + ss) / (nu0 + k - 1), nu0 + k - 1
                return v.mean(), np.sqrt(post * (1 + 1 / k)), dof

            phi = target[i, a]
            if len(outs[i]):
                m, s, dof = predictive(outs[i], p_out)
                off.append(norm.logcdf((phi - m) / s) if np.isinf(dof) else student_t.logcdf(phi, dof, m, s))
                if online and len(ins[i]):
                    mi, si, dofi = predictive(ins[i], p_in)
                    lin = norm.logpdf(phi, mi, si) if np.isinf(dofi) else student_t.logpdf(phi, dofi, mi, si)
                    lout = norm.logpdf(phi, m, s) if np.isinf(dof) else student_t.logpdf(phi, dof, m, s)
                    llr.append(lin - lout)
        if off:
            scores[i] = np.mean(llr) if online and len(llr) == n_queries else np.mean(off)
    return scores


@pytest.mark.parametrize("online", [True, False])
@pytest.mark.parametrize("prior_strength", [None, 3.0])
def test_shrunk_lira_matches_a_slow_per_sample_loop(online, prior_strength):
    # unbalanced keep over 5 models: samples with 0, 1, ... models on a side, two queries
    target, ref, keep, _ = _world(3, 5, n=60, hetero=True, balanced=False, n_queries=2)
    keep[:, 0] = True   # a sample with no OUT model: tested against the pooled OUT statistics
    keep[:, 1] = False  # no IN model: online falls back to its offline score
    fast = lira_shrunk_scores(target, ref, keep, online=online, prior_strength=prior_strength)
    slow = _slow_shrunk(target, ref, keep, online=online, prior_strength=prior_strength)
    assert fast.dtype == np.float64 and fast.shape == (60,)
    no_out = keep.all(axis=0)  # tested against the pooled OUT statistics, as lira_scores does
    assert no_out[0] and not no_out.all()
    np.testing.assert_allclose(fast[~no_out], slow[~no_out], rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(fast[no_out], lira_scores(target, ref, keep, online=False)[no_out])
    assert np.all(fast[no_out] < 0)


@pytest.mark.parametrize("online", [True, False])
def test_shrunk_lira_slow_loop_when_a_side_has_no_spread(online):
    # 3 models in a balanced layout: 1 IN and 2 OUT per sample, so the IN side has no spread
    # and borrows the OUT prior (online); 2 models: 1 and 1, neither side has spread
    for n_models in (3, 2):
        target, ref, keep, _ = _world(4, n_models, n=50)
        fast = lira_shrunk_scores(target, ref, keep, online=online)
        slow = _slow_shrunk(target, ref, keep, online=online)
        np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-9)


def test_prior_estimate_recovers_a_known_prior():
    rng = np.random.default_rng(0)
    for nu0, d in ((4.0, 3.0), (10.0, 7.0)):
        sigma2 = nu0 * 2.0 / rng.chisquare(nu0, 40_000)           # Scaled-Inv-χ²(ν0, σ0² = 2)
        s2 = sigma2 * rng.chisquare(d, 40_000) / d
        est_nu, est_var = estimate_prior(s2, np.full(40_000, d))
        assert est_nu == pytest.approx(nu0, rel=0.15)
        assert est_var == pytest.approx(2.0, rel=0.05)
    # no spread beyond sampling: ν0 = ∞, σ0² the common variance
    s2 = 3.0 * rng.chisquare(5, 40_000) / 5
    nu, var = estimate_prior(s2, np.full(40_000, 5.0))
    assert nu == np.inf or nu > 500
    assert var == pytest.approx(3.0, rel=0.02)


def test_shrunk_lira_limit_small_prior_strength_is_per_sample_lira():
    """ν0 → 0: σ̃² = SS/(n − 1), t with n − 1 d.o.f.; with many references that is
    per-sample LiRA (SS/n, Gaussian), and the gap closes as the references grow."""
    gaps = []
    for n_models in (32, 512):
        target, ref, keep, member = _world(5, n_models, n=400, hetero=True, n_queries=2)
        shrunk = lira_shrunk_scores(target, ref, keep, prior_strength=1e-9)
        lira = lira_scores(target, ref, keep)
        # typical gap; far in the tails (targets tens of σ from a narrow side) t and Gaussian
        # log-densities converge slowly, which changes no ranking (Spearman below)
        gaps.append(np.median(np.abs(shrunk - lira)) / np.std(lira))
        if n_models == 512:
            assert spearmanr(shrunk, lira)[0] > 0.9999
            assert abs(auc_score(member, shrunk) - auc_score(member, lira)) < 1e-3
            # offline: log CDFs agree in the body; far in the tail t_255 and Φ part (log CDF
            # −46 against −66 at z ≈ −11), which leaves the ranking as it is
            off = lira_shrunk_scores(target, ref, keep, online=False, prior_strength=1e-9)
            off_lira = lira_scores(target, ref, keep, online=False)
            body = off_lira > -5
            np.testing.assert_allclose(off[body], off_lira[body], rtol=0.05, atol=0.02)
            assert spearmanr(off, off_lira)[0] > 0.9999
    assert gaps[1] < 1e-3 and gaps[1] < gaps[0] / 4


def test_shrunk_lira_limit_infinite_prior_strength_is_global_lira():
    """ν0 = ∞: the Gaussian with the common variance σ0² (1 + 1/n_i), exactly; ν0 = 1e12 the
    same to rounding; with many references, global-variance LiRA."""
    target, ref, keep, member = _world(6, 8, n=500)
    inf = lira_shrunk_scores(target, ref, keep, prior_strength=np.inf)
    # by hand: each sample has 4 IN and 4 OUT models (d = 3)
    expected = np.zeros(500)
    for side_keep, sign in ((keep, 1.0), (~keep, -1.0)):
        vals = np.stack([ref[side_keep[:, i], i, 0] for i in range(500)])         # (n, 4)
        e = np.log(vals.var(axis=1, ddof=1)) - digamma(1.5) + np.log(1.5)
        sd = np.sqrt(np.exp(e.mean()) * (1 + 1 / 4))
        expected += sign * norm.logpdf(target[:, 0], vals.mean(axis=1), sd)
    np.testing.assert_allclose(inf, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lira_shrunk_scores(target, ref, keep, prior_strength=1e12), inf, rtol=1e-6, atol=1e-9)

    target, ref, keep, member = _world(7, 512, n=400, n_queries=2)
    shrunk = lira_shrunk_scores(target, ref, keep, prior_strength=np.inf)
    lira = lira_scores(target, ref, keep, global_variance=True)
    np.testing.assert_allclose(shrunk, lira, rtol=0.02, atol=0.01)
    off = lira_shrunk_scores(target, ref, keep, online=False, prior_strength=np.inf)
    np.testing.assert_allclose(off, lira_scores(target, ref, keep, online=False, global_variance=True),
                               rtol=0.02, atol=0.01)


def test_shrunk_lira_beats_per_sample_lira_with_few_references():
    """Common variance, own means: 2-4 references. Per-sample variances from 1-2 models per
    side are useless; shrinking them to the common one is as good as global-variance LiRA."""
    table = {m: _aucs(11, m) for m in (1, 2, 3, 4)}
    for m, row in table.items():
        print(m, {f"{k[0]}/{k[1]}": round(v, 4) for k, v in row.items()})
    for m in (2, 3, 4):
        row = table[m]
        for tag in ("online", "offline"):
            assert row["shrunk", tag] >= row["global", tag] - 0.005, (m, tag)
            assert row["shrunk", tag] >= row["per-sample", tag] - 0.002, (m, tag)
    # strictly better where per-sample LiRA has something (bad) to estimate
    assert table[3]["shrunk", "online"] > table[3]["per-sample", "online"] + 0.05
    assert table[4]["shrunk", "online"] > table[4]["per-sample", "online"] + 0.05
    for m in (3, 4):  # (at 2, one OUT model per sample: no per-sample variance to get wrong)
        assert table[m]["shrunk", "offline"] > table[m]["per-sample", "offline"] + 0.01
    # one reference: every sample has one side only, the samples IN it are tested against the
    # pooled OUT statistics; the attack is the offline one, well above chance (0.64 here)
    for tag in ("online", "offline"):
        assert 0.6 < table[1]["shrunk", tag] < 0.7
        assert abs(table[1]["shrunk", tag] - table[1]["global", tag]) < 0.02


def test_shrunk_lira_approaches_per_sample_lira_when_variances_differ():
    """Per-sample variances spread over a factor 625: with 64 references the estimated prior
    is weak and the attack is per-sample LiRA, far better than one global variance."""
    row = _aucs(12, 64, hetero=True)
    print({f"{k[0]}/{k[1]}": round(v, 4) for k, v in row.items()})
    assert abs(row["shrunk", "online"] - row["per-sample", "online"]) < 0.01
    assert row["shrunk", "online"] > row["global", "online"] + 0.1
    few = _aucs(12, 4, hetero=True)
    print({f"{k[0]}/{k[1]}": round(v, 4) for k, v in few.items()})
    assert few["shrunk", "online"] > max(few["per-sample", "online"], few["global", "online"]) + 0.02


def test_shrunk_lira_inputs():
    target, ref, keep, _ = _world(13, 1, n=200)
    for online in (True, False):
        s = lira_shrunk_scores(target, ref, keep, online=online)
        assert np.all(np.isfinite(s))
        # one query: (n,) and (M, n) accepted
        np.testing.assert_array_equal(s, lira_shrunk_scores(target[:, 0], ref[:, :, 0], keep, online=online))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="prior_strength"):
            lira_shrunk_scores(target, ref, keep, prior_strength=bad)
    with pytest.raises(ValueError, match="ref_keep"):
        lira_shrunk_scores(target, ref, keep[:, :10])
    # degenerate: every reference gives the same φ; still finite
    s = lira_shrunk_scores(target, np.zeros_like(ref), keep)
    assert np.all(np.isfinite(s))


# ------------------------------------------------------------------ quantile regression

D, NOISE, SHIFT = 20, 0.5, 0.7


def _qdata(rng, n, member, w):
    x = rng.normal(size=(n, 4, 5)).astype(np.float32)            # "images", flattened inside
    y = rng.integers(0, 3, n)
    mean = x.reshape(n, -1) @ w + 0.3 * y
    s = mean + NOISE * rng.normal(size=n) + SHIFT * member
    return x, y, s, mean


@pytest.fixture(scope="module")
def quantile_world():
    rng = np.random.default_rng(0)
    w = rng.normal(size=D) * 2 / np.sqrt(D)
    public = _qdata(rng, 3000, np.zeros(3000), w)                 # non-members no model saw
    member = rng.random(4000) < 0.5
    audit = _qdata(rng, 4000, member.astype(float), w)
    attack = QuantileAttack(seed=0).fit(*public[:3])
    return attack, public, audit, member


def test_quantile_attack_recovers_the_nonmember_score_and_is_near_optimal(quantile_world):
    attack, _, (x, y, s, mean), member = quantile_world
    mu, sigma = attack.predict(x, y)
    assert np.corrcoef(mu, mean)[0, 1] > 0.9
    assert np.median(sigma) == pytest.approx(NOISE, rel=0.25)
    scores = attack.scores(x, y, s)
    assert scores.dtype == np.float64 and np.all(np.isfinite(scores))
    auc_q, auc_plain = auc_score(member, scores), auc_score(member, s)
    best = norm.cdf(SHIFT / NOISE / np.sqrt(2))   # mean shift, common σ: the Neyman-Pearson AUC
    print(f"quantile AUC {auc_q:.4f}, plain score {auc_plain:.4f}, best {best:.4f}, "
          f"best epoch {attack.best_epoch_} of {len(attack.history_)}")
    assert auc_q > auc_plain + 0.15
    assert auc_q > best - 0.03


def test_quantile_attack_is_deterministic(quantile_world):
    attack, public, (x, y, s, _), _ = quantile_world
    before = torch.get_num_threads()
    again = QuantileAttack(seed=0).fit(*public[:3])
    np.testing.assert_array_equal(again.scores(x, y, s), attack.scores(x, y, s))
    assert torch.get_num_threads() == before   # fit ran on 1 thread and restored the setting
    other = QuantileAttack(seed=1, epochs=2).fit(*public[:3])
    assert not np.array_equal(other.scores(x, y, s), attack.scores(x, y, s))


def test_quantile_attack_bad_input(quantile_world):
    attack, (xp, yp, sp, _), (x, y, s, _), _ = quantile_world
    cases = [
        ((xp[:50], yp[:50], sp[:50]), "at least 100 public"),
        ((xp, np.zeros_like(yp), sp), "single class"),
        ((xp, yp, np.where(np.arange(sp.size) == 7, np.nan, sp)), "scores_public must be finite"),
        ((np.where(np.arange(xp.shape[0])[:, None, None] == 3, np.inf, xp), yp, sp), "x_public must be finite"),
        ((xp, yp[:-1], sp), r"y_public must have shape \(3000,\)"),
        ((xp, yp + 0.5, sp), "integer class labels"),
        ((xp, yp, np.full(sp.size, 2.0)), "all equal"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            QuantileAttack(seed=0, epochs=1).fit(*args)
    with pytest.raises(ValueError, match="did not converge"):
        QuantileAttack(seed=0, lr=1e30, epochs=3).fit(xp, yp, sp * 1e30)
    with pytest.raises(ValueError, match="not fitted"):
        QuantileAttack().scores(x, y, s)
    with pytest.raises(ValueError, match="target_scores must be finite"):
        attack.scores(x, y, np.where(np.arange(s.size) == 0, np.inf, s))
    with pytest.raises(ValueError, match="features per sample"):
        attack.scores(x[:, :2], y, s)
    with pytest.raises(ValueError, match="outside the fitted classes"):
        attack.scores(x, np.full(y.size, 5), s)
