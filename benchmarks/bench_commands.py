"""Benchmark: what a user waits for, per command, split into fixed cost and cost per epoch.

Each side is a fresh process timed from outside (wall clock), at 1 and E epochs (E = 6 for the
mlp, whose epoch takes well under a second and would drown in the machine's run-to-run noise
over 2 epochs; 3 for the cnn), the sides interleaved over two rounds and each keeping its best
time; then

    per epoch = (wall at E epochs − wall at 1 epoch) / (E − 1),   fixed = wall at 1 epoch − per epoch.

The sides: the plain script a user writes (``benchmarks/plain_train.py``: torchvision
``CIFAR10``, ``DataLoader``, Adam, evaluation), ``privaudit train`` and ``privaudit train
--dp`` (σ 1), same model, 10,520 training images, batch 100, each in a fresh workspace.
Target: privaudit's fixed cost at most the plain script's + 2 s.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import temp_dir


def _wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:5])} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return wall


def run(root: Path, source: str, quick: bool = False, rounds: int = 2) -> list[dict]:
    models = ("mlp",) if quick else ("mlp", "cnn")
    images = 1_000 if quick else 10_520
    rows = []
    with temp_dir() as work:
        def side(name: str, model: str, e: int, k: int) -> list[str]:
            if name == "plain loop":
                return [sys.executable, "-m", "benchmarks.plain_train", "--data-dir", str(root), "--model", model,
                        "--epochs", str(e), "--images", str(images)]
            cmd = [sys.executable, "-m", "privaudit", "train", "--model", model, "--dataset", "cifar10",
                   "--data-dir", str(root), "--epochs", str(e), "--part-size", str(images), "--batch-size", "100",
                   "--workdir", str(Path(work) / f"{name}-{model}-{e}-{k}")]
            return cmd + (["--dp", "--noise-multiplier", "1"] if name == "privaudit DP-SGD" else [])

        for model in models:
            epochs = (1, 2) if quick else (1, 6 if model == "mlp" else 3)
            best: dict[tuple[str, int], float] = {}
            for k in range(1 if quick else rounds):
                for e in epochs:
                    for name in ("plain loop", "privaudit", "privaudit DP-SGD"):
                        t = _wall(side(name, model, e, k))
                        best[(name, e)] = min(best.get((name, e), float("inf")), t)
            for name in ("plain loop", "privaudit", "privaudit DP-SGD"):
                lo, hi = best[(name, epochs[0])], best[(name, epochs[1])]
                per_epoch = (hi - lo) / (epochs[1] - epochs[0])
                rows.append({"benchmark": "commands", "model": model, "side": name, "images": images,
                             "epochs": list(epochs), "wall_seconds": [lo, hi], "per_epoch_seconds": per_epoch,
                             "fixed_seconds": lo - epochs[0] * per_epoch})
    return rows
