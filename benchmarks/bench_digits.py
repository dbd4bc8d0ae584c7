"""Benchmark: the README's main command, ``privaudit audit --dataset digits``, timed from
outside, beside an earlier version of privaudit on the same machine in the same run.

Each side is a fresh process (``python -m privaudit audit --dataset digits --json``) in a
fresh workspace, so the wall time includes the interpreter, the imports and every phase. The
sides alternate (current, baseline, current, baseline, …) over ``rounds`` rounds and each
keeps its best time (these machines are shared). The baseline is a git revision of this
repository (``--baseline REV``, e.g. the commit before a speed-up), checked out into a
temporary worktree and run from it with ``PYTHONPATH``; without one only the current
version runs. The two trade-off tables are compared column by column (largest absolute
difference of the test accuracies, ε, AUC, precision, recall, TPR at 1 % FPR and ε lower
bound), so a speed-up that changed the numbers shows at once. Target: ≤ 20 s wall.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import temp_dir

COMPARED = ("train_accuracy", "test_accuracy", "epsilon", "epsilon_replace_one", "auc", "precision", "recall",
            "tpr_at_1pct_fpr", "eps_lower_bound")
REPO = Path(__file__).resolve().parents[1]


def _audit(work: Path, pythonpath: str | None, quick: bool, extra: tuple[str, ...] = ()
           ) -> tuple[float, dict, pd.DataFrame]:
    cmd = [sys.executable, "-m", "privaudit", "audit", "--dataset", "digits", "--device", "cpu",
           "--workdir", str(work), "--json", *extra]
    if quick:
        cmd += ["--epochs", "3", "--kappas", "0.5", "--sigmas", "1", "--pool-size", "4"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"digits audit failed: {proc.stderr.strip().splitlines()[-1:]}")
    return wall, json.loads(proc.stdout), pd.read_csv(work / "reports" / "tradeoff.csv")


def table_differences(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, float]:
    """Largest |a − b| per compared column over the rows both tables hold (target, attack);
    ``rows_only_in_one`` counts the rest."""
    key = ["target_run", "attack"]
    both = a.merge(b, on=key, suffixes=("_a", "_b"))
    out = {"rows_only_in_one": float(len(a) + len(b) - 2 * len(both))}
    for col in COMPARED:
        if f"{col}_a" in both:
            x, y = both[f"{col}_a"].to_numpy(float), both[f"{col}_b"].to_numpy(float)
            same_nan = np.isnan(x) & np.isnan(y)
            diff = np.where(same_nan, 0.0, np.abs(x - y))
            out[col] = float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))) if diff.size else 0.0
    return out


def run(baseline: str | None, quick: bool = False, rounds: int = 3, extra: tuple[str, ...] = ()) -> list[dict]:
    """``extra``: more options of the audit on both sides (e.g. ``--defenses all --epochs 30``)."""
    rounds = 1 if quick else rounds
    with temp_dir() as tmp:
        sides = {"current": None}
        if baseline:
            tree = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), baseline],
                           check=True, capture_output=True)
            sides["baseline"] = str(tree)
        try:
            best: dict[str, tuple[float, dict, pd.DataFrame]] = {}
            for k in range(rounds):
                for name, path in sides.items():
                    work = Path(tmp) / f"{name}-{k}"
                    work.mkdir()
                    wall, doc, table = _audit(work, path, quick, extra)
                    if name not in best or wall < best[name][0]:
                        best[name] = (wall, doc, table)
        finally:
            if baseline:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
    rows = []
    for name, (wall, doc, table) in best.items():
        row = {"benchmark": "digits", "side": name, "revision": baseline if name == "baseline" else "working tree",
               "rounds": rounds, "wall_seconds": wall, "command_seconds": doc["wall_seconds"],
               "phase_seconds": doc.get("phase_seconds", {}), "jobs": doc.get("jobs"), "quick": quick,
               "options": " ".join(extra)}
        if name == "current" and "baseline" in best:
            row["differences_from_baseline"] = table_differences(table, best["baseline"][2])
        rows.append(row)
    return rows
