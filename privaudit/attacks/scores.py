"""Attack features and shadow-free baseline scores from logits.

Shapes: ``logits`` (N, C) float, ``labels`` (N,) int class labels. Computations are in
float64 with a stable log-softmax.
"""

from __future__ import annotations

import numpy as np

ATTACKS = ("shadow", "loss", "confidence")


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def softmax(logits: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(logits))


def top_k_posteriors(logits: np.ndarray, k: int = 3) -> np.ndarray:
    """The k largest softmax posteriors, sorted descending: shape (N, k). ML-Leaks' features."""
    p = softmax(logits)
    k = min(k, p.shape[1])
    return -np.sort(-p, axis=1)[:, :k]


def loss_scores(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Score = −cross-entropy loss of the true label (Yeom et al. 2018): members have low loss."""
    lsm = log_softmax(logits)
    return lsm[np.arange(len(labels)), np.asarray(labels, dtype=int)]


def confidence_scores(logits: np.ndarray) -> np.ndarray:
    """Score = top-1 softmax posterior (the authors' shadow-free threshold attack)."""
    return softmax(logits).max(axis=1)
