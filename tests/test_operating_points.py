"""Operating points (privaudit.analysis.operating, docs/methods/d-attacks.md D.9) against closed forms,
slow reference loops and simulation.

Gaussian scores: members N(d, 1), non-members N(0, 1); at a threshold set for FPR f the TPR is
1 − Φ(Φ⁻¹(1 − f) − d). The coverage rates the assertions hold are seeded, so they are fixed
numbers; the bounds leave room for an honest procedure (a 95 % interval covers ≥ 95 %).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from privaudit.analysis.operating import (
    LOW_FPR,
    TOO_FEW,
    allowed_false_positives,
    calibrated_threshold,
    can_state_fpr,
    expected_jaccard,
    min_non_members,
    ppv_at_prior,
    ppv_interval,
    top_fraction_jaccard,
    tpr_at_calibrated_fpr,
    tpr_at_fpr_checked,
    tpr_at_low_fprs,
)


def gaussian(rng, n_pos, n_neg, d):
    labels = np.r_[np.ones(n_pos, dtype=int), np.zeros(n_neg, dtype=int)]
    return labels, rng.normal(size=labels.size) + d * labels


# ---------------------------------------------------------------- TPR at a calibrated FPR


@pytest.mark.slow
def test_calibrated_fpr_and_tpr_on_gaussian_scores_over_200_replicates():
    f, d = 0.01, 2.0
    closed_form = norm.sf(norm.isf(f) - d)  # 1 − Φ(Φ⁻¹(1 − f) − d) = 0.372
    fpr_covered = tpr_covered = 0
    fprs, tprs = [], []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        labels, scores = gaussian(rng, 2000, 5000, d)
        calib = rng.normal(size=200_000)                  # independent calibration non-members
        op = tpr_at_calibrated_fpr(labels, scores, None, calib, f)
        assert op.status == "ok" and op.calibrated and op.reason is None
        assert op.calib_fp == 2000 and op.calib_fpr == pytest.approx(f)
        fpr_covered += op.fpr_lo <= f <= op.fpr_hi
        tpr_covered += op.tpr_lo <= closed_form <= op.tpr_hi
        fprs.append(op.fpr_achieved)
        tprs.append(op.tpr)
    assert fpr_covered >= 180, fpr_covered              # measured: 186 / 200 (93 %)
    assert tpr_covered >= 180, tpr_covered              # measured: 183 / 200 (91.5 %)
    # (Below 95 %: the interval is for the TPR at the threshold the calibration data set, which
    # scatters around the exact 1 % quantile; the closed form is the TPR at that quantile.)
    # The means over replicates: within 4 standard errors of the target and the closed form.
    assert abs(np.mean(fprs) - f) < 4 * np.std(fprs) / math.sqrt(200)
    assert abs(np.mean(tprs) - closed_form) < 4 * np.std(tprs) / math.sqrt(200)


def slow_calibrated(labels, scores, calib_labels, calib_scores, f):
    """The definition, loop by loop: the smallest threshold among the calibration non-member
    scores (and +inf) with calibration FPR ≤ f; then counts on the evaluated data."""
    neg = [s for lab, s in zip(calib_labels, calib_scores) if lab == 0]
    for t in sorted(set(neg)) + [math.inf]:
        fp_cal = sum(1 for s in neg if s >= t)
        if fp_cal / len(neg) <= f + 1e-12:
            break
    tp = sum(1 for lab, s in zip(labels, scores) if lab == 1 and s >= t)
    fp = sum(1 for lab, s in zip(labels, scores) if lab == 0 and s >= t)
    return t, fp_cal, tp, fp


@pytest.mark.parametrize("seed", range(40))
def test_calibrated_fpr_matches_a_slow_loop(seed):
    rng = np.random.default_rng(1000 + seed)
    n_cal = int(rng.integers(100, 400))
    f = float(rng.choice([0.01, 0.02, 0.05, 0.1, 0.3]))
    digits = int(rng.integers(0, 3))                    # rounded scores: many ties
    calib_labels = rng.integers(0, 2, n_cal)
    calib_scores = np.round(rng.normal(size=n_cal) + calib_labels, digits)
    labels, scores = gaussian(rng, int(rng.integers(5, 60)), 120, 1.0)
    scores = np.round(scores, digits)
    n_neg_cal = int(np.sum(calib_labels == 0))
    op = tpr_at_calibrated_fpr(labels, scores, calib_labels, calib_scores, f)
    if n_neg_cal * f < 1 - 1e-9 or 120 * f < 1 - 1e-9:
        assert op.status == TOO_FEW and op.tpr is None
        return
    t, fp_cal, tp, fp = slow_calibrated(labels, scores, calib_labels, calib_scores, f)
    assert op.status == "ok"
    assert op.threshold == t and op.calib_fp == fp_cal
    assert (op.tp, op.fp) == (tp, fp)
    assert op.tpr == tp / labels.sum() and op.fpr_achieved == fp / 120
    # Only the calibration non-members matter: the same result from them alone.
    alone = tpr_at_calibrated_fpr(labels, scores, None, calib_scores[calib_labels == 0], f)
    assert alone == op


def test_calibrated_threshold_is_the_kth_largest_without_ties_and_skips_ties():
    scores = np.arange(1000, dtype=float)               # 0..999
    assert calibrated_threshold(scores, 0.01) == (990.0, 10)   # the 10th largest
    assert calibrated_threshold(scores, 0.001) == (999.0, 1)
    tied = np.r_[np.zeros(990), np.full(10, 5.0)]        # the top 10 tie: none may be flagged at 0.9 %
    assert calibrated_threshold(tied, 0.009) == (math.inf, 0)
    assert calibrated_threshold(tied, 0.01) == (5.0, 10)


def test_too_few_non_members_status_and_reason():
    rng = np.random.default_rng(3)
    labels, scores = gaussian(rng, 500, 5000, 1.0)
    op = tpr_at_calibrated_fpr(labels, scores, None, rng.normal(size=999), 0.001)
    assert op.status == TOO_FEW == "too few non-members"
    assert op.tpr is None and op.tpr_lo is None and op.fpr_achieved is None and op.threshold is None
    assert op.reason.startswith("calibration data: 999 non-members, need at least 1,000 to state FPR 0.1 %")
    assert "\n" not in op.reason
    d = op.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["tpr"] is None and d["ppv_at_1pct_prior"] is None and op.ppv(0.01) is None
    ok = tpr_at_calibrated_fpr(labels, scores, None, rng.normal(size=1000), 0.001)
    assert ok.status == "ok" and ok.calib_fp == 1 and ok.tpr is not None
    # The evaluated data need the same: 5,000 non-members cannot state 0.01 %.
    ev = tpr_at_calibrated_fpr(labels, scores, None, rng.normal(size=20_000), 1e-4)
    assert ev.status == TOO_FEW and ev.tpr is None and ev.threshold is not None
    assert ev.reason == ("evaluated data: 5,000 non-members, need at least 10,000 to state FPR 0.01 % "
                         "(at least 1 false positive at that FPR)")
    both = tpr_at_calibrated_fpr(labels[:900], scores[:900], None, rng.normal(size=50), 0.01,
                                 min_false_positives=10)
    assert both.reason == ("calibration data: 50 non-members, need at least 1,000 to state FPR 1 % "
                           "(at least 10 false positives at that FPR); evaluated data: 400 non-members, "
                           "need at least 1,000 to state FPR 1 % (at least 10 false positives at that FPR)")
    # A stricter rule on request: at least 10 false positives (n >= 10/f).
    strict = tpr_at_calibrated_fpr(labels, scores, None, rng.normal(size=9_999), 0.001, min_false_positives=10)
    assert strict.status == TOO_FEW and "need at least 10,000" in strict.reason


def test_ok_point_is_json_ready_and_carries_ppv():
    rng = np.random.default_rng(4)
    labels, scores = gaussian(rng, 400, 2000, 2.0)
    op = tpr_at_calibrated_fpr(labels, scores, None, rng.normal(size=5000), 0.01)
    d = op.to_dict()
    json.dumps(d, allow_nan=False)
    for prior, key in ((0.01, "ppv_at_1pct_prior"), (0.1, "ppv_at_10pct_prior")):
        ref = ppv_interval(op.tp, 400, op.fp, 2000, prior)
        assert d[key] == ref["ppv"] and d[key + "_lo"] == ref["lo"] and d[key + "_hi"] == ref["hi"]


def test_counting_rule_low_fprs():
    assert min_non_members(0.01) == 100 and min_non_members(0.001) == 1000 and min_non_members(1e-4) == 10_000
    assert min_non_members(0.001, 10) == 10_000
    for f in (0.01, 0.001, 1e-4, 0.07, 0.003):
        n = min_non_members(f)
        assert allowed_false_positives(n, f) == 1 and allowed_false_positives(n - 1, f) == 0
        assert can_state_fpr(n, f) and not can_state_fpr(n - 1, f)
    # 10,000 non-members state 0.01 % only as <= 1 false positive; 9,999 cannot.
    rng = np.random.default_rng(5)
    labels, scores = gaussian(rng, 1000, 10_000, 3.0)
    pts = tpr_at_low_fprs(labels, scores, None, rng.normal(size=10_000))
    assert list(pts) == list(LOW_FPR) == ["tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "tpr_at_0p01pct_fpr"]
    assert all(p.status == "ok" for p in pts.values())
    assert pts["tpr_at_0p01pct_fpr"].calib_fp == 1
    short = tpr_at_low_fprs(labels[:-1], scores[:-1], None, rng.normal(size=10_000))
    assert short["tpr_at_0p1pct_fpr"].status == "ok"
    assert short["tpr_at_0p01pct_fpr"].status == TOO_FEW
    assert "9,999 non-members, need at least 10,000" in short["tpr_at_0p01pct_fpr"].reason


def test_same_data_points_follow_the_same_rule():
    rng = np.random.default_rng(6)
    labels, scores = gaussian(rng, 300, 1500, 2.0)
    pts = tpr_at_low_fprs(labels, scores)
    assert [p.status for p in pts.values()] == ["ok", "ok", TOO_FEW]
    p = pts["tpr_at_0p1pct_fpr"]
    assert not p.calibrated and p.fp <= 1 and p.fpr_achieved <= 0.001
    p1 = tpr_at_fpr_checked(labels, scores, 0.01)
    assert p1.fp <= 15 and p1.tpr_lo <= p1.tpr <= p1.tpr_hi


# ---------------------------------------------------------------- PPV


def test_ppv_closed_forms():
    assert ppv_at_prior(1.0, 0.0, 0.5) == 1.0
    assert ppv_at_prior(0.3, 0.3, 0.01) == pytest.approx(0.01, rel=1e-12)
    assert ppv_at_prior(0.5, 0.1, 0.1) == pytest.approx(0.05 / (0.05 + 0.09))
    assert ppv_at_prior(0.0, 0.2, 0.1) == 0.0
    assert ppv_at_prior(0.0, 0.0, 0.1) is None          # nothing flagged: undefined, not NaN
    v = ppv_at_prior(np.array([0.0, 1.0, 0.4, 0.2]), np.array([0.0, 0.0, 0.4, 0.1]), np.array([0.1, 0.5, 0.01, 0.5]))
    assert v.tolist() == [None, 1.0, pytest.approx(0.01), pytest.approx(2 / 3)]
    assert not np.any(np.isnan(v.data))
    with pytest.raises(ValueError):
        ppv_at_prior(0.5, 0.5, 0.0)
    with pytest.raises(ValueError):
        ppv_at_prior(1.5, 0.5, 0.5)


def test_ppv_interval_contains_the_estimate_and_handles_nothing_flagged():
    for tp, n_pos, fp, n_neg in itertools.product((0, 3, 50), (50,), (0, 1, 20), (1000,)):
        for prior in (0.01, 0.1, 0.5):
            r = ppv_interval(tp, n_pos, fp, n_neg, prior)
            assert 0.0 <= r["lo"] <= r["hi"] <= 1.0
            if tp == fp == 0:
                assert r["ppv"] is None and r["lo"] == 0.0 and r["hi"] == 1.0
            else:
                assert r["lo"] <= r["ppv"] <= r["hi"]


@pytest.mark.parametrize("tpr, fpr, prior", [(0.3, 0.01, 0.01), (0.1, 0.002, 0.1)])
def test_ppv_interval_coverage_over_400_replicates(tpr, fpr, prior):
    rng = np.random.default_rng(7)
    true = ppv_at_prior(tpr, fpr, prior)
    n_pos, n_neg = 500, 5000
    tps, fps = rng.binomial(n_pos, tpr, 400), rng.binomial(n_neg, fpr, 400)
    intervals = [ppv_interval(int(a), n_pos, int(b), n_neg, prior) for a, b in zip(tps, fps)]
    covered = sum(r["lo"] <= true <= r["hi"] for r in intervals)
    assert covered >= 380, covered                      # measured: 398 and 399 of 400


# ---------------------------------------------------------------- Jaccard stability


def test_identical_rankings_give_one():
    rng = np.random.default_rng(8)
    row = rng.normal(size=500)
    members = rng.random(500) < 0.5
    res = top_fraction_jaccard(np.tile(row, (4, 1)), np.tile(members, (4, 1)), fraction=0.05)
    assert res.mean == 1.0 and len(res.pairs) == 6 and all(p["jaccard"] == 1.0 for p in res.pairs)
    assert set(res.sizes) == {math.ceil(0.05 * members.sum())}
    json.dumps(res.to_dict(), allow_nan=False)


def test_top_sets_follow_the_tie_rule_and_the_members_of_each_run():
    scores = np.array([[5.0, 5.0, 5.0, 1.0, 9.0], [0.0, 3.0, 3.0, 3.0, 9.0]])
    members = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0]])
    res = top_fraction_jaccard(scores, members, fraction=0.5)    # k = 2 of 4 members each
    assert res.top == ((0, 1), (1, 2))                   # ties by sample index; sample 4 is no member
    assert res.pairs[0]["intersection"] == 1 and res.mean == pytest.approx(1 / 3)
    assert top_fraction_jaccard(np.zeros((2, 300)), np.ones((2, 300)), 0.01).sizes == (3, 3)


def test_independent_scores_are_near_chance():
    rng = np.random.default_rng(9)
    diffs = []
    for _ in range(300):
        members = rng.random((3, 2000)) < 0.5                # members differ per seed
        res = top_fraction_jaccard(rng.normal(size=(3, 2000)), members, fraction=0.02)
        diffs.append(res.mean - res.chance_mean)
    se = np.std(diffs) / math.sqrt(len(diffs))
    assert abs(np.mean(diffs)) < 4 * se, (np.mean(diffs), se)


@pytest.mark.parametrize("n_i, n_j, c, k_i, k_j", [(200, 200, 200, 10, 10), (50, 60, 30, 5, 8), (40, 40, 12, 20, 15)])
def test_expected_jaccard_exact_against_monte_carlo(n_i, n_j, c, k_i, k_j):
    rng = np.random.default_rng(10)
    reps = 40_000
    # Pool i is items 0..n_i−1, pool j is items n_i−c .. n_i−c+n_j−1: c items in common.
    a = np.argsort(rng.random((reps, n_i)), axis=1)[:, :k_i]
    b = np.argsort(rng.random((reps, n_j)), axis=1)[:, :k_j] + (n_i - c)
    in_a = np.zeros((reps, n_i + n_j), dtype=bool)
    np.put_along_axis(in_a, a, True, axis=1)
    inter = np.take_along_axis(in_a, b, axis=1).sum(axis=1)
    jac = inter / (k_i + k_j - inter)
    mean, sd = expected_jaccard(n_i, n_j, c, k_i, k_j)
    assert abs(jac.mean() - mean) < 4 * sd / math.sqrt(reps)
    assert jac.std() == pytest.approx(sd, rel=0.03)
    if n_i == n_j == c and k_i == k_j:                   # one common pool: E|A∩B| = k²/N
        assert inter.mean() == pytest.approx(k_i ** 2 / n_i, rel=0.03)
        e = k_i ** 2 / n_i
        assert mean == pytest.approx(e / (2 * k_i - e), rel=0.2)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        tpr_at_calibrated_fpr([0, 0], [0.1, 0.2], None, [0.0] * 200, 0.01)   # no member
    with pytest.raises(ValueError):
        tpr_at_calibrated_fpr([1, 0], [0.1, 0.2], None, [0.0] * 200, 0.0)
    with pytest.raises(ValueError):
        top_fraction_jaccard(np.zeros((1, 5)), np.ones((1, 5)))
    with pytest.raises(ValueError):
        top_fraction_jaccard(np.zeros((2, 5)), np.zeros((2, 5)))
