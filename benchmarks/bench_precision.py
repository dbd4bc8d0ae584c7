"""Benchmark 6: mixed precision (bfloat16 autocast) vs fp32, speed and accuracy, checked.

The same recipe and seed trained twice through ``train_model``, ``--precision fp32`` (the
fast engine) and ``--precision bf16``, on 10,520 images for 5 epochs: steady-state
samples/s and the test accuracy on the model's 10,520 held-out images. Mixed precision is
worth offering only where the accuracy difference stays within the run-to-run noise; the
row records both so the claim can be checked on every machine (CPUs with AVX-512 BF16 and
GPUs run bf16 matrix products natively).
"""

from __future__ import annotations

import torch

from benchmarks.bench_training import privaudit_trainer
from benchmarks.common import PeakMemory


def run(data, source: str, device: torch.device, quick: bool = False) -> list[dict]:
    models = ("mlp",) if quick else ("mlp", "cnn", "cnn-improved")
    n, epochs = (1024, 2) if quick else (10_520, 5)
    rows = []
    for name in models:
        out = {}
        for precision in ("fp32", "bf16"):
            with PeakMemory() as mem:
                speed, metrics = privaudit_trainer(name, data, n, epochs, 128, device, precision=precision)
            out[precision] = (speed, metrics["test_accuracy"], mem.result())
        rows.append({
            "benchmark": "precision", "model": name, "data": source, "images": n, "epochs": epochs,
            "fp32_samples_per_s": out["fp32"][0], "bf16_samples_per_s": out["bf16"][0],
            "bf16_speedup": out["bf16"][0] / out["fp32"][0],
            "fp32_test_accuracy": out["fp32"][1], "bf16_test_accuracy": out["bf16"][1],
            "accuracy_difference": out["bf16"][1] - out["fp32"][1],
            "fp32_memory": out["fp32"][2], "bf16_memory": out["bf16"][2],
        })
    return rows
