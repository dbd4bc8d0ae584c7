"""Benchmark: does ``--dry-run``'s estimate hold? Estimated against actual time, per command.

For each case, in a fresh cost cache (so the estimate measures its rates now, on this
machine, and no earlier run corrects it) and a fresh workspace:

1. ``privaudit <command> … --dry-run --json`` in a fresh process: the estimate (start-up
   included) and how long the plan took to make (its calibration);
2. ``privaudit <command> … --json`` in a fresh process: the actual wall time, from outside.

The ratio actual / estimated is the figure; the goal is that it lies within [1/1.5, 1.5].
The cases: the README's digits audit, ``reproduce hidden-state --dataset digits``, and with the
data a CIFAR-10 MLP audit (every attack, parts of 1,000, 10 epochs, κ 0.5 and 1, σ 1),
``reproduce mg-noise --scale reduced`` (one seed: the per-model costs are those of three seeds,
each seed a replicate of the same jobs) and ``reproduce masked-neurons --scale reduced`` (the
data folder's ``communities-and-crime/``). ``--quick``
runs the digits audit at 3 epochs only. ``load`` busy sibling processes (``while True: pass``,
one core each) run through the plan and the run when it is above 0: the estimate on a
machine that other work keeps busy, as a shared server or a laptop is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import temp_dir

GOAL = 1.5


def cases(data_dir: Path | None, quick: bool) -> list[tuple[str, list[str]]]:
    if quick:
        return [("digits audit, 3 epochs", ["audit", "--dataset", "digits", "--epochs", "3", "--kappas", "0.5",
                                            "--sigmas", "1", "--pool-size", "4", "--device", "cpu"])]
    out = [("digits audit (the README's command)", ["audit", "--dataset", "digits", "--device", "cpu"]),
           ("reproduce hidden-state --dataset digits", ["reproduce", "hidden-state", "--dataset", "digits"])]
    if data_dir is not None:
        out += [("cifar10 mlp audit (parts of 1,000, 10 epochs)",
                 ["audit", "--dataset", "cifar10", "--data-dir", str(data_dir), "--model", "mlp", "--part-size", "1000",
                  "--epochs", "10", "--kappas", "0.5,1", "--sigmas", "1", "--device", "cpu"]),
                ("reproduce mg-noise --scale reduced --seeds 0",
                 ["reproduce", "mg-noise", "--scale", "reduced", "--dataset", "cifar10", "--data-dir", str(data_dir),
                  "--seeds", "0", "--device", "cpu"]),
                ("reproduce masked-neurons --scale reduced",
                 ["reproduce", "masked-neurons", "--data-dir", str(data_dir / "communities-and-crime")])]
    return out


def _run(args: list[str], work: Path, env: dict) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "privaudit", *args, "--workdir", str(work), "--json"]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return wall, json.loads(out.stdout)


def run(data_dir: Path | None, quick: bool = False, load: int = 0) -> list[dict]:
    rows = []
    for name, args in cases(data_dir, quick):
        siblings = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
        try:
            rows.append(_case(name, args, load))
        finally:
            for p in siblings:
                p.kill()
                p.wait()
    return rows


def _case(name: str, args: list[str], load: int) -> dict:
    with temp_dir() as tmp:
        env = {**os.environ, "PRIVAUDIT_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONUNBUFFERED": "1"}
        plan_wall, plan = _run([*args, "--dry-run"], Path(tmp) / "work", env)
        actual, _ = _run(args, Path(tmp) / "work", env)
    estimated = plan["estimated_seconds"]
    ratio = actual / estimated
    print(f"[estimate] {name}{f' (load {load})' if load else ''}: estimated {estimated:.0f} s, actual "
          f"{actual:.0f} s, ratio {ratio:.2f} (dry run {plan_wall:.1f} s)", file=sys.stderr, flush=True)
    return {"benchmark": "estimate", "case": name, "load": load, "estimated_s": estimated, "actual_s": actual,
            "actual_over_estimated": ratio, "within_goal": 1 / GOAL <= ratio <= GOAL,
            "dry_run_wall_s": plan_wall, "calibration_s": plan["calibration_seconds"],
            "models": sum(m["models"] for m in plan["models"]) if "models" in plan else plan.get("runs"),
            "jobs": plan.get("jobs"), "notes": plan.get("notes", [plan.get("cost_model", "")])}
