"""Benchmark 8: what a user waits for before anything runs.

Times, as a user runs them (a fresh ``python -m privaudit`` process each, wall clock), a bare
``python -c pass``, ``privaudit --help``, ``privaudit epsilon --help``, a usage error (an
unknown option) and a refused value (``train --epochs 0``), interleaved (A B C D E, A B C D
E, …) so that a slow moment of a shared machine hits every side alike, and reports each
one's best and median. Also ``import torch`` alone, the cost the lazy imports avoid.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import torch": [sys.executable, "-c", "import torch"],
    "privaudit --help": [sys.executable, "-m", "privaudit", "--help"],
    "privaudit epsilon --help": [sys.executable, "-m", "privaudit", "epsilon", "--help"],
    "usage error (--bogus)": [sys.executable, "-m", "privaudit", "train", "--bogus"],
    "bad value (train --epochs 0)": [sys.executable, "-m", "privaudit", "train", "--epochs", "0"],
}
EXPECTED_CODE = {"usage error (--bogus)": 2, "bad value (train --epochs 0)": 2}


def run(quick: bool = False) -> list[dict]:
    repeats = 2 if quick else 7
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(repeats):
        for name, cmd in CASES.items():
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            times[name].append(time.perf_counter() - t)
            if proc.returncode != EXPECTED_CODE.get(name, 0):
                raise RuntimeError(f"{name}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    bare = min(times["python -c pass"])
    return [{"benchmark": "startup", "case": name, "best_seconds": min(ts), "median_seconds": statistics.median(ts),
             "runs": len(ts), "best_minus_bare_python_seconds": min(ts) - bare} for name, ts in times.items()]
