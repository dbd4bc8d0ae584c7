"""The convex approximation's private training against the machine's matmul peak.

One epoch of NoisyCGD and of DP-SGD on the convex two-layer ReLU approximation (docs/methods/b-hidden-state.md
B.1–B.4) on CIFAR-10-shaped inputs (d = 3,072, unit-norm rows, 10 classes), batch 1,000, at
P = 20 (the reduced reproduction) and P = 100 (the paper's). The per-sample clipping is in
closed form (:func:`privaudit.training.noisycgd.clipped_mean_gradient`), so a step is the
gates' product, the logits' product and the gradient's product: its useful work is
:func:`privaudit.reproduction.hidden_state.flops_per_epoch`. The share of peak is that work
over the time, against the peak measured in the same run. Rounds interleave the two
algorithms; each side's best round is kept.
"""

from __future__ import annotations

import time

import torch

from privaudit.models.convex_relu import ConvexReLU
from privaudit.reproduction.hidden_state import flops_per_epoch
from privaudit.reproduction.hidden_state_methods import Recipe
from privaudit.training.noisycgd import train_convex_dpsgd, train_noisycgd


def _epoch_seconds(algorithm: str, x: torch.Tensor, y: torch.Tensor, gates: int) -> float:
    torch.manual_seed(0)
    model = ConvexReLU(x.shape[1], 10, gates)
    common = dict(noise_multiplier=5.0, max_grad_norm=1.0, epochs=1, lr=3.6 / gates, l2=0.0,
                  generator=torch.Generator().manual_seed(0), noise_seed=1)
    t = time.perf_counter()
    with torch.no_grad():
        if algorithm == "noisycgd":
            train_noisycgd(model, x, y, batch_size=1000, **common)
        else:
            train_convex_dpsgd(model, x, y, sample_rate=1000 / len(y), **common)
    return time.perf_counter() - t


def run(device: torch.device, peak_gflops: float, quick: bool = False) -> list[dict]:
    n = 4000 if quick else 20_000
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(n, 3072, generator=g), dim=1).to(device)
    y = torch.randint(0, 10, (n,), generator=g).to(device)
    rows = []
    for gates in ((20,) if quick else (20, 100)):
        best = {"noisycgd": float("inf"), "dpsgd": float("inf")}
        for _ in range(2 if quick else 3):
            for algorithm in best:
                best[algorithm] = min(best[algorithm], _epoch_seconds(algorithm, x, y, gates))
        recipe = Recipe(epochs=1, batch=1000, gates=gates, width=1, features=1, lr_convex=3.6 / gates,
                        eta_lambda=5.4e-5, lr_relu=0.1, lr_logistic=0.1)
        flops = flops_per_epoch("noisycgd-convex", recipe, n, 3072)
        for algorithm, seconds in best.items():
            rows.append({"benchmark": "convex", "algorithm": algorithm, "gates": gates, "images": n,
                         "epoch_seconds": seconds, "samples_per_s": n / seconds, "flops_per_epoch": flops,
                         "gflops": flops / seconds / 1e9, "peak_gflops": peak_gflops,
                         "fraction_of_peak": flops / seconds / 1e9 / peak_gflops})
    return rows
