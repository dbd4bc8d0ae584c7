"""The loss-trace vulnerability ranking, LT-IQR (docs/methods/d-attacks.md D.10).

Pollock, Shilov, Dodd, de Montjoye, *Free Record-Level Privacy Risk Evaluation Through
Artifact-Based Methods* (arXiv 2411.05743): the members whose training loss moves most over
training are the ones a strong membership attack exposes most. Each member's score is the
interquartile range of its loss trace, the per-epoch losses the training loop recorded
(:mod:`privaudit.training.trace`):

    LT-IQR(i) = Q₃(ℓ_i,1 … ℓ_i,E) − Q₁(ℓ_i,1 … ℓ_i,E),

quartiles by linear interpolation over the epochs that sampled member i (DP-SGD's Poisson
batches miss some). It ranks a model's own members, at no extra training and no reference
model; it is not a membership test (non-members have no trace), so it is judged by how many of
its top-ranked members are among the members a strong attack exposes most
(:func:`top_precision`).
"""

from __future__ import annotations

import numpy as np


def lt_iqr(trace: np.ndarray) -> np.ndarray:
    """The interquartile range over epochs of each member's loss, (members,) float64.

    ``trace`` (epochs, members), NaN where an epoch did not sample the member. A member sampled
    in no epoch gets −inf (ranked last). ValueError when the trace is not 2-D or has no epoch.
    """
    t = np.asarray(trace, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] < 1:
        raise ValueError(f"a loss trace has shape (epochs, members) with at least one epoch, got {t.shape}")
    seen = np.isfinite(t)
    out = np.full(t.shape[1], -np.inf)
    cols = seen.any(axis=0)
    if cols.any():
        q1, q3 = np.nanpercentile(t[:, cols], [25.0, 75.0], axis=0)
        out[cols] = q3 - q1
    return out


def top_set(scores: np.ndarray, fraction: float) -> np.ndarray:
    """Indices of the top ``fraction`` (at least one) of ``scores``, ties broken by index."""
    scores = np.asarray(scores, dtype=np.float64)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    k = max(1, int(round(fraction * scores.size)))
    return np.argsort(-scores, kind="stable")[:k]


def top_precision(ranking: np.ndarray, reference: np.ndarray, fraction: float = 0.01) -> float:
    """Share of the top ``fraction`` by ``ranking`` that is in the top ``fraction`` by
    ``reference`` (both over the same members): LT-IQR's precision against a strong attack's
    most exposed members. Chance level is ``fraction``."""
    ranking, reference = np.asarray(ranking), np.asarray(reference)
    if ranking.shape != reference.shape or ranking.ndim != 1:
        raise ValueError(f"ranking {ranking.shape} and reference {reference.shape} must be the same 1-D shape")
    a, b = top_set(ranking, fraction), top_set(reference, fraction)
    return float(np.isin(a, b).mean())
