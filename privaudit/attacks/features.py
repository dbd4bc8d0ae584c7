"""Per-sample attack statistics from saved logits, computed once per pool.

Every pool attack reads a few numbers per (model, sample, query) from the logits:

- φ = z_y − logsumexp_{y'≠y} z_{y'}, LiRA's logit-scaled confidence
  (:func:`privaudit.attacks.lira.logit_scaled_confidence`), shape (..., n, A);
- p_y = softmax(z)_y averaged over the queries, RMIA's statistic, shape (..., n);
- the top-3 sorted posteriors of the plain query, the ML-Leaks shadow attack's features,
  shape (..., n, 3).

For a pool of M models and n samples the logits are M·n·A·C floats (60,000 samples × 64
models × 2 queries × 10 classes: 77 M values). They are turned into these statistics in one
pass, in float64, in chunks of ``CHUNK`` rows through torch (multi-threaded), so the extra
memory stays a few tens of MB and no attack recomputes them; leave-one-out then slices the
same arrays for every target instead of recomputing M times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

CHUNK = 1 << 16  # rows of (A, C) logits per chunk
TOP_K = 3


@dataclass
class Features:
    """Attack statistics of one or many models (leading axes ``...``)."""

    phi: np.ndarray     # (..., n, A) float64
    p_y: np.ndarray     # (..., n) float64, mean over queries
    top3: np.ndarray    # (..., n, 3) float64, plain query

    def __getitem__(self, index: int | slice | np.ndarray) -> Features:
        return Features(self.phi[index], self.p_y[index], self.top3[index])


def _chunk_stats(z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """z (r, A, C) float64, y (r,) → φ (r, A), p_y (r, A), top-3 posteriors of query 0 (r, 3)."""
    idx = y[:, None, None].expand(-1, z.shape[1], 1)
    z_y = z.gather(-1, idx)[..., 0]
    lse_all = torch.logsumexp(z, dim=-1)
    lse_others = torch.logsumexp(z.scatter(-1, idx, float("-inf")), dim=-1)
    phi = z_y - lse_others
    p_y = torch.exp(z_y - lse_all)
    plain = torch.softmax(z[:, 0], dim=-1)
    k = min(TOP_K, z.shape[-1])
    top = plain.topk(k, dim=-1).values
    return phi, p_y, top


def compute_features(logits: np.ndarray, labels: np.ndarray) -> Features:
    """Statistics of ``logits`` (..., n, A, C) with true ``labels`` (n,)."""
    logits = np.asarray(logits)
    if logits.ndim < 3:
        raise ValueError(f"logits must have shape (..., n, A, C), got {logits.shape}")
    *lead, n, a, c = logits.shape
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {labels.shape}")
    if n and (labels.min() < 0 or labels.max() >= c):
        raise ValueError(f"labels must lie in [0, {c})")
    if not np.all(np.isfinite(logits)):
        raise ValueError("logits must be finite")
    rows = int(np.prod(lead, dtype=np.int64)) * n
    flat = torch.from_numpy(np.ascontiguousarray(logits).reshape(rows, a, c))
    y_all = torch.from_numpy(labels)
    k = min(TOP_K, c)
    phi = np.empty((rows, a))
    p_y = np.empty(rows)
    top3 = np.empty((rows, k))
    for start in range(0, rows, CHUNK):
        stop = min(start + CHUNK, rows)
        pos = torch.arange(start, stop) % max(n, 1)
        f, p, t = _chunk_stats(flat[start:stop].double(), y_all[pos])
        phi[start:stop] = f.numpy()
        p_y[start:stop] = p.mean(dim=1).numpy()
        top3[start:stop] = t.numpy()
    return Features(phi.reshape(*lead, n, a), p_y.reshape(*lead, n), top3.reshape(*lead, n, k))
