"""Benchmark: inference at its own speed (issue: every forward pass outside training).

For each architecture, on the same 10,520 CIFAR-10 images, alternating twice and keeping
each side's best:

- privaudit's inference path, ``predict_logits`` (inference mode, channels-last for
  convolutions, its measured batch size);
- the plain path it replaced: ``torch.no_grad()``, NCHW, batches of 2,048;
- privaudit's training step (``train_model``, batch 128, steady state), the figure the
  target compares inference with: inference should run at least 3× as many samples/s.
"""

from __future__ import annotations

import time

import torch

from benchmarks.bench_training import privaudit_trainer
from benchmarks.common import sync
from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.data import Normaliser
from privaudit.models import build_model
from privaudit.training.results import predict_logits


def _plain(model: torch.nn.Module, x: torch.Tensor, batch: int = 2048) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[i:i + batch]) for i in range(0, len(x), batch)])


def _rate(fn, n: int) -> float:
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return n / (time.perf_counter() - t0)


def run(data, source: str, device: torch.device, quick: bool = False, repeats: int = 2) -> list[dict]:
    models = ("mlp",) if quick else ("mlp", "cnn", "cnn-improved")
    n = 1024 if quick else 10_520
    x = torch.from_numpy(Normaliser.fit(data.x[:n])(data.x[:n])).to(device)
    rows = []
    for name in models:
        torch.manual_seed(0)
        model = build_model(name, data.input_shape, data.num_classes, width=DEFAULT_WIDTHS[name]).to(device)
        ours = plain = train = 0.0
        for _ in range(1 if quick else repeats):
            ours = max(ours, _rate(lambda model=model: predict_logits(model, x), n))
            plain = max(plain, _rate(lambda model=model: _plain(model, x), n))
            train = max(train, privaudit_trainer(name, data, n, 2 if quick else 3, 128, device)[0])
        with torch.no_grad():
            diff = float((predict_logits(model, x[:512]) - _plain(model, x[:512]).cpu()).abs().max())
        rows.append({"benchmark": "inference", "model": name, "data": source, "images": n,
                     "privaudit_samples_per_s": ours, "plain_samples_per_s": plain, "train_samples_per_s": train,
                     "speedup_vs_plain": ours / plain, "inference_vs_training": ours / train,
                     "max_logit_difference": diff})
    return rows
