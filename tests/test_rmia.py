"""RMIA (offline): sorted/searchsorted scores against the direct pairwise definition."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from privaudit.attacks.rmia import PR_FLOOR, calibrate_a, rmia_scores


def naive_rmia_scores(p_target_x, p_ref_x, p_target_z, p_ref_z, *, a=1.0, gamma=1.0, ref_keep_x=None):
    """The paper's definition, term by term: O(n·Z) pairs, Python loops over models."""
    def pr(p_ref, keep):
        n_models, n = p_ref.shape
        out = np.empty(n)
        for i in range(n):
            vals = [p_ref[m, i] for m in range(n_models) if keep is None or not keep[m, i]]
            pr_out = sum(vals) / len(vals)
            out[i] = max(0.5 * ((1 + a) * pr_out + (1 - a)), PR_FLOOR)
        return out

    lr_x = p_target_x / pr(p_ref_x, ref_keep_x)
    lr_z = p_target_z / pr(p_ref_z, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = lr_x[:, None] / lr_z[None, :]
    hits = (ratio >= gamma) | (lr_z[None, :] == 0)  # LR(z) = 0: every x beats it
    return hits.mean(axis=1)


def _random(rng, n_models, n, n_pop):
    return (rng.random(n), rng.random((n_models, n)), rng.random(n_pop), rng.random((n_models, n_pop)))


@pytest.mark.parametrize("a", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("gamma", [1.0, 1.7, 2.0])
def test_fast_equals_naive_on_random_data(a, gamma):
    rng = np.random.default_rng(0)
    px, prx, pz, prz = _random(rng, 3, 300, 400)
    fast = rmia_scores(px, prx, pz, prz, a=a, gamma=gamma)
    np.testing.assert_array_equal(fast, naive_rmia_scores(px, prx, pz, prz, a=a, gamma=gamma))
    assert np.all((fast >= 0) & (fast <= 1))
    keep = rng.random((3, 300)) < 0.4
    keep[0] = False  # every sample keeps at least one OUT model
    fast = rmia_scores(px, prx, pz, prz, a=a, gamma=gamma, ref_keep_x=keep)
    np.testing.assert_array_equal(fast, naive_rmia_scores(px, prx, pz, prz, a=a, gamma=gamma, ref_keep_x=keep))


@pytest.mark.parametrize("gamma", [1.0, 2.0, 4.0])
def test_fast_equals_naive_with_ties(gamma):
    """Dyadic probabilities and Pr = 1/2 exactly: LR = 2p is exact and ties abound."""
    rng = np.random.default_rng(1)
    px = rng.integers(0, 9, 500) / 8.0
    pz = rng.integers(0, 9, 300) / 8.0
    prx, prz = np.full((2, 500), 0.5), np.full((2, 300), 0.5)
    fast = rmia_scores(px, prx, pz, prz, a=1.0, gamma=gamma)
    np.testing.assert_array_equal(fast, naive_rmia_scores(px, prx, pz, prz, a=1.0, gamma=gamma))


def test_hand_computed_example():
    # Pr = 1/2 everywhere (a = 1), so LR = 2p: LR(z) = 0.5, 1, 1, 2; LR(x) = 1, 2, 0.5
    pz = np.array([0.25, 0.5, 0.5, 1.0])
    px = np.array([0.5, 1.0, 0.25])
    half = lambda k: np.full((1, k), 0.5)  # noqa: E731
    np.testing.assert_array_equal(rmia_scores(px, half(3), pz, half(4)), [3 / 4, 1.0, 1 / 4])
    np.testing.assert_array_equal(rmia_scores(px, half(3), pz, half(4), gamma=2.0), [1 / 4, 3 / 4, 0.0])
    # a = 0: Pr = (Pr_OUT + 1) / 2
    s = rmia_scores(np.array([0.6]), np.array([[0.2]]), np.array([0.6, 0.3]), np.array([[0.6, 0.2]]), a=0.0)
    # LR(x) = 0.6/0.6 = 1; LR(z) = 0.6/0.8 = 0.75 and 0.3/0.6 = 0.5
    assert s[0] == 1.0


def test_linear_memory_and_time_for_large_inputs():
    rng = np.random.default_rng(2)
    n = 200_000
    args = _random(rng, 2, n, n)
    tracemalloc.start()
    start = time.perf_counter()
    scores = rmia_scores(*args, a=0.5, gamma=1.5)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert scores.shape == (n,) and np.all((scores >= 0) & (scores <= 1))
    assert peak < 64 * 2**20  # an n x Z bool matrix alone would be 40 GB
    assert elapsed < 3.0


def _world(seed, n_models=4, n=4000, boost=1.5, member_effect=True):
    """Per-sample difficulty q; OUT models give q·noise, IN models (and target members) boost·q."""
    rng = np.random.default_rng(seed)
    q = np.exp(rng.uniform(np.log(0.01), np.log(0.6), n))
    keep = rng.random((n_models, n)) < 0.5
    noise = np.exp(rng.normal(0, 0.1, (n_models + 1, n)))
    p = np.clip(np.where(keep, boost * q, q) * noise[:-1], 0, 1)
    member = rng.random(n) < 0.5
    p_t = np.clip(np.where(member & member_effect, boost * q, q) * noise[-1], 0, 1)
    return rng, q, keep, p, member, p_t


def test_target_with_member_effect_has_auc_above_half_and_exchangeable_does_not():
    rng, q, keep, p, member, p_t = _world(3)
    # audited samples are OUT for all references; population: fresh non-members
    ref_x = np.clip(q * np.exp(rng.normal(0, 0.1, (4, q.size))), 0, 1)
    qz = np.exp(rng.uniform(np.log(0.01), np.log(0.6), 3000))
    ref_z = np.clip(qz * np.exp(rng.normal(0, 0.1, (4, qz.size))), 0, 1)
    p_z = np.clip(qz * np.exp(rng.normal(0, 0.1, qz.size)), 0, 1)
    s = rmia_scores(p_t, ref_x, p_z, ref_z)
    assert roc_auc_score(member, s) > 0.9
    # exchangeable: the target treats members like non-members
    p_same = np.clip(q * np.exp(rng.normal(0, 0.1, q.size)), 0, 1)
    s0 = rmia_scores(p_same, ref_x, p_z, ref_z)
    assert roc_auc_score(member, s0) == pytest.approx(0.5, abs=0.03)
    # reference models that did train on some samples are masked out of Pr_OUT
    s_keep = rmia_scores(p_t, p, p_z, ref_z, ref_keep_x=keep & (np.arange(4)[:, None] > 0))
    assert roc_auc_score(member, s_keep) > 0.9


def test_calibrate_a_picks_known_answers():
    # references carry the sample's difficulty exactly (member = 1.5 x OUT): trust them fully
    _, _, keep, p, _, _ = _world(4, n=1000)
    assert calibrate_a(p, keep) == 1.0
    grid = np.array([0.0, 0.25, 0.5, 1.0])
    assert calibrate_a(p, keep, grid=grid, pseudo_targets=[0, 1]) == 1.0
    # references are noise (independent of the sample): Pr should ignore them, a = 0
    rng = np.random.default_rng(5)
    keep = rng.random((4, 1000)) < 0.5
    noise = np.where(keep, rng.uniform(0.3, 1.0, keep.shape), rng.uniform(0.0, 0.7, keep.shape))
    assert calibrate_a(noise, keep) == 0.0
    a = calibrate_a(noise, keep, grid=grid, gamma=2.0)
    assert a in grid


def test_calibrate_a_with_a_separate_population():
    rng, _, keep, p, _, _ = _world(6, n=1000)
    qz = np.exp(rng.uniform(np.log(0.01), np.log(0.6), 500))
    pop = np.clip(qz * np.exp(rng.normal(0, 0.1, (4, qz.size))), 0, 1)
    assert calibrate_a(p, keep, p_ref_z_by_model=pop) == 1.0


def test_bad_inputs_raise():
    rng = np.random.default_rng(7)
    px, prx, pz, prz = _random(rng, 2, 10, 8)
    with pytest.raises(ValueError, match="p_ref_x"):
        rmia_scores(px, prx[:, :9], pz, prz)
    with pytest.raises(ValueError, match="p_ref_z"):
        rmia_scores(px, prx, pz, prz.T)
    with pytest.raises(ValueError, match="p_target_x"):
        rmia_scores(px[:, None], prx, pz, prz)
    with pytest.raises(ValueError, match="probabilities"):
        rmia_scores(px + 1, prx, pz, prz)
    with pytest.raises(ValueError, match=r"a must"):
        rmia_scores(px, prx, pz, prz, a=1.5)
    with pytest.raises(ValueError, match="gamma"):
        rmia_scores(px, prx, pz, prz, gamma=0.0)
    with pytest.raises(ValueError, match="no sample has an OUT reference model"):
        rmia_scores(px, prx, pz, prz, ref_keep_x=np.ones((2, 10), bool))
    # a sample every reference trained on takes the mean over all references (one reference: half the samples)
    keep = np.zeros((2, 10), bool)
    keep[:, 0] = True
    keep[0, 1] = True
    mixed = rmia_scores(px, prx, pz, prz, ref_keep_x=keep, a=1.0)
    online = rmia_scores(px, prx, pz, prz, a=1.0)  # no keep: the mean over all references
    assert mixed[0] == online[0] and np.all(np.isfinite(mixed))
    with pytest.raises(ValueError, match="ref_keep_x"):
        rmia_scores(px, prx, pz, prz, ref_keep_x=np.ones((2, 9), bool))
    with pytest.raises(ValueError, match="at least 2 models"):
        calibrate_a(prx[:1], np.zeros((1, 10), bool))
    with pytest.raises(ValueError, match="keep"):
        calibrate_a(prx, np.zeros((2, 9), bool))
