"""Attack features and shadow-free baseline scores from logits.

Shapes: ``logits`` (N, C) float, ``labels`` (N,) int class labels. Computations are in
float64 with a stable log-softmax.
"""

from __future__ import annotations

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    out: np.ndarray = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    p: np.ndarray = np.exp(log_softmax(logits))
    return p


def top_k_posteriors(logits: np.ndarray, k: int = 3) -> np.ndarray:
    """The k largest softmax posteriors, sorted descending: shape (N, k). ML-Leaks' features."""
    p = softmax(logits)
    k = min(k, p.shape[1])
    top: np.ndarray = -np.sort(-p, axis=1)[:, :k]
    return top


def loss_scores(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Score = −cross-entropy loss of the true label (Yeom et al. 2018): members have low loss."""
    lsm = log_softmax(logits)
    scores: np.ndarray = lsm[np.arange(len(labels)), np.asarray(labels, dtype=int)]
    return scores


def confidence_scores(logits: np.ndarray) -> np.ndarray:
    """Score = top-1 softmax posterior (the authors' shadow-free threshold attack)."""
    scores: np.ndarray = softmax(logits).max(axis=1)
    return scores


def entropy_scores(logits: np.ndarray) -> np.ndarray:
    """Score = −H(p), the negated entropy of the softmax posteriors, H(p) = −Σ_i p_i log p_i:
    members get more confident, lower-entropy outputs (Song & Mittal, *Systematic Evaluation
    of Privacy Risks of Machine Learning Models*, USENIX Security 2021, arXiv:2003.10595)."""
    lsm = log_softmax(logits)
    scores: np.ndarray = (np.exp(lsm) * lsm).sum(axis=1)
    return scores


def modified_entropy_scores(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Score = −Mentr(p, y), Song & Mittal's modified entropy (arXiv:2003.10595, eq. 5):

        Mentr(p, y) = −(1 − p_y) log p_y − Σ_{i≠y} p_i log(1 − p_i),

    small when the true label's posterior is near 1 and every other near 0 (unlike the
    entropy, a confident wrong answer scores as unlikely a member). log(1 − p_i) is taken as
    log(−expm1(log p_i)) so that it stays finite and accurate for p_i near 1."""
    lsm = log_softmax(logits)
    y = np.asarray(labels, dtype=int)
    rows = np.arange(len(y))
    p = np.exp(lsm)
    with np.errstate(divide="ignore"):
        log_1mp = np.log(-np.expm1(np.minimum(lsm, -1e-300)))
    log_1mp = np.maximum(log_1mp, -745.0)  # p_i = 1 up to rounding: the smallest float64 log
    terms = -p * log_1mp
    terms[rows, y] = -(1.0 - p[rows, y]) * lsm[rows, y]
    scores: np.ndarray = -terms.sum(axis=1)
    return scores
