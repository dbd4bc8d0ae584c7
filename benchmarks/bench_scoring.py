"""Benchmark 5: attack scoring on 60,000 samples × 64 reference models of saved logits.

Saved logits are what LiRA's staging and privaudit's pools keep (float32, (M, n, A, C): 64
models × 60,000 samples × 2 queries × 10 classes, 307 MB), plus a 10,000-sample population
for RMIA. The benchmark times privaudit scoring one target against all 64 references with
every pool attack (LiRA online / offline, per-sample and global variance, RMIA with its
calibrated ``a``, the many-shadow logistic regression, loss, confidence), and, for
comparison, the per-sample loop a notebook would write for LiRA online alone
(scipy ``norm.logpdf`` per sample, as in the reference code's per-example fitting), timed
on 1,000 samples and scaled to 60,000.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.stats import norm

from benchmarks.common import PeakMemory
from privaudit.attacks.features import compute_features
from privaudit.attacks.lira import logit_scaled_confidence
from privaudit.attacks.pool_attacks import pool_scores
from privaudit.attacks.registry import POOL_BASELINES, REFERENCE_ATTACKS
from privaudit.data.splits import pool_keep


def synthetic_logits(models: int, n: int, pop: int, queries: int = 2, classes: int = 10, seed: int = 0):
    """Seeded logits where IN models are more confident on their members (a real signal)."""
    rng = np.random.default_rng(seed)
    keep = pool_keep(models, n, seed)
    labels = rng.integers(0, classes, n)
    logits = rng.standard_normal((models, n, queries, classes), dtype=np.float32)
    boost = np.where(keep, 1.5, 0.5).astype(np.float32)                   # (M, n)
    onehot = np.eye(classes, dtype=np.float32)[labels]                       # (n, C)
    logits += boost[:, :, None, None] * onehot[None, :, None, :]
    pop_labels = rng.integers(0, classes, pop)
    pop_logits = rng.standard_normal((models, pop, queries, classes), dtype=np.float32)
    target = rng.standard_normal((n, queries, classes), dtype=np.float32)
    target_pop = rng.standard_normal((pop, queries, classes), dtype=np.float32)
    return target, target_pop, labels, pop_labels, logits, pop_logits, keep


def naive_lira_online(target_logits, ref_logits, keep, labels, samples: int) -> float:
    """Seconds for a per-sample LiRA-online loop over ``samples`` samples."""
    t = time.perf_counter()
    for i in range(samples):
        phi_t = logit_scaled_confidence(target_logits[i], labels[i])
        phi_r = logit_scaled_confidence(ref_logits[:, i], labels[i])
        ins, outs = phi_r[keep[:, i]], phi_r[~keep[:, i]]
        float(np.mean(norm.logpdf(phi_t, ins.mean(0), ins.std(0) + 1e-6)
                      - norm.logpdf(phi_t, outs.mean(0), outs.std(0) + 1e-6)))
    return time.perf_counter() - t


def run(quick: bool = False) -> list[dict]:
    models, n, pop = (16, 6_000, 1_000) if quick else (64, 60_000, 10_000)
    target, target_pop, labels, pop_labels, logits, pop_logits, keep = synthetic_logits(models, n, pop)
    attacks = REFERENCE_ATTACKS + POOL_BASELINES
    with PeakMemory() as mem:
        t = time.perf_counter()
        compute_features(logits, labels)
        t_features = time.perf_counter() - t
        t = time.perf_counter()
        scores = pool_scores(target, target_pop, labels, pop_labels, logits, pop_logits, keep, attacks=attacks)
        t_all = time.perf_counter() - t
    sample = 200 if quick else 1_000
    t_naive = naive_lira_online(target, logits, keep, labels, sample) * n / sample
    return [{
        "benchmark": "scoring", "models": models, "samples": n, "population": pop, "queries": 2,
        "logits_mb": round((logits.nbytes + pop_logits.nbytes) / 2 ** 20, 1), "attacks": list(scores),
        "privaudit_seconds_all_attacks": t_all, "statistics_seconds": t_features,
        "naive_lira_online_seconds_estimated": t_naive, "speedup_vs_naive_lira": t_naive / t_all,
        "privaudit_memory": mem.result(),
    }]
