"""Run a reproduction (:class:`~privaudit.reproduction.protocol.Protocol`) and gather its numbers.

The models are the audit's: Figure 4's targets are plain train jobs, the attacked targets go
through :func:`privaudit.executor.audit_jobs` with the paper's shadow attack, and any
executor runs them (this process or Ray). Every model is cached under ``models/`` by its
config hash, so an interrupted reproduction resumes, and targets that ``privaudit audit``
trained with the same recipe are reused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd
import torch

from privaudit.core.config import RunConfig
from privaudit.executor import Job, LocalExecutor, audit_jobs
from privaudit.executor.jobs import check_reused
from privaudit.executor.plan import epochs_job, train_job
from privaudit.executor.preview import estimated
from privaudit.pipeline.attacking import AttackPlan
from privaudit.pipeline.runs import DataCache
from privaudit.pipeline.workspace import Workspace
from privaudit.reporting.build import attack_rows
from privaudit.reproduction.protocol import Protocol

PAPER_ATTACK = "shadow"
ACCURACY_COLUMNS = ["run", "model", "kappa", "seed", "epochs", "batch_size", "part_size", "train_accuracy",
                    "test_accuracy", "n_test"]
ATTACKED_COLUMNS = ["target_run", "model", "defence", "kappa", "dp", "noise_multiplier", "epsilon", "delta", "seed",
                    "part_size", "epochs", "train_accuracy", "test_accuracy", "n_members", "n_nonmembers", "attack",
                    "auc", "auc_lo", "auc_hi", "accuracy", "precision", "recall", "advantage", "tpr_at_1pct_fpr",
                    "tpr_at_0p1pct_fpr", "eps_lower_bound", "dataset", "width"]


def reproduce_jobs(protocol: Protocol, input_shape: tuple[int, int, int], dataset_size: int) -> list[Job]:
    """Figure 4's train jobs, then the audit graph of every attacked target (without the
    audit's report job: the reproduction writes its own page). The epoch sweep's models of
    one recipe (each κ, seed and role) train once to the longest epoch count and are saved at
    the shorter ones on the way (:func:`privaudit.executor.plan.epochs_job`)."""
    jobs: dict[str, Job] = {}
    for cfg in protocol.accuracy_configs():
        job = train_job([cfg.validated()])
        jobs.setdefault(job.id, job)
    attacked = protocol.sweep_configs() + protocol.epoch_configs()
    shapes = {protocol.dataset: (input_shape, dataset_size)}
    graph = [j for j in audit_jobs(attacked, AttackPlan.from_choices([PAPER_ATTACK]), shapes)
             if j.kind != "report"] if attacked else []
    series: dict[str, list[RunConfig]] = {}  # recipe without its epochs -> the models it trains
    for job in graph:
        if job.kind == "train" and len(job.configs) == 1 and not job.configs[0].defence.dp:
            c = job.configs[0]
            series.setdefault(replace(c, train=replace(c.train, epochs=1)).config_hash, []).append(c)
    renamed: dict[str, str] = {}
    for members in series.values():
        if len(members) > 1:
            job = epochs_job(members)
            jobs.setdefault(job.id, job)
            renamed.update({f"train:{c.run_name}": job.id for c in members})
    for job in graph:
        if job.id in renamed:
            continue
        deps = tuple(dict.fromkeys(renamed.get(d, d) for d in job.deps))
        jobs.setdefault(job.id, replace(job, deps=deps) if deps != job.deps else job)
    return list(jobs.values())


@dataclass
class Frames:
    """The reproduction's numbers: one row per Figure-4 target, per attacked target of the
    sweep and of the epoch sweep (the paper's attack only)."""

    accuracy: pd.DataFrame
    sweep: pd.DataFrame
    epochs: pd.DataFrame
    missing: list[str] = field(default_factory=list)  # runs not (yet) in the workspace


def _accuracy_row(workspace: Workspace, cfg: RunConfig) -> dict:
    m = workspace.read_model_metrics(cfg.run_name)
    return {"run": cfg.run_name, "model": cfg.model.name, "kappa": cfg.defence.kappa, "seed": cfg.seed,
            "epochs": cfg.train.epochs, "batch_size": cfg.train.batch_size, "part_size": cfg.data.part_size,
            "train_accuracy": m.get("train_accuracy", math.nan), "test_accuracy": m.get("test_accuracy", math.nan),
            "n_test": m.get("n_test", math.nan)}


def _attacked(workspace: Workspace, configs: list[RunConfig], missing: list[str]) -> pd.DataFrame:
    rows = []
    for cfg in configs:
        folder = workspace.attacks / cfg.run_name
        if not (folder / "metrics.json").is_file():
            missing.append(cfg.run_name)
            continue
        rows += [r for r in attack_rows(workspace, folder) if r["attack"] == PAPER_ATTACK]
    frame = pd.DataFrame(rows)
    for c in ATTACKED_COLUMNS:
        if c not in frame:
            frame[c] = pd.Series(dtype=float)
    return frame[ATTACKED_COLUMNS].reset_index(drop=True)


def collect(protocol: Protocol, workspace: Workspace) -> Frames:
    """The numbers of every model and attack of ``protocol`` found in ``workspace``."""
    missing: list[str] = []
    acc = []
    for cfg in protocol.accuracy_configs():
        if workspace.has_model(cfg):
            acc.append(_accuracy_row(workspace, cfg))
        else:
            missing.append(cfg.run_name)
    accuracy = pd.DataFrame(acc, columns=ACCURACY_COLUMNS)
    return Frames(accuracy, _attacked(workspace, protocol.sweep_configs(), missing),
                  _attacked(workspace, protocol.epoch_configs(), missing), missing)


def run_reproduction(protocol: Protocol, workspace: Workspace, data: DataCache, device: torch.device, *,
                     executor=None, on_plan: Callable[[list[Job]], None] | None = None,
                     on_start: Callable | None = None, on_epoch: Callable | None = None,
                     on_job_done: Callable | None = None, on_estimate: Callable | None = None) -> Frames:
    """Train (or reuse) and attack every model of ``protocol``; return its numbers. With
    ``on_estimate`` the jobs are priced first (:func:`privaudit.executor.preview.estimated`)."""
    workspace.ensure_writable()
    images = data.get(protocol.dataset)
    jobs = reproduce_jobs(protocol, images.input_shape, len(images.y))
    if on_plan:
        on_plan(jobs)
    check_reused(jobs, workspace)  # a damaged artifact stops the run before anything trains
    executor = executor or LocalExecutor()
    with estimated("reproduce", priced_jobs(jobs), workspace, data, device, on_estimate, executor=executor):
        executor.run(jobs, workspace, data, device, on_start=on_start, on_epoch=on_epoch, on_job_done=on_job_done)
    return collect(protocol, workspace)


def priced_jobs(jobs: list[Job]) -> list[Job]:
    """The jobs a reproduction's estimate prices: its graph and the page it writes after them
    (priced as a report over its attacked targets)."""
    return jobs + [Job(id="page", kind="report", deps=tuple(j.id for j in jobs if j.kind == "attack"))]
