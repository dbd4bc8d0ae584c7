"""Benchmark 2: DP-SGD throughput, privaudit vs Opacus with default settings vs no privacy.

Same model, same images, same batch size (expected 128 under Poisson sampling), σ = 1, C = 1.

- privaudit: ``train_model`` with DP-SGD (the fast engine: one backward pass, ghost norms
  for dense layers, per-sample gradients of convolutions formed in one product per layer);
- Opacus defaults: ``PrivacyEngine().make_private(...)`` with nothing but the required
  arguments (per-sample gradient hooks, Poisson sampling) over a ``DataLoader`` of the
  same in-memory tensors, Adam, timed over a fixed number of steps after warm-up steps
  (it is too slow for whole epochs);
- Opacus ghost clipping (``grad_sample_mode="ghost"``), privaudit's reference engine;
- privaudit without DP: the same model and recipe, no privacy.
"""

from __future__ import annotations

import time
import warnings

import torch
from torch import nn

from benchmarks.bench_training import privaudit_trainer
from benchmarks.common import PeakMemory, sync
from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.data import Normaliser
from privaudit.models import build_model


def opacus_defaults(model_name: str, data, n: int, batch: int, device: torch.device, steps: int,
                    warmup: int = 3, seed: int = 0) -> float:
    """Samples/s of Opacus's default DP-SGD (hooks) on the first ``n`` images."""
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    x = torch.from_numpy(Normaliser.fit(data.x[:n])(data.x[:n])).to(device)
    y = torch.from_numpy(data.y[:n]).to(device)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    model = build_model(model_name, data.input_shape, data.num_classes, width=DEFAULT_WIDTHS[model_name],
                        dp=True).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, optimizer, loader = PrivacyEngine().make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)
        loss_fn = nn.CrossEntropyLoss()
        seen, t0 = 0, None
        batches = iter(loader)
        for step in range(warmup + steps):
            if step == warmup:
                sync()
                t0 = time.perf_counter()
            try:
                xb, yb = next(batches)
            except StopIteration:
                batches = iter(loader)
                xb, yb = next(batches)
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
            if step >= warmup:
                seen += len(yb)
        sync()
    return seen / (time.perf_counter() - t0)


def run(data, source: str, device: torch.device, quick: bool = False) -> list[dict]:
    models = ("mlp",) if quick else ("mlp", "cnn", "cnn-improved")
    n = 1024 if quick else 10_520
    batch = 128
    rows = []
    for name in models:
        epochs = 2 if quick else 3
        dp = plain = 0.0
        for _ in range(1 if quick else 2):  # alternate, keep each side's best run
            with PeakMemory() as mem_dp:
                speed, dp_metrics = privaudit_trainer(name, data, n, epochs, batch, device, dp=True,
                                                      noise_multiplier=1.0)
            dp = max(dp, speed)
            with PeakMemory() as mem_plain:
                plain = max(plain, privaudit_trainer(name, data, n, epochs, batch, device)[0])
        with PeakMemory() as mem_op:
            opacus = opacus_defaults(name, data, n, batch, device, steps=4 if quick else 12)
        ghost, _ = privaudit_trainer(name, data, n, 2, batch, device, engine="reference", dp=True,
                                     noise_multiplier=1.0)
        rows.append({
            "benchmark": "dpsgd", "model": name, "data": source, "images": n, "batch": batch,
            "privaudit_dp_samples_per_s": dp, "non_private_samples_per_s": plain,
            "opacus_default_samples_per_s": opacus, "opacus_ghost_samples_per_s": ghost,
            "dp_vs_non_private": dp / plain, "speedup_vs_opacus_default": dp / opacus,
            "speedup_vs_opacus_ghost": dp / ghost, "epsilon": dp_metrics.get("epsilon"),
            "privaudit_dp_memory": mem_dp.result(), "non_private_memory": mem_plain.result(),
            "opacus_default_memory": mem_op.result(),
        })
    return rows

