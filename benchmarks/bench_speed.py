"""Benchmark: one speed everywhere. A model's epoch inside ``train``, ``audit`` and
``reproduce``, beside the same recipe trained in this process by ``train_model``.

The recipe is the reproduction's Figure-4 Standard CNN at reduced scale (parts of 1,000,
15 epochs, batch 128; ``--quick``: parts of 200, 2 epochs). Each side is timed by the
model's own clock, ``fit_seconds`` in its ``metrics.json`` (the epochs alone: not the
data, the model's set-up, ε's accounting or the evaluation), and reported as training
samples a second (members × epochs / fit seconds, the mean over the models a command
trained), with the step's FLOPs per epoch (PyTorch's ``FlopCounterMode``) and the share of
the fp32 matmul peak measured in the same run:

- ``in process``: ``train_model`` of the κ = 0 model, and of its DP-SGD twin (σ 2);
- ``privaudit train``: a fresh process, the κ = 0 model;
- ``privaudit audit``: a fresh process, ``--kappas 0.6 --sigmas 2 --attacks shadow`` (targets
  and shadows: κ 0, κ 0.6 and σ 2), the non-private and DP-SGD models counted apart;
- ``privaudit reproduce mg-noise --models cnn --experiments accuracy --seeds 0``: a fresh
  process, Figure 4's six Standard CNNs (κ 0 to 2).

The sides alternate over two rounds (one with ``--quick``) and each keeps its best.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.common import matmul_peak, temp_dir, train_step_flops
from privaudit.config import make_config
from privaudit.defaults import DEFAULT_WIDTHS
from privaudit.models import build_model
from privaudit.training import train_model


def _fresh(cmd: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "privaudit", *cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"privaudit {' '.join(cmd[:2])} failed: {proc.stderr.strip().splitlines()[-1:]}")


def _models(work: Path) -> list[dict]:
    """(members × epochs, fit seconds, DP-SGD or not) of every model folder of ``work``."""
    out = []
    for folder in sorted((work / "models").glob("*/metrics.json")):
        metrics = json.loads(folder.read_text())
        config = json.loads((folder.parent / "config.json").read_text())
        if metrics.get("fit_seconds"):
            out.append({"samples": metrics["n_train"] * config["train"]["epochs"], "seconds": metrics["fit_seconds"],
                        "dp": bool(config["defence"].get("dp"))})
    return out


def _rate(models: list[dict], dp: bool) -> float | None:
    """Mean over the models of their samples a second (each model's own rate, then the mean)."""
    rates = [m["samples"] / m["seconds"] for m in models if m["dp"] == dp]
    return sum(rates) / len(rates) if rates else None


def run(root: Path, source: str, device: torch.device, data, quick: bool = False) -> list[dict]:
    part, epochs, batch, model = (200, 2, 128, "cnn") if quick else (1_000, 15, 128, "cnn")
    recipe = ["--model", model, "--dataset", "cifar10", "--data-dir", str(root), "--device", device.type]
    sized = ["--part-size", str(part), "--epochs", str(epochs), "--batch-size", str(batch)]
    flops = train_step_flops(build_model(model, (3, 32, 32), 10, width=DEFAULT_WIDTHS[model]), (3, 32, 32))
    best: dict[tuple[str, bool], float] = {}

    def keep(side: str, dp: bool, rate: float | None) -> None:
        if rate is not None:
            best[(side, dp)] = max(best.get((side, dp), 0.0), rate)

    with temp_dir() as tmp:
        for k in range(1 if quick else 2):
            for dp in (False, True):
                cfg = make_config(model=model, dataset="cifar10", part_size=part, epochs=epochs, batch_size=batch,
                                  **({"dp": True, "noise_multiplier": 2.0} if dp else {}))
                m = train_model(cfg, data, device).metrics
                keep("in process (train_model)", dp, m["n_train"] * epochs / m["fit_seconds"])
            work = Path(tmp) / f"train-{k}"
            _fresh(["train", *recipe, *sized, "--workdir", str(work)])
            keep("privaudit train", False, _rate(_models(work), False))
            work = Path(tmp) / f"audit-{k}"
            _fresh(["audit", *recipe, *sized, "--kappas", "0.6", "--sigmas", "2", "--attacks", "shadow",
                    "--workdir", str(work)])
            for dp in (False, True):
                keep("privaudit audit", dp, _rate(_models(work), dp))
            if not quick:
                work = Path(tmp) / f"reproduce-{k}"
                _fresh(["reproduce", "mg-noise", "--data-dir", str(root), "--device", device.type, "--models", model,
                        "--experiments", "accuracy", "--seeds", "0", "--workdir", str(work)])
                keep("privaudit reproduce", False, _rate(_models(work), False))
    peak = matmul_peak(device)["peak"]
    rows = []
    for (side, dp), rate in best.items():
        reference = best.get(("in process (train_model)", dp))
        rows.append({"benchmark": "speed", "model": model, "data": source, "side": side, "dp": dp,
                     "part_size": part, "epochs": epochs, "batch": batch, "samples_per_s": rate,
                     "vs_in_process": rate / reference if reference else None,
                     "flops_per_epoch": flops * part, "gflops": rate * flops / 1e9,
                     "fraction_of_peak": rate * flops / 1e9 / peak, "peak_gflops": peak})
    return rows
