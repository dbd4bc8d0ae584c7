"""Attacks calibrated by cross-validation on the audited model's own outputs.

When no other model is at hand (``privaudit scan`` with only the audited model's outputs),
every choice an attack makes from membership labels (a trained classifier's weights, a
decision threshold) is made on the other folds of a stratified
K-fold split of the audited samples, so no sample is scored or decided by anything fitted
on it. This is how TF Privacy's attack library trains its attackers (on a part of the
audited samples, evaluated on the rest), here with every sample evaluated once.

Shapes: ``labels`` (N,) 1 = member, 0 = non-member; ``scores`` (N,) higher = more likely a
member.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.analysis.metrics import advantage_threshold
from privaudit.attacks.scores import softmax

DEFAULT_FOLDS = 5
INNER_FOLDS = 3
MAX_SORTED_POSTERIORS = 10


def fold_ids(labels: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """A stratified assignment of the N samples to ``folds`` folds, (N,) int, seeded."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels).astype(int)
    folds = min(folds, int(np.bincount(labels, minlength=2).min()))
    if folds < 2:
        raise ValueError("cross-validation needs at least 2 members and 2 non-members")
    out = np.empty(len(labels), dtype=np.int64)
    split = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for k, (_, test) in enumerate(split.split(np.zeros(len(labels)), labels)):
        out[test] = k
    return out


@dataclass
class Decisions:
    """An attack's out-of-fold outputs: ``scores`` (N,), and its decisions ``member`` (N,)
    bool at the threshold of largest TPR − FPR chosen on the other folds."""

    scores: np.ndarray
    member: np.ndarray


def threshold_decisions(labels: np.ndarray, scores: np.ndarray, fold: np.ndarray, *,
                        calibration: list[np.ndarray] | None = None) -> Decisions:
    """Decisions of a fixed score by a threshold chosen per fold on the other folds.

    ``calibration`` (one (N,) array per fold), when given, are the scores on which fold k's
    threshold is chosen (their entries outside fold k are used): the classifier below
    scores the other folds by an inner cross-validation, never by the model that scores fold k.
    """
    labels = np.asarray(labels).astype(int)
    member = np.zeros(len(labels), dtype=bool)
    for k in np.unique(fold):
        test, train = fold == k, fold != k
        calib = scores if calibration is None else calibration[k]
        member[test] = scores[test] >= advantage_threshold(labels[train], calib[train])
    return Decisions(np.asarray(scores, dtype=np.float64), member)


def sorted_posteriors(logits: np.ndarray, k: int = MAX_SORTED_POSTERIORS) -> np.ndarray:
    """The softmax posteriors sorted descending, the first min(k, C): (N, min(k, C)) float64
    (ML-Leaks' label-free features, all of them up to ``k`` classes)."""
    p = softmax(logits)
    return -np.sort(-p, axis=1)[:, :min(k, p.shape[1])]


def _classifier(seed: int) -> Any:  # scikit-learn's estimator (no type information)
    """Gradient-boosted trees on the sorted posteriors, fixed iterations (no random
    early-stopping split), seeded: the same data give the same scores. No class weights:
    the decision threshold is chosen by cross-validation anyway, and sample weights make
    scikit-learn bin every feature by weighted percentiles, far slower (docs/performance.md)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, max_leaf_nodes=15, l2_regularization=1.0,
                                          early_stopping=False, random_state=seed)


def _out_of_fold(features: np.ndarray, labels: np.ndarray, fold: np.ndarray, seed: int) -> np.ndarray:
    """Each sample's member probability from a classifier fitted on the other folds.

    The trees are grown on one OpenMP thread: on a few thousand rows the threads' start-up
    and spinning cost more than they save, and when another process holds the cores (a
    training run beside it) spinning threads slow every fit by orders of magnitude."""
    from threadpoolctl import threadpool_limits

    out = np.empty(len(labels))
    with threadpool_limits(limits=1, user_api="openmp"):
        for k in np.unique(fold):
            test, train = fold == k, fold != k
            out[test] = _classifier(seed).fit(features[train], labels[train]).predict_proba(features[test])[:, 1]
    return out


def classifier_decisions(features: np.ndarray, labels: np.ndarray, fold: np.ndarray, *, seed: int = 0) -> Decisions:
    """The trained attack classifier, cross-validated.

    Fold k is scored by a classifier fitted on the other folds; its decision threshold is
    chosen on out-of-fold scores of those other folds from an inner :data:`INNER_FOLDS`-fold
    cross-validation within them (classifiers that never saw fold k). ``features`` (N, d).
    """
    labels = np.asarray(labels).astype(int)
    scores = _out_of_fold(features, labels, fold, seed)
    calibration = []
    for k in range(int(fold.max()) + 1):
        train = np.flatnonzero(fold != k)
        inner = np.full(len(labels), np.nan)
        inner_fold = fold_ids(labels[train], INNER_FOLDS, seed + 1 + k)
        inner[train] = _out_of_fold(features[train], labels[train], inner_fold, seed)
        calibration.append(inner)
    return threshold_decisions(labels, scores, fold, calibration=calibration)
