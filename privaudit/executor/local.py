"""The local executor: every job of the graph in this process, one after another."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from privaudit.executor.jobs import is_done, run_job
from privaudit.executor.plan import Job
from privaudit.runs import DataCache
from privaudit.training.trainer import EpochCallback
from privaudit.workspace import Workspace

JobDone = Callable[[Job, bool], None]  # (job, whether it was already done)


@dataclass
class LocalExecutor:
    """Runs the jobs in their (dependency-respecting) order in this process. ``threads``: the
    torch threads of every job (default: leave torch's setting alone)."""

    threads: int | None = None
    name: str = "local"

    def run(self, jobs: Sequence[Job], workspace: Workspace, data: DataCache, device: torch.device, *,
            on_start: Callable | None = None, on_epoch: EpochCallback | None = None,
            on_job_done: JobDone | None = None) -> dict[str, Any]:
        results: dict[str, Any] = {}
        for job in jobs:
            done = is_done(job, workspace)
            results[job.id] = run_job(job, workspace, data, device, threads=self.threads,
                                      on_start=on_start, on_epoch=on_epoch)
            if on_job_done:
                on_job_done(job, done)
        return results
