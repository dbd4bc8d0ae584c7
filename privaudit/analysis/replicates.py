"""Pool models as replicates of their setting (docs/methods/e-replicates.md E).

Every reference model of a setting's pool is attacked in turn with the other pairs as
references (:func:`privaudit.attacks.pool_attacks.leave_one_out`), so a pool of M models
gives M replicates of every measure of the setting: its test accuracy, and per attack AUC,
TPR at 1 % and 0.1 % FPR, the GDP estimate μ with its ε, and the Clopper–Pearson ε bound.

**The interval of their mean.** The M values are not independent: the two models of a
complementary pair train on complementary halves of the same records, and every target is
scored against the same references, so the values are positively correlated through them
and the plain standard error s/√M is too small. The standard error of the mean is the
delete-one-pair jackknife (Quenouille–Tukey) with every attack recomputed
(:func:`privaudit.attacks.pool_attacks.pair_jackknife`): with θ̂₍ⱼ₎ the mean over the targets
of the pool without pair j (j = 1 … P, P = M/2), none of whose scores used pair j,

    SE² = (P − 1)/P · Σⱼ (θ̂₍ⱼ₎ − θ̄)²,   θ̄ = mean of the θ̂₍ⱼ₎,

read with Student's t on P − 1 degrees of freedom. For a plain mean (the test accuracy) it
equals the standard error of the P pair means. It covers what differs from pool to pool of
one seed: training randomness and which records each model trains on; the records
themselves are fixed by the seed (replicate seeds to cover them: models are then nested in
seeds). Its coverage on simulated pools with a known per-setting truth is measured by
``benchmarks/bench_pool_replicates.py`` and tested in ``tests/test_replicates.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: the replicate's utility, beside the attack measures it contributes
#: (``privaudit.attacks.pool_attacks.REPLICATED``)
ACCURACY = "test_accuracy"


def jackknife_se(leave_out: Sequence[float]) -> float:
    """The jackknife standard error from the P leave-one-unit-out estimates θ̂₍ⱼ₎:
    sqrt((P − 1)/P · Σ (θ̂₍ⱼ₎ − θ̄)²); NaN with fewer than two finite values."""
    v = np.asarray(leave_out, dtype=float)
    v = v[np.isfinite(v)]
    p = len(v)
    if p < 2:
        return math.nan
    return float(math.sqrt((p - 1) / p * float(np.sum((v - v.mean()) ** 2))))


def replicates(per_model: Mapping[str, Sequence[Mapping[str, Any]]],
               jackknife: Mapping[str, Sequence[Mapping[str, Any]]], accuracies: Sequence[float],
               measures: Sequence[str], delta: float) -> dict[str, dict[str, Any]]:
    """What an attack folder keeps of its pool's replicates, per attack: ``models``, one dict
    per pool model (its ``test_accuracy`` and each of ``measures`` as the leave-one-out
    target), ``pairs``, one dict per left-out pair (the means of the pool without it,
    accuracy included; empty when the pool is too small to leave a pair out), and ``delta``,
    the δ of the measures' ε. An attack of ``jackknife`` takes its left-out means from there
    (recomputed without the pair; a measure it does not recompute gets no standard error);
    any other's are the means of the other models' values, which is what recomputing gives
    for an attack whose scores do not read the references sample by sample."""
    acc = np.asarray(accuracies, dtype=float)
    pairs = len(acc) // 2 if len(acc) >= 6 and len(acc) % 2 == 0 else 0
    out = {}
    for attack, rows in per_model.items():
        models = [{ACCURACY: float(a), **{k: float(r[k]) for k in measures}} for a, r in zip(acc, rows)]
        recomputed = jackknife.get(attack)
        jk = []
        for j in range(pairs):
            rest = [m for i, m in enumerate(models) if i // 2 != j]
            plain = (ACCURACY,) if recomputed else (ACCURACY, *measures)
            left = {k: float(np.mean([m[k] for m in rest])) for k in plain}
            jk.append({**left, **({k: float(v) for k, v in recomputed[j].items()} if recomputed else {})})
        out[attack] = {"models": models, "pairs": jk, "delta": float(delta)}
    return out


def pool_columns(kept: Mapping[str, Any], measures: Sequence[str]) -> dict[str, float]:
    """The trade-off table's pool columns of one attack's :func:`replicates`: ``pool_n`` (the
    replicates), ``pool_delta`` (the δ of their ε), and for the test accuracy and each measure ``pool_<measure>`` (the
    mean over the pool's models) and ``pool_<measure>_se`` (its jackknife standard error, NaN without
    pairs to leave out)."""
    models, pairs = kept.get("models", []), kept.get("pairs", [])
    out: dict[str, float] = {"pool_n": float(len(models)), "pool_delta": float(kept.get("delta", math.nan))}
    for k in (ACCURACY, *measures):
        vals = np.array([m[k] for m in models], dtype=float)
        out[f"pool_{k}"] = float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan
        out[f"pool_{k}_se"] = (jackknife_se([p.get(k, math.nan) for p in pairs]) if len(pairs) == len(models) // 2
                               else math.nan)
    return out
