"""Benchmark 3: reference pools, K models of one recipe on different data halves.

privaudit's pool trainer (:func:`privaudit.pipeline.runs.ensure_models`, what ``audit`` and
``attack`` train reference pools with, directly or through the executor's train jobs: stacked
in the runs of :func:`~privaudit.training.stacked.stack_groups` where that is faster, else one
by one, each model saved into a fresh workspace as the product saves it) vs the same models
trained one after another with ``train_model`` (kept in memory). Recipes:

- ``digits mlp``: the embedded default's MLP (64 inputs, width 512), its own recipe (two
  epochs with ``--quick``);
- ``cifar mlp-128`` and ``cifar mlp-512``: a small CIFAR-10 MLP and the paper's, where one
  model's products already run near peak through oneDNN: privaudit trains these one by
  one, and the forced stacked run (``stacked_forced``: the stacked engine with its size limits
  lifted, :func:`_limits_lifted`) shows why. ``--quick`` forces a tiny CIFAR MLP too, so that
  the forced path runs in the tests.

Both sides also report that the stacked models equal the one-by-one models (the largest
weight difference and the test-accuracy difference) and their peak memory.
"""

from __future__ import annotations

import tempfile
import time
from unittest import mock

import torch

from benchmarks.common import PeakMemory, sync
from privaudit.core.config import make_config
from privaudit.data import ImageData, load_dataset
from privaudit.pipeline.runs import DataCache, ensure_models
from privaudit.pipeline.workspace import Workspace
from privaudit.training import stacked, train_model


class _GivenData(DataCache):
    """A data cache that serves the benchmark's dataset (real or generated CIFAR-10) under
    any name, instead of loading one."""

    def __init__(self, data: ImageData):
        super().__init__()
        self.data = data

    def get(self, name: str) -> ImageData:
        return self.data


def _timed(fn):
    sync()
    t = time.perf_counter()
    with PeakMemory() as mem:
        out = fn()
    sync()
    return out, time.perf_counter() - t, mem.result()


def _max_weight_diff(a, b) -> float:
    return max(float((p.detach().cpu() - q.detach().cpu()).abs().max())
               for ma, mb in zip(a, b) for p, q in zip(ma.parameters(), mb.parameters()))


def _limits_lifted():
    """The stacked engine's input and size limits (``stacked.can_stack``) lifted while it is
    entered: what the forced run measures is that engine on a recipe those limits keep from it."""
    return mock.patch.multiple(stacked, STACK_MAX_INPUT=1 << 62, STACK_MAX_MACS=1 << 62)


def _pool(cfgs, data: ImageData, device: torch.device, root: str):
    """The product's path: the models of ``cfgs`` trained (none is in the fresh workspace at
    ``root``) and saved by :func:`~privaudit.pipeline.runs.ensure_models`."""
    ws = Workspace(root).ensure_writable()
    runs = ensure_models(cfgs, ws, _GivenData(data), device)
    assert not any(r.reused for r in runs)
    return ws, runs


#: ``--quick``'s digits recipe: its architecture (so it stacks as the full one does), two epochs
#: instead of the embedded default's 60, which trained 16 models of 60 epochs (minutes on a busy
#: 2-core machine) in a suite meant to take seconds
QUICK = {"epochs": 2}


def run(cifar, source: str, device: torch.device, quick: bool = False) -> list[dict]:
    digits = load_dataset("digits")
    recipes = [("digits mlp", digits, make_config(model="mlp", dataset="digits", **QUICK if quick else {}))]
    if quick:
        recipes.append(("cifar mlp-16", cifar, make_config(model="mlp", dataset="cifar10", width=16, part_size=64,
                                                          epochs=1)))
    else:
        part = 2_500
        recipes += [
            ("cifar mlp-128", cifar, make_config(model="mlp", dataset="cifar10", width=128, part_size=part, epochs=3)),
            ("cifar mlp-512", cifar, make_config(model="mlp", dataset="cifar10", width=512, part_size=part, epochs=3)),
        ]
    sizes = (8,) if quick else (8, 16)
    rows = []
    for label, data, base in recipes:
        for k in sizes:
            cfgs = [base.as_reference(k, i).validated() for i in range(k)]
            with tempfile.TemporaryDirectory(prefix="privaudit-bench-pool-") as root:
                (ws, runs), t_pool, mem_pool = _timed(lambda cfgs=cfgs, data=data: _pool(cfgs, data, device, root))
                pool = [ws.load_model(r.name, data.input_shape, data.num_classes).model for r in runs]
            seq, t_seq, mem_seq = _timed(lambda cfgs=cfgs, data=data: [train_model(c, data, device) for c in cfgs])
            row = {
                "benchmark": "pool", "recipe": label, "data": source if data is cifar else "digits",
                "models": k, "epochs": base.train.epochs, "members_per_model": base.data.part_size,
                "stacked": any(len(g) > 1 for g in stacked.stack_groups(cfgs, data.input_shape, len(data.y))),
                "privaudit_seconds": t_pool, "one_by_one_seconds": t_seq, "speedup": t_seq / t_pool,
                "max_weight_difference": _max_weight_diff(pool, [r.model for r in seq]),
                "max_test_accuracy_difference": max(abs(a.metrics["test_accuracy"] - b.metrics["test_accuracy"])
                                                    for a, b in zip(runs, seq)),
                "privaudit_memory": mem_pool, "one_by_one_memory": mem_seq,
                "dataset_mb": round(data.x.nbytes / 2 ** 20, 1),
            }
            if not row["stacked"]:
                with _limits_lifted():
                    _, t_forced, _ = _timed(lambda cfgs=cfgs, data=data: stacked.train_stacked(cfgs, data, device))
                row["stacked_forced_seconds"] = t_forced
                row["stacked_forced_speedup"] = t_seq / t_forced
            rows.append(row)
    return rows

