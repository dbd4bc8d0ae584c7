"""Benchmark 4: ``privaudit audit`` end to end on CIFAR-10, with where its time goes.

Runs the real command line in a fresh workspace (``python -m privaudit audit ... --json``)
at reduced scale: 2,000-image parts, 5 epochs, κ ∈ {0.5}, σ ∈ {1}, a pool of 8 reference
models, every attack. The wall time includes the interpreter and imports; the shares come
from the audit's own phase clock (:mod:`privaudit.core.timing`): data loading, training
(targets, shadows, pools, canary models), attacks (logits, scoring, metrics) and reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import temp_dir


def run(root: Path, source: str, device: str, quick: bool = False) -> list[dict]:
    part, epochs, pool = (500, 2, 4) if quick else (2_000, 5, 8)
    with temp_dir() as work:
        cmd = [sys.executable, "-m", "privaudit", "audit", "--dataset", "cifar10", "--data-dir", str(root),
               "--part-size", str(part), "--epochs", str(epochs), "--kappas", "0.5", "--sigmas", "1",
               "--pool-size", str(pool), "--device", device, "--workdir", work, "--json"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"audit failed: {proc.stderr.strip().splitlines()[-1:]}")
        doc = json.loads(proc.stdout)
        models = sum(1 for p in (Path(work) / "models").iterdir() if not p.name.startswith("."))
    phases = doc["phase_seconds"]
    inside = doc["wall_seconds"]
    shares = {k: v / wall for k, v in phases.items()}
    shares["startup_and_other"] = max(0.0, 1.0 - sum(shares.values()))
    return [{
        "benchmark": "audit", "data": source, "part_size": part, "epochs": epochs, "pool_size": pool,
        "targets": len(doc["targets"]), "wall_seconds": wall, "command_seconds": inside,
        "phase_seconds": phases, "phase_shares": shares,
        "models_trained": models,
    }]
