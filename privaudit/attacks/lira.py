"""LiRA: the likelihood-ratio membership-inference attack (docs/methods.md D).

Carlini, Chien, Nasr, Song, Terzis, Tramèr, *Membership Inference Attacks From First
Principles*, IEEE S&P 2022. For every audited sample, the attack fits Gaussians to a
scalar statistic of the sample, the logit-scaled confidence φ, over reference ("shadow")
models that did (IN) and did not (OUT) train on it, and tests the audited model's φ
against them.

Shapes, used throughout:

- ``M`` reference models, ``n`` audited samples, ``A`` queries per sample (the views the
  models trained on: 1, or 2 with ``--augment flip``: the image and its mirror), ``C`` classes.
- ``target_stats`` (n, A): φ of the audited model.
- ``ref_stats`` (M, n, A): φ of every reference model.
- ``ref_keep`` (M, n) bool: ``ref_keep[m, i]`` is True iff sample i was in reference model
  m's training set (the LiRA code's ``keep`` array).

All computations are in float64. Scores are "higher = more likely a member".
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

_HALF_LOG_2PI = 0.5 * np.log(2.0 * np.pi)


def logit_scaled_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """φ = log p_y − log Σ_{y'≠y} p_{y'}, the logit of the true-label softmax probability.

    With p = softmax(z), the softmax normaliser cancels, so

        φ = z_y − logsumexp_{y'≠y} z_{y'},

    which is what is computed (float64, max-shifted logsumexp). It is finite for every
    finite input, also when p_y rounds to 1 in floating point (e.g. p_y = 1 − 1e-15 gives
    φ ≈ 34.5; logits (100, 0) give φ = 100), where the naive log(p_y) − log(1 − p_y) is
    inf. Carlini et al. (2022), Section IV-B ("logit scaling").

    Shapes: ``logits`` (..., C) with C ≥ 2; ``labels`` integer class indices in [0, C) whose
    shape broadcasts (numpy rules) against ``logits.shape[:-1]``; the result has shape
    ``logits.shape[:-1]``. Broadcasting aligns trailing axes, so for logits of M models ×
    n samples × A queries, (M, n, A, C), pass the n labels as ``labels[None, :, None]``
    (shape (1, n, 1)) or ``labels[:, None]`` (shape (n, 1)); plain (n,) labels would be
    aligned with the A axis and are rejected unless n == A.
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim < 1 or z.shape[-1] < 2:
        raise ValueError(f"logits must have shape (..., C) with C >= 2, got {z.shape}")
    if not np.all(np.isfinite(z)):
        raise ValueError("logits must be finite")
    raw = np.asarray(labels)
    if raw.size and not np.issubdtype(raw.dtype, np.integer):
        if not np.all(raw == np.round(raw)):
            raise ValueError("labels must be integer class indices")
    y = raw.astype(np.int64)
    batch = z.shape[:-1]
    try:
        if np.broadcast_shapes(y.shape, batch) != batch:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"labels of shape {y.shape} do not broadcast to logits.shape[:-1] = {batch}; "
            "give the sample axis explicitly, e.g. labels[None, :, None] for logits (M, n, A, C)"
        ) from None
    n_classes = z.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(f"labels must lie in [0, {n_classes})")
    y = np.broadcast_to(y, batch)[..., None]
    z_y = np.take_along_axis(z, y, axis=-1)[..., 0]
    others = z.copy()
    np.put_along_axis(others, y, -np.inf, axis=-1)
    top = others.max(axis=-1, keepdims=True)
    lse_others = top[..., 0] + np.log(np.exp(others - top).sum(axis=-1))
    return z_y - lse_others


def _check_lira_inputs(
    target_stats: np.ndarray, ref_stats: np.ndarray, ref_keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.asarray(target_stats, dtype=np.float64)
    r = np.asarray(ref_stats, dtype=np.float64)
    if t.ndim == 1 and r.ndim == 2:  # one query: (n,) and (M, n)
        t, r = t[:, None], r[:, :, None]
    if t.ndim != 2:
        raise ValueError(f"target_stats must have shape (n, A), got {t.shape}")
    if r.ndim != 3 or r.shape[1:] != t.shape:
        raise ValueError(f"ref_stats must have shape (M, n, A) = (M, {t.shape[0]}, {t.shape[1]}), got {r.shape}")
    if r.shape[0] < 1:
        raise ValueError("need at least one reference model")
    k = np.asarray(ref_keep)
    if k.shape != r.shape[:2]:
        raise ValueError(f"ref_keep must have shape (M, n) = {r.shape[:2]}, got {k.shape}")
    if k.dtype != bool:
        if not np.all((k == 0) | (k == 1)):
            raise ValueError("ref_keep must be boolean (or 0/1)")
        k = k.astype(bool)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(r))):
        raise ValueError("target_stats and ref_stats must be finite")
    return t, r, k


def _fit(ref: np.ndarray, weight: np.ndarray, global_variance: bool, min_std: float):
    """Mean and std of ``ref`` (M, n, A) over models with weight 1; weight (M, n, 1) 0/1.

    Returns mu (n, A), std (n, A) (per sample: population std, ddof = 0; floored at
    ``min_std``) and the per-sample model count (n,). With ``global_variance`` the std is
    pooled per query over the samples seen by at least two models:
    sqrt(Σ_{m,i} w (φ − μ_i)² / Σ_i n_i); samples with fewer than two models also use it.
    """
    count = weight[:, :, 0].sum(axis=0)
    safe = np.maximum(count, 1.0)[:, None]
    mu = (ref * weight).sum(axis=0) / safe
    sq = ((ref - mu) ** 2 * weight).sum(axis=0)  # (n, A)
    # pooled (population) variance over the samples seen by at least two models: a single
    # model's deviation from its own mean is 0 and must not shrink the estimate
    spread = count >= 2
    pooled = sq[spread].sum(axis=0, keepdims=True) / max(count[spread].sum(), 1.0)  # (1, A)
    if global_variance:
        var = np.broadcast_to(pooled, mu.shape)
    else:
        # per sample; a sample seen by fewer than two models has no spread of its own and
        # takes the pooled variance instead of a zero (which would make its score explode)
        var = np.where(count[:, None] >= 2, sq / safe, pooled)
    return mu, np.maximum(np.sqrt(var), min_std), count


def lira_scores(
    target_stats: np.ndarray,
    ref_stats: np.ndarray,
    ref_keep: np.ndarray,
    *,
    online: bool = True,
    global_variance: bool = False,
    min_std: float = 1e-6,
) -> np.ndarray:
    """LiRA membership scores, shape (n,); higher = more likely a member.

    For sample i and query a, fit N(μ_in, σ_in²) to the reference φ of the models that
    trained on i and N(μ_out, σ_out²) to those that did not (sample mean and population
    std, ddof = 0), then with φ = ``target_stats[i, a]``:

    - online (Carlini et al. 2022, Algorithm 1):
      score_i = mean_a [log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²)],
      the log-likelihood ratio, averaged over queries as in the paper's Section VI-A;
    - offline (Section VI-C, only OUT models): the one-sided test "φ is larger than OUT
      models give", score_i = mean_a log Φ((φ − μ_out)/σ_out) (``scipy.stats.norm.logcdf``).
      This is the log of the p-value's complement, so, like online, it grows with φ.
      The reference code scores offline two-sided instead, −log N(φ; μ_out, σ_out²): a φ far
      from the OUT models' in either direction counts as a member. privaudit keeps the
      paper's one-sided test, since φ (the logit-scaled confidence) of a member is expected
      to be *higher*; a φ far below the OUT models is no evidence of membership.

    ``global_variance`` (the paper's "fixed variance", Section VI-B, better with few
    reference models, e.g. M ≤ 64): σ_in and σ_out are one value per query shared by all
    samples, the root mean square of (φ − μ_i) pooled over all (model, sample) pairs of
    that kind; the means stay per sample. Every std is floored at ``min_std`` (a per-sample
    std from a single model is 0, so use ``global_variance`` when models per sample are few).

    Samples without a needed model (documented fallbacks):
    - online, sample with no IN model but at least one OUT model: its offline score is used
      (a log-probability, not a log-likelihood ratio, so such samples rank only roughly
      against the others; with a ``keep`` built so that each sample is IN in half of the
      models this never happens);
    - no OUT model (online or offline): score 0.

    Shapes: ``target_stats`` (n, A), ``ref_stats`` (M, n, A), ``ref_keep`` (M, n) bool;
    with one query, (n,) and (M, n) are accepted too. The reference code fits with the
    median for μ; this function uses the mean (the Gaussian's maximum-likelihood fit).
    """
    if not min_std > 0:
        raise ValueError(f"min_std must be positive, got {min_std}")
    t, r, keep = _check_lira_inputs(target_stats, ref_stats, ref_keep)
    w_in = keep[:, :, None].astype(np.float64)
    w_out = 1.0 - w_in
    mu_out, sd_out, n_out = _fit(r, w_out, global_variance, min_std)
    offline = norm.logcdf((t - mu_out) / sd_out).mean(axis=1)
    scores = np.where(n_out > 0, offline, 0.0)
    if not online:
        return scores
    mu_in, sd_in, n_in = _fit(r, w_in, global_variance, min_std)
    log_in = -0.5 * ((t - mu_in) / sd_in) ** 2 - np.log(sd_in) - _HALF_LOG_2PI
    log_out = -0.5 * ((t - mu_out) / sd_out) ** 2 - np.log(sd_out) - _HALF_LOG_2PI
    llr = (log_in - log_out).mean(axis=1)
    return np.where((n_in > 0) & (n_out > 0), llr, scores)
