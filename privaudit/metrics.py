"""Membership-inference metrics over score arrays (member = positive class everywhere).

All functions take ``labels`` (1 = member, 0 = non-member) and ``scores`` (higher = more
likely a member), both shape (N,). Threshold-free metrics come from the ROC curve
(scikit-learn); precision, recall and accuracy are taken at an explicit threshold that the
caller states (predict member iff score >= threshold).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

LOW_FPRS = {"tpr_at_1pct_fpr": 0.01, "tpr_at_0p1pct_fpr": 0.001}


def check_scores(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validated (labels as int 0/1, scores as float64), both flat; ValueError otherwise."""
    raw = np.asarray(labels).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if raw.shape != scores.shape:
        raise ValueError(f"labels {raw.shape} and scores {scores.shape} differ in shape")
    if not np.all((raw == 0) | (raw == 1)):
        raise ValueError("labels must be 0 (non-member) or 1 (member)")
    labels = raw.astype(int)
    if labels.min(initial=1) == labels.max(initial=0):
        raise ValueError("need both members and non-members")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    return labels, scores


def roc(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) of the full ROC curve, starting at (0, 0) and ending at (1, 1)."""
    labels, scores = check_scores(labels, scores)
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    return fpr, tpr


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


def attack_metrics(labels: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, float]:
    """AUC, accuracy, precision, recall (at ``threshold``), advantage and TPR at low FPR.

    Precision is 0 when the attack predicts no member at all (scikit-learn's convention
    with ``zero_division=0``).
    """
    labels, scores = check_scores(labels, scores)
    pred = scores >= threshold
    tp = int(np.sum(pred & (labels == 1)))
    fp = int(np.sum(pred & (labels == 0)))
    n_pos = int(labels.sum())
    fpr, tpr = roc(labels, scores)
    out = {
        "auc": float(roc_auc_score(labels, scores)),
        "accuracy": float(np.mean(pred == (labels == 1))),
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / n_pos,
        "threshold": float(threshold),
        "advantage": float(np.max(tpr - fpr)),
    }
    for name, level in LOW_FPRS.items():
        out[name] = float(tpr[fpr <= level + 1e-12].max())
    return out


def advantage_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """The threshold at which TPR − FPR is largest (balanced-accuracy optimum); used to pick an
    attack's decision threshold on calibration data (other models), never on the audited one."""
    labels, scores = check_scores(labels, scores)
    fpr, tpr, thresholds = roc_curve(labels, scores, drop_intermediate=False)
    best = int(np.argmax(tpr - fpr))
    return float(min(thresholds[best], np.max(scores) + 1.0))
