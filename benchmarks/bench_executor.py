"""Benchmark 7: one reduced CIFAR-10 audit on the local executor and on a local Ray instance.

Runs the real command line three times, each in a fresh workspace: ``--executor local``,
``--executor ray`` with the default CPUs per job (all of this machine's threads, so jobs run
one at a time and the difference is Ray's cost), and ``--executor ray --cpus-per-job 1``
(two jobs at a time on 2 cores, one thread each). Reported: wall times, the job count, the
overhead per job ((Ray − local) / jobs, Ray's start-up included) and whether the first two
wrote identical trade-off tables (same seed, same threads: they must).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import temp_dir


def _audit(root: Path, device: str, quick: bool, extra: list[str]) -> tuple[float, dict, bytes]:
    part, epochs, pool = (500, 2, 4) if quick else (2_000, 3, 4)
    with temp_dir() as work:
        cmd = [sys.executable, "-m", "privaudit", "audit", "--dataset", "cifar10", "--data-dir", str(root),
               "--part-size", str(part), "--epochs", str(epochs), "--kappas", "0.5", "--sigmas", "1",
               "--attacks", "shadow,lira", "--pool-size", str(pool), "--device", device, "--workdir", work,
               "--json", *extra]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"audit {' '.join(extra)} failed: {proc.stderr.strip().splitlines()[-1:]}")
        return wall, {**json.loads(proc.stdout), "part": part, "epochs": epochs, "pool": pool}, \
            (Path(work) / "reports" / "tradeoff.csv").read_bytes()


def _ray_start_seconds() -> float:
    code = ("import time, ray; t = time.perf_counter(); ray.init(num_cpus=2, include_dashboard=False, "
            "log_to_driver=False); print(time.perf_counter() - t); ray.shutdown()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return float(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else float("nan")


def run(root: Path, source: str, device: str, quick: bool = False) -> list[dict]:
    try:
        import ray  # noqa: F401
    except ImportError:
        print("[benchmarks] executor: Ray is not installed (pip install \"privaudit[ray]\"); skipped", file=sys.stderr)
        return []
    local_wall, local, local_csv = _audit(root, device, quick, ["--executor", "local"])
    ray_wall, doc, ray_csv = _audit(root, device, quick, ["--executor", "ray"])
    par_wall, _, _ = _audit(root, device, quick, ["--executor", "ray", "--cpus-per-job", "1"])
    jobs = doc["jobs"]
    return [{
        "benchmark": "executor", "data": source, "part_size": local["part"], "epochs": local["epochs"],
        "pool_size": local["pool"], "jobs": jobs, "local_seconds": local_wall, "ray_seconds": ray_wall,
        "ray_1cpu_per_job_seconds": par_wall, "ray_start_seconds": _ray_start_seconds(),
        "overhead_per_job_seconds": (ray_wall - local_wall) / jobs,
        "identical_tables": local_csv == ray_csv,
    }]
