"""Membership-inference metrics on hand-built cases with known answers (member = positive)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.analysis.metrics import advantage, attack_metrics, roc, tpr_at_fpr

# A small example computed by hand (8 samples, 4 members):
#   scores  0.9 0.8 0.7 0.6 0.55 0.4 0.3 0.2
#   labels   1   1   0   1   0    0   1   0
HAND_SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.55, 0.4, 0.3, 0.2])
HAND_LABELS = np.array([1, 1, 0, 1, 0, 0, 1, 0])


def _slow_roc_points(labels, scores):
    """(fpr, tpr) of every threshold 'member iff score >= t', t over all scores and +inf."""
    labels, scores = np.asarray(labels), np.asarray(scores, dtype=float)
    pos, neg = labels.sum(), (1 - labels).sum()
    points = []
    for t in list(np.unique(scores)) + [np.inf]:
        pred = scores >= t
        points.append((np.sum(pred & (labels == 0)) / neg, np.sum(pred & (labels == 1)) / pos))
    return points


def _slow_tpr_at_fpr(labels, scores, max_fpr):
    return max(tpr for fpr, tpr in _slow_roc_points(labels, scores) if fpr <= max_fpr)


def _slow_auc(labels, scores):
    """P(member score > non-member score) + P(tie)/2, over all (member, non-member) pairs."""
    pos, neg = scores[labels == 1][:, None], scores[labels == 0][None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def test_hand_computed_example():
    # threshold 0.65: predicted members 0.9, 0.8, 0.7 -> TP = 2, FP = 1, FN = 2, TN = 3
    m = attack_metrics(HAND_LABELS, HAND_SCORES, threshold=0.65)
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 4)
    assert m["accuracy"] == pytest.approx(5 / 8)
    assert m["threshold"] == 0.65
    # AUC: members beat 4, 4, 3, 1 of the 4 non-members -> 12 / 16
    assert m["auc"] == pytest.approx(12 / 16)
    # advantage: max over thresholds of TPR - FPR = 0.5 (e.g. t = 0.8: 2/4 - 0)
    assert m["advantage"] == pytest.approx(0.5)
    assert m["tpr_at_1pct_fpr"] == pytest.approx(0.5) and m["tpr_at_0p1pct_fpr"] == pytest.approx(0.5)
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 0.25) == pytest.approx(0.75)   # t = 0.6
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 0.0) == pytest.approx(0.5)
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 0.5) == pytest.approx(0.75)
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 1.0) == 1.0
    # threshold inclusive: t = 0.6 predicts the 0.6 sample a member
    m06 = attack_metrics(HAND_LABELS, HAND_SCORES, threshold=0.6)
    assert (m06["precision"], m06["recall"], m06["accuracy"]) == pytest.approx((3 / 4, 3 / 4, 6 / 8))


def test_no_predicted_member_gives_precision_zero():
    m = attack_metrics(HAND_LABELS, HAND_SCORES, threshold=2.0)
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["accuracy"] == 0.5
    m = attack_metrics(HAND_LABELS, HAND_SCORES, threshold=-1.0)
    assert m["precision"] == 0.5 and m["recall"] == 1.0 and m["accuracy"] == 0.5


def test_random_scores_auc_half_within_standard_error():
    rng = np.random.default_rng(0)
    n1 = n0 = 20_000
    labels = np.r_[np.ones(n1, int), np.zeros(n0, int)]
    scores = rng.random(n1 + n0)
    m = attack_metrics(labels, scores, threshold=0.5)
    se = math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))       # null SE of the AUC (Mann-Whitney)
    assert abs(m["auc"] - 0.5) < 5 * se
    assert abs(m["accuracy"] - 0.5) < 5 * math.sqrt(0.25 / (n1 + n0))
    # at FPR 1 % a random guess finds 1 % of the members
    assert abs(m["tpr_at_1pct_fpr"] - 0.01) < 5 * math.sqrt(0.01 * 0.99 / n1)
    # the advantage of noise is of order 1/sqrt(n) (Kolmogorov-Smirnov)
    assert m["advantage"] < 2.0 * math.sqrt((n1 + n0) / (n1 * n0))


def test_perfect_separation():
    labels = np.r_[np.ones(500, int), np.zeros(1500, int)]
    scores = np.r_[np.linspace(2, 3, 500), np.linspace(-1, 1, 1500)]
    m = attack_metrics(labels, scores, threshold=1.5)
    assert m["auc"] == 1.0 and m["advantage"] == 1.0
    assert m["tpr_at_0p1pct_fpr"] == 1.0 and m["tpr_at_1pct_fpr"] == 1.0
    assert m["accuracy"] == 1.0 and m["precision"] == 1.0 and m["recall"] == 1.0
    assert tpr_at_fpr(labels, scores, 0.0) == 1.0


def test_inverted_scores():
    labels = np.r_[np.ones(500, int), np.zeros(1500, int)]
    scores = np.r_[np.linspace(-1, 1, 500), np.linspace(2, 3, 1500)]
    m = attack_metrics(labels, scores, threshold=1.5)
    assert m["auc"] == 0.0 and m["advantage"] == 0.0
    assert m["tpr_at_0p1pct_fpr"] == 0.0 and m["tpr_at_1pct_fpr"] == 0.0
    assert m["recall"] == 0.0 and m["accuracy"] == 0.0


def test_member_is_the_positive_class():
    """Members scoring higher give AUC > 1/2; swapping which side is 'member' gives 1 - AUC."""
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 400)
    scores = labels + rng.normal(0, 1.0, 400)
    m = attack_metrics(labels, scores, threshold=0.5)
    flipped = attack_metrics(1 - labels, scores, threshold=0.5)
    assert m["auc"] > 0.7
    assert flipped["auc"] == pytest.approx(1 - m["auc"])
    # recall counts members only: the fraction of label-1 samples at or above the threshold
    assert m["recall"] == pytest.approx(np.mean(scores[labels == 1] >= 0.5))
    assert m["precision"] == pytest.approx(np.mean(labels[scores >= 0.5] == 1))
    # boolean labels are the same thing
    assert attack_metrics(labels.astype(bool), scores, 0.5) == m


@pytest.mark.parametrize("seed, n, ties", [(0, 50, False), (1, 300, True), (2, 1000, False), (3, 40, True)])
def test_tpr_at_fpr_and_auc_match_slow_references(seed, n, ties):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    labels[:2] = [0, 1]
    scores = labels * 0.7 + rng.normal(0, 1, n)
    if ties:
        scores = np.round(scores, 1)
    for max_fpr in (0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0):
        assert tpr_at_fpr(labels, scores, max_fpr) == pytest.approx(_slow_tpr_at_fpr(labels, scores, max_fpr))
    m = attack_metrics(labels, scores, threshold=0.0)
    assert m["auc"] == pytest.approx(_slow_auc(labels, scores))
    assert m["tpr_at_1pct_fpr"] == pytest.approx(_slow_tpr_at_fpr(labels, scores, 0.01))
    slow_points = _slow_roc_points(labels, scores)
    assert advantage(labels, scores) == pytest.approx(max(t - f for f, t in slow_points))
    fpr, tpr = roc(labels, scores)
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    # as arrays: pytest.approx compares numeric arrays on every pytest >= 7 (not lists of tuples, pytest 9.2)
    assert np.array(sorted(zip(fpr, tpr))) == pytest.approx(np.array(sorted(slow_points)))


@pytest.mark.parametrize("seed", range(4))
def test_roc_points_and_auc_equal_scikit_learn(seed):
    """privaudit's own ROC curve is scikit-learn's ``roc_curve(drop_intermediate=False)`` bit
    for bit, its AUC ``roc_auc_score`` to float rounding, with and without ties, and the
    Clopper–Pearson bounds through ``betaincinv`` equal scipy's ``beta.ppf``."""
    from scipy.stats import beta
    from sklearn.metrics import roc_auc_score, roc_curve

    from privaudit.analysis.empirical import _cp_lower, _cp_upper
    from privaudit.analysis.metrics import auc_score, roc_points

    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(2, 500))
        labels = rng.integers(0, 2, n)
        labels[:2] = [0, 1]
        scores = np.round(labels * 0.5 + rng.normal(0, 1, n), int(rng.integers(0, 3)))  # many ties at 0 decimals
        expected = roc_curve(labels, scores, drop_intermediate=False)
        for ours, theirs in zip(roc_points(labels, scores.astype(np.float64)), expected):
            assert np.array_equal(ours, theirs)
        assert auc_score(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    n = rng.integers(1, 3000, 200).astype(float)
    k = np.floor(rng.random(200) * (n + 1))
    for level in (0.95, 0.975):
        safe = np.minimum(k, n - 1)
        assert np.array_equal(_cp_upper(k, n, level), np.where(k == n, 1.0, beta.ppf(level, safe + 1, n - safe)))
        safe = np.maximum(k, 1)
        assert np.array_equal(_cp_lower(k, n, level), np.where(k == 0, 0.0, beta.ppf(1 - level, safe, n - safe + 1)))


def test_midranks_are_scipys_average_ranks_bit_for_bit():
    from scipy.stats import rankdata

    from privaudit.analysis.metrics import midranks

    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 400))
        values = np.round(rng.normal(0, 1, n), int(rng.integers(0, 3)))  # many ties at 0 decimals
        assert np.array_equal(midranks(values), rankdata(values))
    assert midranks(np.array([2.0, 1.0, 2.0, 2.0])).tolist() == [3.0, 1.0, 3.0, 3.0]


def test_tpr_at_fpr_below_the_resolution_is_tpr_at_zero_false_positives():
    # 4 non-members: the smallest non-zero FPR is 1/4, so max_fpr = 0.1 means FPR = 0
    labels = np.array([1, 1, 1, 0, 0, 0, 0])
    scores = np.array([5.0, 4.0, 1.0, 3.0, 0.0, -1.0, -2.0])
    assert tpr_at_fpr(labels, scores, 0.1) == pytest.approx(2 / 3)
    assert tpr_at_fpr(labels, scores, 0.25) == pytest.approx(1.0)


INVALID = [
    ("shape mismatch", [0, 1, 1], [0.1, 0.2]),
    ("one class only (members)", [1, 1, 1], [0.1, 0.2, 0.3]),
    ("one class only (non-members)", [0, 0], [0.1, 0.2]),
    ("NaN score", [0, 1, 1], [0.1, np.nan, 0.3]),
    ("infinite score", [0, 1], [0.1, np.inf]),
    ("label 2", [0, 1, 2], [0.1, 0.2, 0.3]),
    ("empty", [], []),
]


@pytest.mark.parametrize("case, labels, scores", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_inputs_raise_value_error(case, labels, scores):
    labels, scores = np.asarray(labels), np.asarray(scores, dtype=float)
    with pytest.raises(ValueError):
        attack_metrics(labels, scores, threshold=0.5)
    with pytest.raises(ValueError):
        tpr_at_fpr(labels, scores, 0.01)
    with pytest.raises(ValueError):
        advantage(labels, scores)
    with pytest.raises(ValueError):
        roc(labels, scores)


def test_strongest_attack_one_rule():
    """TPR at 0.1 % FPR first, AUC breaks ties, NaN and missing count as −∞, first wins a full tie."""
    from privaudit.analysis.metrics import strongest_attack

    assert strongest_attack({"a": {"tpr_at_0p1pct_fpr": 0.01, "auc": 0.9},
                             "b": {"tpr_at_0p1pct_fpr": 0.02, "auc": 0.6}}) == "b"
    assert strongest_attack({"a": {"tpr_at_0p1pct_fpr": 0.02, "auc": 0.7},
                             "b": {"tpr_at_0p1pct_fpr": 0.02, "auc": 0.8}}) == "b"
    assert strongest_attack({"a": {"tpr_at_0p1pct_fpr": float("nan"), "auc": 0.99},
                             "b": {"tpr_at_0p1pct_fpr": 0.0, "auc": 0.5}}) == "b"
    assert strongest_attack({"a": {"auc": 0.6}, "b": {"auc": 0.6}}) == "a"
    assert strongest_attack({"a": {}, "b": {"auc": None}}) is None


def test_attacks_rank_by_the_strongest_rule_and_scan_lists_them_so():
    """rank_attacks orders by TPR at 0.1 % FPR, then AUC; scan's table (attacks.csv) follows it."""
    from privaudit.analysis.metrics import rank_attacks
    from privaudit.scanning.inputs import check
    from privaudit.scanning.run import scan

    metrics = {"confidence": {"tpr_at_0p1pct_fpr": 0.0, "auc": 0.805},
               "entropy": {"tpr_at_0p1pct_fpr": 0.0, "auc": 0.811},
               "lira": {"tpr_at_0p1pct_fpr": 0.05, "auc": 0.7}, "none": {}}
    assert rank_attacks(metrics) == ["lira", "entropy", "confidence", "none"]
    rng = np.random.default_rng(3)
    y_in, y_out = rng.integers(0, 4, 400), rng.integers(0, 4, 400)
    logits_in, logits_out = rng.normal(size=(400, 4)), rng.normal(size=(400, 4))
    logits_in[np.arange(400), y_in] += 1.0
    result = scan(check({"logits_in": logits_in, "labels_in": y_in, "logits_out": logits_out, "labels_out": y_out}))
    table = result.table()
    assert table["attack"].iloc[0] == result.strongest
    keys = list(zip(table["tpr_at_0p1pct_fpr"].fillna(-1), table["auc"].fillna(-1)))
    assert keys == sorted(keys, reverse=True)
