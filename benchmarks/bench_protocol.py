"""Benchmark: how long ``reproduce mg-noise`` takes on this machine, projected from a measured
fraction of its work.

The reproduction's job graph (:func:`privaudit.reproduction.run.reproduce_jobs`) lists every
model it trains: Figure 4's targets, every attacked target with its shadow, and the epoch
sweep's series (each κ, seed and role trained once to the longest epoch count). Models of
one recipe family (architecture, DP-SGD or not, MG noise or not, batch size) cost the same
per training sample, whatever their part size: an epoch is ⌈n/batch⌉ identical steps. So
each family is timed once, in this process, by ``train_model`` on a slice of the protocol's
part (2,048 members, 2 epochs; the steady second epoch, as ``epoch_seconds`` gives it), and

    projected = Σ over train jobs of members × epochs × (seconds per sample of its family)
              + Σ over models of the evaluation (2 × part clean samples, at the measured
                inference rate) + Σ over attacked targets of the attack's queries (4 × part)

Not counted: start-up (a few seconds once), the shadow attack's own classifier (a small MLP
on 2 × part feature vectors) and the page. ``--quick`` projects the digits protocol.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from privaudit.core.config import RunConfig
from privaudit.models import build_model
from privaudit.reproduction.protocol import protocol
from privaudit.reproduction.run import reproduce_jobs
from privaudit.training import train_model
from privaudit.training.results import predict_logits

SLICE = 2_048


def family(cfg: RunConfig) -> tuple:
    """The recipe family whose models cost the same per training sample."""
    return (cfg.model.name, bool(cfg.defence.dp), cfg.defence.kappa > 0, cfg.train.batch_size)


def work(scale: str, seeds: tuple[int, ...], dataset: str, input_shape, dataset_size: int) -> dict:
    """Per family: training samples (members × epochs) and models; plus the models and
    attacked targets of the whole run."""
    proto = protocol(scale, dataset, seeds=seeds)
    jobs = reproduce_jobs(proto, input_shape, dataset_size)
    samples: dict[tuple, int] = defaultdict(int)
    example: dict[tuple, RunConfig] = {}
    seen: set[str] = set()  # a model two jobs name (Figure 4's and the sweep's) trains once
    for job in jobs:
        if job.kind != "train":
            continue
        fresh = [c for c in job.configs if c.run_name not in seen]
        seen.update(c.run_name for c in fresh)
        # a series trains its longest missing model once and saves the shorter on the way
        runs = [max(fresh, key=lambda c: c.train.epochs)] if job.epochs_series and fresh else fresh
        for cfg in runs:
            samples[family(cfg)] += proto.part_size * cfg.train.epochs
            example.setdefault(family(cfg), cfg)
    attacked = sum(1 for j in jobs if j.kind == "attack")
    return {"protocol": proto, "samples": dict(samples), "example": example, "models": len(seen), "attacked": attacked}


def _per_sample_seconds(cfg: RunConfig, data, device: torch.device, part: int) -> float:
    """Seconds per training sample of ``cfg``'s family: its second epoch on ``part`` members."""
    from dataclasses import replace

    small = replace(cfg, data=replace(cfg.data, part_size=part), train=replace(cfg.train, epochs=2))
    metrics = train_model(small.validated(), data, device).metrics
    return metrics["epoch_seconds"][1] / metrics["n_train"]


def _inference_seconds(data, device: torch.device, model_name: str, n: int = 4_096) -> float:
    """Seconds per clean sample of the inference path (evaluation, attack queries)."""
    model = build_model(model_name, data.input_shape, data.num_classes)
    x = torch.randn(n, *data.input_shape)
    predict_logits(model, x[:256])  # kernels created
    t = time.perf_counter()
    predict_logits(model, x)
    return (time.perf_counter() - t) / n


def project(scale: str, seeds: tuple[int, ...], data, device: torch.device, dataset: str = "cifar10") -> dict:
    plan = work(scale, seeds, dataset, data.input_shape, len(data.y))
    proto = plan["protocol"]
    part = min(SLICE, proto.part_size)
    rows, total_train = [], 0.0
    infer: dict[str, float] = {}
    for fam, samples in sorted(plan["samples"].items(), key=lambda kv: -kv[1]):
        cfg = plan["example"][fam]
        t0 = time.perf_counter()
        per = _per_sample_seconds(cfg, data, device, part)
        infer.setdefault(cfg.model.name, _inference_seconds(data, device, cfg.model.name))
        seconds = samples * per
        total_train += seconds
        rows.append({"model": fam[0], "dp": fam[1], "mg_noise": fam[2], "batch": fam[3], "train_samples": samples,
                     "samples_per_s": 1 / per, "projected_train_s": seconds,
                     "measured_in_s": time.perf_counter() - t0})
    mean_infer = sum(infer.values()) / len(infer)
    evaluation = plan["models"] * 2 * proto.part_size * mean_infer + plan["attacked"] * 4 * proto.part_size * mean_infer
    return {"benchmark": "protocol", "scale": scale, "dataset": dataset, "seeds": list(seeds),
            "part_size": proto.part_size, "models": plan["models"], "attacked_targets": plan["attacked"],
            "projected_train_s": total_train, "projected_evaluation_s": evaluation,
            "projected_total_s": total_train + evaluation, "families": rows}


def run(source: str, device: torch.device, data, quick: bool = False) -> list[dict]:
    if quick:
        from privaudit.data.loaders import load_dataset

        digits = load_dataset("digits")
        return [project("reduced", (0,), digits, device, "digits")]
    return [project("full", (0,), data, device), project("reduced", (0, 1, 2, 3, 4), data, device)]
