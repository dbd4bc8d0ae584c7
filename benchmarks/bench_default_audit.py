"""The README's main command before and after a change: ``privaudit audit --dataset digits``.

What a new user meets, on two source trees (``--before``, ``--after``: each a checkout of
privaudit, run with its own ``python -m privaudit``), interleaved over ``--rounds`` rounds
(before, after, before, after, ...) so that both see the same load, each keeping its best
wall time: the models trained, the wall time, and the audit's result on the undefended
target, the strongest attack's TPR at 0.1 % FPR and its Gaussian-DP μ, as the means over the
setting's pool replicates with 95 % intervals (mean ± 1.96 jackknife standard errors,
docs/methods/e-replicates.md E). Extra arguments per side (``--before-args``, ``--after-args``, e.g.
``--pool-size 8``) give the settings to compare.

    python -m benchmarks.bench_default_audit --before ../base --after . --out audit-before-after.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import temp_dir

#: the measures compared, as the trade-off table names their pool means and standard errors
MEASURES = ("tpr_at_0p1pct_fpr", "gdp_mu")


def strongest(table: pd.DataFrame) -> dict:
    """Per measure, the attack with the highest pool mean on the undefended target, with its
    95 % interval (mean ± 1.96 standard errors)."""
    base = table[(table["defence"] == "none") & table[f"pool_{MEASURES[0]}"].notna()]
    out = {}
    for m in MEASURES:
        row = base.loc[base[f"pool_{m}"].idxmax()]
        mean, se = float(row[f"pool_{m}"]), float(row[f"pool_{m}_se"])
        out[m] = {"attack": row["attack"], "mean": mean, "lo": mean - 1.96 * se, "hi": mean + 1.96 * se,
                  "replicates": int(row["pool_n"])}
    return out


def run_side(source: Path, extra: list[str]) -> dict:
    """One audit of the digits data in a fresh workspace with the privaudit of ``source``."""
    with temp_dir() as work:
        cmd = [sys.executable, "-m", "privaudit", "audit", "--dataset", "digits", "--workdir", work, *extra]
        env = {**os.environ, "PYTHONPATH": str(source.resolve()), "PYTHONUNBUFFERED": "1"}
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"audit failed in {source}: {proc.stderr.strip().splitlines()[-1:]}")
        models = sum(1 for p in (Path(work) / "models").iterdir() if not p.name.startswith("."))
        table = pd.read_csv(Path(work) / "reports" / "tradeoff.csv")
    return {"wall_seconds": wall, "models": models, "strongest": strongest(table)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_default_audit", description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, required=True, help="the source tree before the change")
    p.add_argument("--after", type=Path, required=True, help="the source tree after it")
    p.add_argument("--before-args", default="", help="extra audit arguments of the before side")
    p.add_argument("--after-args", default="", help="extra audit arguments of the after side")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("audit-before-after.json"))
    args = p.parse_args(argv)
    sides = {"before": (args.before, shlex.split(args.before_args)),
             "after": (args.after, shlex.split(args.after_args))}
    runs: dict[str, list[dict]] = {k: [] for k in sides}
    for r in range(args.rounds):
        for name, (source, extra) in sides.items():
            runs[name].append(run_side(source, extra))
            print(f"round {r + 1} {name}: {runs[name][-1]['wall_seconds']:.1f} s", flush=True)
    doc = {"rounds": args.rounds, "sides": {}}
    for name, (_source, extra) in sides.items():
        best = min(runs[name], key=lambda d: d["wall_seconds"])
        doc["sides"][name] = {"args": extra, "best_wall_seconds": best["wall_seconds"],
                              "wall_seconds": [d["wall_seconds"] for d in runs[name]], "models": best["models"],
                              "strongest": best["strongest"]}
    doc["wall_ratio_after_to_before"] = (doc["sides"]["after"]["best_wall_seconds"]
                                         / doc["sides"]["before"]["best_wall_seconds"])
    args.out.write_text(json.dumps(doc, indent=1))
    for name, side in doc["sides"].items():
        s = side["strongest"]
        print(f"{name:6s} {side['models']:4d} models  {side['best_wall_seconds']:6.1f} s  "
              + "  ".join(f"{m} {s[m]['mean']:.4f} [{s[m]['lo']:.4f}, {s[m]['hi']:.4f}] ({s[m]['attack']})"
                          for m in MEASURES))
    return doc


if __name__ == "__main__":
    main()
