"""Benchmark: one speed everywhere. A model's epoch inside ``train``, ``audit`` and
``reproduce``, beside the same recipe trained in this process by ``train_model``, and what
a fresh process pays once before its first epoch.

The recipe is the reproduction's Figure-4 Standard CNN at reduced scale (parts of 1,000,
15 epochs, batch 128; ``--quick``: parts of 200, 3 epochs). Each model is timed by its own
clock, ``epoch_seconds`` in its ``metrics.json``, and its speed is its steady epoch: the
members over the median of its epochs after the first. A side's figure is, per round, the
median over the models it trained (every model of a side runs the same recipe), and the
best of its rounds: every side has one figure a round whether it trains one model or six, so
a side with more models is not favoured by taking the best of more draws. A process's one-off
costs are reported apart, from its first model and its ``--json`` phases:

- ``first epoch extra``: the first epoch less the steady one (oneDNN creates its kernels on
  their first call);
- ``set-up``: ``train_seconds`` − ``fit_seconds`` − the evaluation, i.e. the data, the model
  and the optimiser (torch.optim imports ``torch._dynamo`` on its first use in a process);
- ``import``: the command's ``import`` phase (torch, privaudit); ``wall``: the command's
  wall clock from outside.

Sides, interleaved over rounds (three; ``--quick`` one):

- ``in process``: ``train_model`` of the κ = 0 model, and of its DP-SGD twin (σ 2);
- ``privaudit train``: a fresh process, the κ = 0 model;
- ``privaudit audit``: a fresh process, ``--kappas 0.6 --sigmas 2 --attacks shadow`` (targets
  and shadows: κ 0, κ 0.6 and σ 2), the non-private and DP-SGD models counted apart;
- ``privaudit reproduce mg-noise --models cnn --experiments accuracy --seeds 0``: a fresh
  process, Figure 4's six Standard CNNs (κ 0 to 2); not with ``--quick``.

Beside them, the same Standard CNN in process at the full protocol's part size (10,520
members, 3 epochs; ``--quick``: skipped), the size at which ``reproduce --scale full``
trains it. FLOPs per epoch come from PyTorch's ``FlopCounterMode``, the share of peak from
the fp32 matmul peak measured in the same run.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.common import matmul_peak, temp_dir, train_step_flops
from privaudit.core.config import make_config
from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.models import build_model
from privaudit.pipeline.workspace import Workspace
from privaudit.training import train_model

IN_PROCESS = "in process (train_model)"
ROUNDS = 3
FULL_PART = 10_520


def steady_rate(metrics: dict) -> float | None:
    """Members a second over the median epoch after the first (None with fewer than 2)."""
    epochs = metrics.get("epoch_seconds") or []
    return metrics["n_train"] / statistics.median(epochs[1:]) if len(epochs) > 1 else None


def first_epoch_extra(metrics: dict) -> float | None:
    """The first epoch's seconds beyond the steady epoch's."""
    epochs = metrics.get("epoch_seconds") or []
    return epochs[0] - statistics.median(epochs[1:]) if len(epochs) > 1 else None


def _fresh(cmd: list[str]) -> tuple[float, dict]:
    """Run ``privaudit cmd --json`` in a fresh process: (wall seconds, its phase seconds)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "privaudit", *cmd, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"privaudit {' '.join(cmd[:2])} failed: {proc.stderr.strip().splitlines()[-1:]}")
    try:
        phases = json.loads(proc.stdout).get("phase_seconds") or {}
    except json.JSONDecodeError:
        phases = {}
    return wall, phases


def _models(work: Path) -> list[dict]:
    """The metrics of every model folder of ``work``, oldest first, each with ``dp``."""
    ws, out = Workspace(work), []
    for name in ws.model_names():
        metrics = ws.read_model_metrics(name)
        if metrics.get("epoch_seconds"):
            out.append({**metrics, "dp": ws.read_model_config(name).defence.dp,
                        "mtime": (ws.model_dir(name) / "metrics.json").stat().st_mtime})
    return sorted(out, key=lambda m: m["mtime"])


def _one_off(models: list[dict], wall: float, phases: dict) -> dict:
    """What the process paid once, from its first-trained model and its phases."""
    first = models[0]
    set_up = first["train_seconds"] - first["fit_seconds"]
    return {"first_epoch_extra_s": first_epoch_extra(first), "set_up_s": set_up, "import_s": phases.get("import"),
            "wall_s": wall}


def run(root: Path, source: str, device: torch.device, data, quick: bool = False) -> list[dict]:
    part, epochs, batch, model = (200, 3, 128, "cnn") if quick else (1_000, 15, 128, "cnn")
    recipe = ["--model", model, "--dataset", "cifar10", "--data-dir", str(root), "--device", device.type]
    sized = ["--part-size", str(part), "--epochs", str(epochs), "--batch-size", str(batch)]
    flops = train_step_flops(build_model(model, (3, 32, 32), 10, width=DEFAULT_WIDTHS[model]), (3, 32, 32))
    best: dict[tuple[str, bool], float] = {}
    once: dict[str, dict] = {}

    def keep(side: str, models: list[dict], dp: bool) -> None:  # a round's median model, the best round
        rates = [r for r in (steady_rate(m) for m in models if m["dp"] == dp) if r]
        if rates:
            best[(side, dp)] = max(best.get((side, dp), 0.0), statistics.median(rates))

    def keep_once(side: str, costs: dict) -> None:  # the smallest of each over the rounds
        old = once.get(side)
        once[side] = costs if old is None else {k: min((v for v in (old[k], costs[k]) if v is not None), default=None)
                                                for k in costs}

    def in_process(dp: bool, part_size: int, n_epochs: int) -> dict:
        cfg = make_config(model=model, dataset="cifar10", part_size=part_size, epochs=n_epochs, batch_size=batch,
                          **({"dp": True, "noise_multiplier": 2.0} if dp else {}))
        return {**train_model(cfg, data, device).metrics, "dp": dp}

    with temp_dir() as tmp:
        for k in range(1 if quick else ROUNDS):
            for dp in (False, True):
                keep(IN_PROCESS, [in_process(dp, part, epochs)], dp)
            work = Path(tmp) / f"train-{k}"
            wall, phases = _fresh(["train", *recipe, *sized, "--workdir", str(work)])
            keep("privaudit train", _models(work), False)
            keep_once("privaudit train", _one_off(_models(work), wall, phases))
            work = Path(tmp) / f"audit-{k}"
            wall, phases = _fresh(["audit", *recipe, *sized, "--kappas", "0.6", "--sigmas", "2", "--attacks",
                                   "shadow", "--workdir", str(work)])
            for dp in (False, True):
                keep("privaudit audit", _models(work), dp)
            keep_once("privaudit audit", _one_off(_models(work), wall, phases))
            if not quick:
                work = Path(tmp) / f"reproduce-{k}"
                wall, phases = _fresh(["reproduce", "mg-noise", "--data-dir", str(root), "--device", device.type,
                                       "--models", model, "--experiments", "accuracy", "--seeds", "0",
                                       "--workdir", str(work)])
                keep("privaudit reproduce", _models(work), False)
                keep_once("privaudit reproduce", _one_off(_models(work), wall, phases))
        full = None if quick else steady_rate(in_process(False, FULL_PART, 3))
    peak = matmul_peak(device)["peak"]

    def row(side: str, dp: bool, rate: float, part_size: int, n_epochs: int, reference: float | None) -> dict:
        return {"benchmark": "speed", "model": model, "data": source, "side": side, "dp": dp, "part_size": part_size,
                "epochs": n_epochs, "batch": batch, "samples_per_s": rate, "epoch_seconds": part_size / rate,
                "vs_in_process": rate / reference if reference else None, "flops_per_epoch": flops * part_size,
                "gflops": rate * flops / 1e9, "fraction_of_peak": rate * flops / 1e9 / peak, "peak_gflops": peak,
                **({"first_epoch_extra_s": None, "set_up_s": None, "import_s": None, "wall_s": None}
                   | (once.get(side, {}) if not dp else {}))}

    rows = [row(side, dp, rate, part, epochs, best.get((IN_PROCESS, dp))) for (side, dp), rate in best.items()]
    if full:
        rows.append(row(f"{IN_PROCESS}, full part", False, full, FULL_PART, 3, None))
    return rows
