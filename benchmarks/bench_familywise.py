"""How often does ``privaudit scan`` say "leaks" about a model that does not leak?

Each simulated set is what a scan of a model's logits sees when membership leaves no trace:
``--n`` members and ``--n`` non-members whose logits come from one distribution (10 classes,
N(0, 1) logits with the true class raised by 1, the test suite's scan data). Every set is
scored by the scan's five attacks exactly as :func:`privaudit.scanning.run.scan` scores them
(loss, confidence, entropy, modified entropy, and the gradient-boosted classifier on the
sorted posteriors, cross-validated over 5 stratified folds), and judged by

* the **old union rule**: "leaks" when some attack's own 95 % DeLong AUC interval lies above
  0.5 (the scan's headline before the family-wise test);
* the **new headline**: :func:`privaudit.analysis.familywise.family_test` at 5 % (a
  max-statistic permutation test over the four score attacks, within-fold permutation tests
  of the classifier, Holm–Bonferroni over the two weighted 4 : 1), what ``scan`` now says;
* for reference: the same two tests with equal weights; Holm–Bonferroni over the five
  attacks' one-sided DeLong p-values; and each part alone.

Each rate comes with its two-sided 95 % Clopper–Pearson interval. With ``--power-sets``, the
same rules on data that leaks a little (members' true-class logit raised by ``--gaps`` more)
show what the family-wise test costs in power.

    OMP_NUM_THREADS=1 python -m benchmarks.bench_familywise                # 2,000 sets, n = 500
    python -m benchmarks.bench_familywise --sets 600 --power-sets 100      # what fits in ~5 min on one core
    python -m benchmarks.bench_familywise --jobs 16                        # the same numbers, 16 processes

Set i is drawn from ``numpy.random.default_rng([seed, i])`` (and the leaky sets from
``[seed, 1, gap index, i]``), so the numbers do not depend on ``--jobs``. Writes
``familywise.json`` and ``familywise.md`` under ``--out`` (default ``benchmarks/reference/``)
and prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

CLASSES = 10
RULES = {
    "union": "old union rule: some attack's own 95 % AUC interval above 0.5",
    "headline": "new headline: family-wise 5 % (permutation tests, Holm weighted 4 : 1)",
    "holm_equal": "the same two tests, Holm with equal weights",
    "holm_delong": "Holm–Bonferroni over the five one-sided DeLong p-values",
    "scores_permutation": "max-statistic permutation test of the four score attacks alone, at 5 %",
    "classifier_folds": "the classifier's within-fold permutation tests alone (Bonferroni over 5 folds), at 5 %",
    "classifier_delong": "the classifier's own 95 % DeLong interval above 0.5 (one-sided 2.5 %)",
}


def one_set(args: tuple) -> dict:
    """The rules' verdicts on one simulated set, and the p-values behind them: ``args`` =
    (seed list, n, gap, permutations)."""
    from privaudit.analysis.familywise import family_test, holm
    from privaudit.analysis.metrics import auc_interval
    from privaudit.attacks.crossval import _out_of_fold, fold_ids, sorted_posteriors
    from privaudit.attacks.scores import confidence_scores, entropy_scores, loss_scores, modified_entropy_scores

    seed, n, gap, permutations = args
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, 2 * n)
    z = rng.normal(size=(2 * n, CLASSES))
    z[np.arange(2 * n), y] += 1.0
    z[np.arange(n), y[:n]] += gap                      # members first
    labels = np.r_[np.ones(n, np.int64), np.zeros(n, np.int64)]
    run_seed = int(rng.integers(2 ** 31))              # the scan's --seed: folds, trees, permutations
    fold = fold_ids(labels, 5, run_seed)
    scores = {"loss": loss_scores(z, y), "confidence": confidence_scores(z), "entropy": entropy_scores(z),
              "modified-entropy": modified_entropy_scores(z, y),
              "classifier": _out_of_fold(sorted_posteriors(z), labels, fold, run_seed)}
    lows = {a: auc_interval(labels, s)[1] for a, s in scores.items()}
    family = family_test(labels, scores, trained={"classifier": fold}, permutations=permutations, seed=run_seed)
    parts = {p["test"]: p["p_value"] for p in family.parts}
    perm, folds = parts["max-statistic permutation test"], parts["within-fold permutation tests"]
    return {"union": any(lo > 0.5 for lo in lows.values()), "headline": family.rejects,
            "holm_equal": bool(holm([perm, folds]).min() <= 0.05),
            "holm_delong": bool(holm(family.p_values.values()).min() <= 0.05),
            "scores_permutation": perm <= 0.05, "classifier_folds": folds <= 0.05,
            "classifier_delong": lows["classifier"] > 0.5,
            "p": {"family": family.p_value, "scores_permutation": perm, "classifier_folds": folds,
                  **{f"delong_{a}": p for a, p in family.p_values.items()}}}


def rates(results: list[dict]) -> dict:
    """Per rule: count, sets, rate and its 95 % Clopper–Pearson interval."""
    from privaudit.analysis.empirical import clopper_pearson

    out = {}
    for rule in RULES:
        k, n = int(sum(bool(r[rule]) for r in results)), len(results)
        lo, hi = clopper_pearson(k, n, 0.95)
        out[rule] = {"count": k, "sets": n, "rate": k / n, "lo": float(lo), "hi": float(hi)}
    return out


def _map(tasks: list[tuple], jobs: int) -> list[dict]:
    if jobs <= 1:
        return [one_set(t) for t in tasks]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(one_set, tasks, chunksize=max(1, len(tasks) // (8 * jobs))))


def markdown(doc: dict) -> str:
    s = doc["settings"]
    lines = ["# Family-wise scan headline: false alarms on data without a leak",
             "",
             f"{s['sets']:,} simulated sets of {s['n']:,} members + {s['n']:,} non-members whose logits come from "
             f"one distribution ({CLASSES} classes); the scan's five attacks (loss, confidence, entropy, modified "
             f"entropy, the cross-validated gradient-boosted classifier); {s['permutations']:,} permutations; seed "
             f"{s['seed']}. `{doc['command']}`, {doc['seconds']:.0f} s on {doc['machine']}.",
             "",
             "| rule | false alarms | rate | 95 % Clopper–Pearson |",
             "|---|---:|---:|---:|"]
    for rule, r in doc["null"].items():
        lines.append(f"| {RULES[rule]} | {r['count']} / {r['sets']} | {100 * r['rate']:.1f} % | "
                     f"{100 * r['lo']:.1f}–{100 * r['hi']:.1f} % |")
    if doc.get("power"):
        lines += ["", f"Power: the share of sets called \"leaks\" when the members' true-class logit is raised by "
                      f"the gap ({s['power_sets']:,} sets per gap).", "",
                  "| gap | " + " | ".join(("old union rule", "new headline", "equal-weight Holm",
                                           "Holm over DeLong")) + " |",
                  "|---:|---:|---:|---:|---:|"]
        for gap, r in doc["power"].items():
            lines.append(f"| {gap} | " + " | ".join(
                f"{100 * r[k]['rate']:.0f} % ({100 * r[k]['lo']:.0f}–{100 * r[k]['hi']:.0f})"
                for k in ("union", "headline", "holm_equal", "holm_delong")) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", type=int, default=2000, help="simulated sets without a leak")
    p.add_argument("--n", type=int, default=500, help="members (and non-members) per set")
    p.add_argument("--permutations", type=int, default=999)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--power-sets", type=int, default=200, help="sets per leak strength (0: no power check)")
    p.add_argument("--gaps", default="0.1,0.2", help="leak strengths of the power check")
    p.add_argument("--jobs", type=int, default=1, help="processes (the numbers do not depend on it)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "reference"))
    args = p.parse_args(argv)
    start = time.perf_counter()
    null = _map([([args.seed, i], args.n, 0.0, args.permutations) for i in range(args.sets)], args.jobs)
    doc = {"settings": {"sets": args.sets, "n": args.n, "permutations": args.permutations, "seed": args.seed,
                        "power_sets": args.power_sets, "gaps": args.gaps},
           "null": rates(null), "power": {},
           # one column per test, one entry per simulated set (4 significant digits)
           "null_p_values": {k: [float(f"{r['p'][k]:.4g}") for r in null] for k in (null[0]["p"] if null else {})}}
    if args.power_sets > 0:
        for g, gap in enumerate(float(v) for v in args.gaps.split(",") if v):
            leaky = _map([([args.seed, 1, g, i], args.n, gap, args.permutations) for i in range(args.power_sets)],
                         args.jobs)
            doc["power"][f"{gap:g}"] = rates(leaky)
    doc["seconds"] = time.perf_counter() - start
    # the command that reproduces the numbers: where the files went does not change them
    shown = list(argv if argv is not None else sys.argv[1:])
    if "--out" in shown:
        i = shown.index("--out")
        del shown[i:i + 2]
    shown = [a for a in shown if not a.startswith("--out=")]
    doc["command"] = "python -m benchmarks.bench_familywise " + " ".join(shown)
    doc["machine"] = (f"{platform.machine()}, {args.jobs} process{'es' if args.jobs > 1 else ''}, "
                      f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "familywise.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc)
    (out / "familywise.md").write_text(text)
    print(text)
    return doc


if __name__ == "__main__":
    main()
