"""Benchmark: are the pool replicates' intervals honest? (docs/methods/e-replicates.md E)

Two questions, each on simulated data with a known truth, no model trained:

1. **The interval of a setting's pool mean.** Simulated pools of M models (complementary
   pairs of random halves of n records whose difficulty and membership effect are fixed, so
   the per-setting truth is the expected pool mean over pools). Each pool runs the audit's
   leave-one-out and :func:`~privaudit.attacks.pool_attacks.pair_jackknife`; per attack and
   measure, the spread of the pool means over pools is compared with the mean jackknife
   standard error and with the plain standard error of the pair means, and the coverage of
   each 95 % t interval (P − 1 degrees of freedom) of the truth is counted.
2. **The verdicts.** Simulated audits (a baseline, three MG-noise and three DP-SGD settings,
   each setting's pool mean and jackknife standard error drawn as a 16-model pool gives them):
   how often a "leaks less" verdict appears where the two defences leak alike, and where
   DP-SGD leaks more by more than the stated detectable difference.

    python -m benchmarks.bench_pool_replicates --out benchmarks/reference/pool-replicates.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from scipy import stats

from privaudit.analysis.replicates import jackknife_se
from privaudit.attacks.pool_attacks import leave_one_out, pair_jackknife
from privaudit.attacks.registry import PER_SAMPLE_ATTACKS

ATTACKS = ("lira-online", "lira-shrunk-online", "rmia", "shadow-pool", "loss")
MEASURES = ("auc", "tpr_at_0p1pct_fpr", "gdp_mu", "eps_lower_bound")


def simulated_pool(rng: np.random.Generator, m: int, difficulty: np.ndarray, effect: np.ndarray,
                   population: np.ndarray) -> tuple[np.ndarray, ...]:
    """One pool's arrays for :func:`~privaudit.attacks.pool_attacks.leave_one_out`: model t's
    logit-scaled confidence on record i is its difficulty, plus its membership effect where t
    trains on i, plus a per-model shift (N(0, 0.2²)) and per-output noise (N(0, 0.8²)); two
    classes, the true class's logit the confidence itself. Returns (logits (m, n, 1, 2),
    population logits (m, z, 1, 2), keep (m, n), labels (n,), population labels (z,))."""
    n, z = len(difficulty), len(population)
    keep = np.zeros((m, n), bool)
    for j in range(m // 2):
        half = rng.random(n) < 0.5
        keep[2 * j], keep[2 * j + 1] = half, ~half
    shift = rng.normal(0.0, 0.2, (m, 1))
    phi = difficulty + effect * keep + 0.8 * rng.normal(size=(m, n)) + shift
    pop = population + 0.8 * rng.normal(size=(m, z)) + shift

    def logits(x: np.ndarray) -> np.ndarray:
        return np.stack([x, np.zeros_like(x)], -1)[:, :, None, :].astype(np.float32)
    return logits(phi), logits(pop), keep, np.zeros(n, int), np.zeros(z, int)


def pool_run(arrays: tuple[np.ndarray, ...], attacks: tuple[str, ...]) -> dict[str, dict[str, tuple]]:
    """Per attack and measure: (pool mean, jackknife SE as the audit computes it, plain SE of
    the pair means)."""
    full, _ = leave_one_out(*arrays, attacks=attacks, delta=1e-5)
    jack = pair_jackknife(*arrays, full, attacks=tuple(a for a in attacks if a in PER_SAMPLE_ATTACKS), delta=1e-5)
    out: dict[str, dict[str, tuple]] = {}
    for a in attacks:
        out[a] = {}
        for k in MEASURES:
            v = np.array([r[k] for r in full[a]])
            pairs = v.reshape(-1, 2).mean(1)
            plain = pairs.std(ddof=1) / math.sqrt(len(pairs))
            left = ([p[k] for p in jack[a]] if a in jack else [np.delete(v, [2 * j, 2 * j + 1]).mean()
                                                              for j in range(len(pairs))])
            out[a][k] = (float(v.mean()), jackknife_se(left), float(plain))
    return out


def intervals(models: int, pools: int, records: int, seed: int) -> dict:
    """Question 1 (module docstring)."""
    world = np.random.default_rng(seed)
    difficulty, effect = world.normal(0, 1.5, records), np.abs(world.normal(0.6, 0.6, records))
    population = world.normal(0, 1.5, records // 2)
    runs = [pool_run(simulated_pool(np.random.default_rng(seed + 1 + s), models, difficulty, effect, population),
                     ATTACKS) for s in range(pools)]
    q = stats.t.ppf(0.975, models // 2 - 1)
    rows = []
    for a in ATTACKS:
        for k in MEASURES:
            mean, jk, plain = (np.array([r[a][k][i] for r in runs]) for i in range(3))
            truth = (mean.sum() - mean) / (pools - 1)  # each pool against the others' mean
            rows.append({"attack": a, "measure": k, "truth": float(mean.mean()), "spread": float(mean.std(ddof=1)),
                         "jackknife_se": float(np.sqrt(np.mean(jk ** 2))),
                         "pair_se": float(np.sqrt(np.mean(plain ** 2))),
                         "coverage_jackknife": float(np.mean(np.abs(mean - truth) <= q * jk)),
                         "coverage_pairs": float(np.mean(np.abs(mean - truth) <= q * plain)),
                         "recomputed": a in PER_SAMPLE_ATTACKS})
    return {"models": models, "pools": pools, "records": records, "rows": rows}


def verdicts(worlds: int, seed: int) -> dict:
    """Question 2 (module docstring), on the worlds of tests/test_replicates.py."""
    from privaudit.reporting.summary import VERDICT_DP, VERDICT_MG, compare
    from tests.test_replicates import _world

    rng = np.random.default_rng(seed)
    null = [compare(_world(rng, 0.0), "gdp_mu", seed=w) for w in range(worlds)]
    excess = 1.4 * float(np.median([c["detectable"] for c in null]))
    alt = [compare(_world(rng, excess), "gdp_mu", seed=w) for w in range(worlds)]
    above = [c for c in alt if excess > c["detectable"]]
    false = sum(c["verdict"] in (VERDICT_MG, VERDICT_DP) for c in null)
    found = sum(c["verdict"] == VERDICT_MG for c in above)
    return {"worlds": worlds, "false_calls": false, "false_rate": false / worlds,
            "false_rate_ci": list(stats.binomtest(false, worlds).proportion_ci()),
            "excess": excess, "median_detectable": float(np.median([c["detectable"] for c in null])),
            "worlds_above_detectable": len(above), "found": found, "power": found / max(len(above), 1),
            "power_ci": list(stats.binomtest(found, max(len(above), 1)).proportion_ci())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=16)
    ap.add_argument("--pools", type=int, default=100)
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--worlds", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = {"intervals": intervals(args.models, args.pools, args.records, args.seed),
              "verdicts": verdicts(args.worlds, args.seed)}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    for r in result["intervals"]["rows"]:
        print(f"{r['attack']:20s} {r['measure']:18s} spread {r['spread']:.4f}  jackknife {r['jackknife_se']:.4f} "
              f"({r['coverage_jackknife']:.2f})  pairs {r['pair_se']:.4f} ({r['coverage_pairs']:.2f})")
    print(json.dumps(result["verdicts"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
