"""Running one job of the audit graph in the current process.

:func:`run_job` is what every executor calls, locally or on a remote worker: it sets the
job's thread count (so a job computes the same numbers wherever it runs), calls the
get-or-train function of the job's kind and returns its result. Every kind is idempotent:
a job whose artifacts exist returns them without recomputing (``reused``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from privaudit.executor.plan import Job
from privaudit.files.integrity import verify_folder
from privaudit.pipeline.attacking import attack_target
from privaudit.pipeline.pools import ensure_pool
from privaudit.pipeline.runs import DataCache, ensure_epochs, ensure_model, ensure_models
from privaudit.pipeline.workspace import Workspace
from privaudit.reporting.build import build_reports
from privaudit.training.loop import EpochCallback

#: Fault injection for the executor's tests: ``<text>@<marker file>`` makes the first job
#: whose id contains <text> kill its own process (SIGKILL) after its first epoch, once (the
#: marker file records that it happened).
FAULT_ENV = "PRIVAUDIT_FAULT_KILL"


def is_done(job: Job, workspace: Workspace) -> bool:
    """Whether the job's artifacts already exist (a cheap check; attacks and the report are
    never skipped, as they themselves reuse what is unchanged). An existing artifact that is
    damaged raises :class:`~privaudit.errors.DamagedArtifactError` (it is neither reused nor
    recomputed over)."""
    if job.kind == "train":
        return all(workspace.has_model(c) for c in job.configs)
    if job.kind == "logits":  # outputs[0] is the pool's folder
        folder = workspace.root / job.outputs[0]
        if not (folder / "outputs.npz").is_file():
            return False
        verify_folder(folder, "pool")
        return True
    return False


def check_reused(jobs: Iterable[Job], workspace: Workspace) -> None:
    """Verify every existing artifact the jobs would reuse (models, pools, earlier attacks)
    before any job runs, so a damaged one stops the audit before anything is trained."""
    for job in jobs:
        if job.kind in ("train", "logits"):
            is_done(job, workspace)
        elif job.kind == "attack":
            for rel in job.outputs:
                if (workspace.root / rel).is_dir():
                    verify_folder(workspace.root / rel, "attack")


def _fault_on_epoch(job: Job, on_epoch: EpochCallback | None) -> EpochCallback | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec or "@" not in spec:
        return on_epoch
    text, marker = spec.split("@", 1)
    if text not in job.id or Path(marker).exists():
        return on_epoch

    def killing(epoch: int, epochs: int, loss: float) -> None:
        if on_epoch:
            on_epoch(epoch, epochs, loss)
        Path(marker).write_text(job.id)
        os.kill(os.getpid(), signal.SIGKILL)

    return killing


def run_job(job: Job, workspace: Workspace, data: DataCache, device: torch.device, *, threads: int | None = None,
            on_start: Callable | None = None, on_epoch: EpochCallback | None = None):
    """Run ``job``; returns a list of RunResult (train), the pool name (logits), an
    AttackResult (attack) or a ReportResult (report)."""
    if threads:
        torch.set_num_threads(threads)
    on_epoch = _fault_on_epoch(job, on_epoch)
    if job.kind == "train":
        if job.epochs_series:
            return ensure_epochs(list(job.configs), workspace, data, device, on_start=on_start, on_epoch=on_epoch)
        if len(job.configs) > 1:
            return ensure_models(list(job.configs), workspace, data, device, on_start=on_start, on_epoch=on_epoch)
        return [ensure_model(job.configs[0], workspace, data, device, on_start=on_start, on_epoch=on_epoch)]
    if job.kind == "logits":
        return ensure_pool(job.configs[0], job.pool_size, workspace, data, device).name
    if job.kind == "attack":
        return attack_target(workspace, job.configs[0].run_name, data, device, job.attacks,
                             on_start=on_start, on_epoch=on_epoch)
    if job.kind == "report":
        return build_reports(workspace)
    raise ValueError(f"unknown job kind {job.kind!r}")
