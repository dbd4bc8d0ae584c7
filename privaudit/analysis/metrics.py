"""Membership-inference metrics over score arrays (member = positive class everywhere).

All functions take ``labels`` (1 = member, 0 = non-member) and ``scores`` (higher = more
likely a member), both shape (N,). Threshold-free metrics come from the ROC curve;
precision, recall and accuracy are taken at an explicit threshold that the caller states
(predict member iff score >= threshold).

The ROC curve and the AUC are computed here rather than by scikit-learn's ``roc_curve`` and
``roc_auc_score``, which they equal (the curve bit for bit, the AUC to float rounding: the
tests hold them against scikit-learn): an audit evaluates thousands of score arrays of a few
hundred samples (leave-one-out over the pool, RMIA's calibration of a), where scikit-learn's
input validation costs several times the arithmetic (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

LOW_FPRS = {"tpr_at_1pct_fpr": 0.01, "tpr_at_0p1pct_fpr": 0.001}


def check_scores(labels: npt.ArrayLike, scores: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validated (labels as int 0/1, scores as float64), both flat; ValueError otherwise."""
    raw = np.asarray(labels).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if raw.shape != scores.shape:
        raise ValueError(f"labels {raw.shape} and scores {scores.shape} differ in shape")
    if not np.all((raw == 0) | (raw == 1)):
        raise ValueError("labels must be 0 (non-member) or 1 (member)")
    labels = raw.astype(int)
    if not (labels.any() and not labels.all()):  # an empty array has neither
        raise ValueError("need both members and non-members")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    return labels, scores


def roc_points(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fpr, tpr, thresholds) at every distinct score, in decreasing order of threshold, after
    the point (0, 0) at threshold +inf: scikit-learn's ``roc_curve(labels, scores,
    drop_intermediate=False)``, bit for bit (validated ``labels`` 0/1 and ``scores``)."""
    order = np.argsort(scores, kind="mergesort")[::-1]
    s, y = scores[order], labels[order]
    last = np.r_[np.flatnonzero(np.diff(s)), y.size - 1]   # the last row of each run of equal scores
    tps = np.cumsum(y, dtype=np.float64)[last]
    fps = 1.0 + last - tps
    tps, fps = np.r_[0.0, tps], np.r_[0.0, fps]
    return fps / fps[-1], tps / tps[-1], np.r_[np.inf, s[last]]


def roc(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) of the full ROC curve, starting at (0, 0) and ending at (1, 1)."""
    labels, scores = check_scores(labels, scores)
    fpr, tpr, _ = roc_points(labels, scores)
    return fpr, tpr


def midranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..N of ``values`` (N,), ties sharing the mean of their ranks: ``scipy.stats.rankdata``
    (method "average") by the same arithmetic, so bit for bit, without its per-call overhead
    (an audit ranks thousands of small arrays)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]   # the first of each run of equal values
    group = np.cumsum(first)                             # 1-based run of each sorted position
    bounds = np.r_[np.flatnonzero(first), values.size]   # where each run starts, then N
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = 0.5 * (bounds[group] + bounds[group - 1] + 1)
    return ranks


def auc_score(labels: np.ndarray, scores: np.ndarray) -> float:
    """The area under the ROC curve, as the Mann–Whitney statistic: with m members and n
    non-members and mid-ranks R (ties count one half), AUC = (Σ_members R − m(m+1)/2)/(m n);
    scikit-learn's ``roc_auc_score`` to float rounding."""
    labels, scores = check_scores(labels, scores)
    m = int(labels.sum())
    n = labels.size - m
    return float((midranks(scores)[labels == 1].sum() - m * (m + 1) / 2.0) / (m * n))


def tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, max_fpr: float) -> float:
    """Largest TPR of any threshold whose FPR is at most ``max_fpr``.

    With n non-members the smallest non-zero FPR is 1/n, so for ``max_fpr < 1/n`` this is
    the TPR at zero false positives.
    """
    fpr, tpr = roc(labels, scores)
    return float(tpr[fpr <= max_fpr + 1e-12].max())


def advantage(labels: np.ndarray, scores: np.ndarray) -> float:
    """Membership advantage max_t (TPR(t) - FPR(t)) (Yeom et al. 2018), in [0, 1]."""
    fpr, tpr = roc(labels, scores)
    return float(np.max(tpr - fpr))


def auc_interval(labels: np.ndarray, scores: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """(AUC, lower, upper): the AUC with DeLong's normal-approximation interval.

    DeLong, DeLong & Clarke-Pearson, *Comparing the areas under two or more correlated
    receiver operating characteristic curves* (Biometrics 1988), computed from mid-ranks as
    in Sun & Xu (IEEE SPL 2014). With m members X and n non-members Y and the kernel
    ψ(x, y) = 1[x > y] + ½·1[x = y], the structural components are
    V10_i = mean_j ψ(X_i, Y_j) and V01_j = mean_i ψ(X_i, Y_j); AUC = mean V10 and
    Var(AUC) = s²(V10)/m + s²(V01)/n (sample variances). The interval is
    AUC ± z·sd, clipped to [0, 1]. It covers the sampling of the audited records for this
    one model, not training randomness (replicate over seeds for that). O(N log N).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    auc, var = auc_delong(labels, scores)
    half = float(norm.ppf(0.5 + confidence / 2) * np.sqrt(var))
    return auc, max(0.0, auc - half), min(1.0, auc + half)


def auc_delong(labels: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    """(AUC, DeLong's variance of it), the two numbers :func:`auc_interval` is made of
    (its docstring has the formulas); the variance is ≥ 0."""
    labels, scores = check_scores(labels, scores)
    x, y = scores[labels == 1], scores[labels == 0]
    m, n = len(x), len(y)
    ranks = midranks(np.concatenate([x, y]))  # mid-ranks: ties count one half
    v10 = (ranks[:m] - midranks(x)) / n
    v01 = 1.0 - (ranks[m:] - midranks(y)) / m
    auc = float(v10.mean())
    var = (v10.var(ddof=1) / m if m > 1 else 0.0) + (v01.var(ddof=1) / n if n > 1 else 0.0)
    return auc, max(float(var), 0.0)


def attack_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float, *,
                   predicted: np.ndarray | None = None) -> dict[str, float]:
    """AUC (with its 95 % DeLong interval ``auc_lo``/``auc_hi``), accuracy, precision, recall
    (at ``threshold``), advantage and TPR at low FPR.

    ``predicted`` (N,) bool, when given, are the attack's decisions in place of
    ``scores >= threshold`` (decisions made with a threshold per cross-validation fold;
    ``threshold`` is then reported as given, e.g. NaN).

    Precision is 0 when the attack predicts no member at all (scikit-learn's convention
    with ``zero_division=0``).
    """
    labels, scores = check_scores(labels, scores)
    if predicted is None:
        pred = scores >= threshold
    else:
        pred = np.asarray(predicted, dtype=bool).ravel()
        if pred.shape != labels.shape:
            raise ValueError(f"predicted {pred.shape} and labels {labels.shape} differ in shape")
    tp = int(np.sum(pred & (labels == 1)))
    fp = int(np.sum(pred & (labels == 0)))
    n_pos = int(labels.sum())
    fpr, tpr = roc(labels, scores)
    _, auc_lo, auc_hi = auc_interval(labels, scores)
    out = {
        "auc": auc_score(labels, scores),
        "auc_lo": auc_lo,
        "auc_hi": auc_hi,
        "accuracy": float(np.mean(pred == (labels == 1))),
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / n_pos,
        "threshold": float(threshold),
        "advantage": float(np.max(tpr - fpr)),
    }
    return {**out, **low_fpr_tprs(fpr, tpr)}


def low_fpr_tprs(fpr: np.ndarray, tpr: np.ndarray) -> dict[str, float]:
    """TPR at each FPR of :data:`LOW_FPRS`: the largest TPR of the ROC's operating points
    (``fpr``, ``tpr``, from :func:`roc`) whose FPR does not exceed the level."""
    return {name: float(tpr[fpr <= level + 1e-12].max()) for name, level in LOW_FPRS.items()}


STRONGEST_KEY = ("tpr_at_0p1pct_fpr", "auc")


def rank_attacks(metrics: Mapping[str, Mapping[str, float]]) -> list[str]:
    """The attacks strongest first, by the one rule of every view (:func:`strongest_attack`):
    the highest TPR at 0.1 % FPR, then the highest AUC; a missing or NaN value counts as −∞,
    ties keep the given order."""
    keys = {name: tuple(_finite_or_minus_inf(m.get(k)) for k in STRONGEST_KEY) for name, m in metrics.items()}
    return sorted(metrics, key=lambda name: tuple(-v for v in keys[name]))


def strongest_attack(metrics: Mapping[str, Mapping[str, float]]) -> str | None:
    """The strongest of several attacks on the same targets, the one rule of every view:
    the highest TPR at 0.1 % FPR, then the highest AUC (a missing or NaN value counts as
    −∞; ties go to the first attack). ``metrics`` maps attack → its metrics; None when no
    attack has either value."""
    ranked = rank_attacks(metrics)
    if not ranked or all(_finite_or_minus_inf(metrics[ranked[0]].get(k)) == -np.inf for k in STRONGEST_KEY):
        return None
    return ranked[0]


def _finite_or_minus_inf(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return -np.inf
    return f if np.isfinite(f) else -np.inf


def advantage_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The threshold at which TPR − FPR is largest (balanced-accuracy optimum); used to pick an
    attack's decision threshold on calibration data (other models), never on the audited one."""
    labels, scores = check_scores(labels, scores)
    fpr, tpr, thresholds = roc_points(labels, scores)
    best = int(np.argmax(tpr - fpr))
    return float(min(thresholds[best], np.max(scores) + 1.0))
