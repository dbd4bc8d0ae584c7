"""The local executor: every job of the graph in this process.

The stacked training runs of small MLPs (:mod:`privaudit.training.stacked`), which depend on
nothing, run side by side on worker threads, one per CPU thread torch would use, each run with
one intra-op thread: small stacked runs use two cores better as two single-threaded runs
than as one two-threaded run (docs/performance.md), and their numbers do not depend on the
thread count (tested bit for bit). The longest runs start first. The other
jobs (models trained alone, pool logits, attacks, the report) follow one after another, with
the process's threads: a model trained alone uses torch's global generator throughout its run
(dropout, Opacus), so it never shares the process with another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import torch

from privaudit.core.timing import phase
from privaudit.executor.jobs import is_done, run_job
from privaudit.executor.plan import Job
from privaudit.pipeline.runs import DataCache
from privaudit.pipeline.workspace import Workspace
from privaudit.training.loop import EpochCallback

JobDone = Callable[[Job, bool], None]  # (job, whether it was already done)


@dataclass
class LocalExecutor:
    """Runs the jobs in their (dependency-respecting) order in this process. ``threads``: the
    torch threads of every job (default: leave torch's setting alone). ``workers``: how many
    stacked training runs go side by side (default: torch's thread count, or ``threads``)."""

    threads: int | None = None
    name: str = "local"
    workers: int | None = None

    def run(self, jobs: Sequence[Job], workspace: Workspace, data: DataCache, device: torch.device, *,
            on_start: Callable | None = None, on_epoch: EpochCallback | None = None,
            on_job_done: JobDone | None = None) -> dict[str, Any]:
        results: dict[str, Any] = {}
        side_by_side = self.side_by_side(jobs, workspace, device)
        if side_by_side:
            results.update(self._train_side_by_side(side_by_side, self.worker_count(), workspace, data, device,
                                                    on_job_done))
        for job in jobs:
            if job.id in results:
                continue
            done = is_done(job, workspace)
            results[job.id] = run_job(job, workspace, data, device, threads=self.threads,
                                      on_start=on_start, on_epoch=on_epoch)
            if on_job_done:
                on_job_done(job, done)
        return results

    def worker_count(self) -> int:
        """How many stacked training runs go side by side."""
        return self.workers or self.threads or torch.get_num_threads()

    def lane_threads(self) -> int:
        """The intra-op threads of each run that goes side by side."""
        return max(1, (self.threads or torch.get_num_threads()) // self.worker_count())

    def side_by_side(self, jobs: Sequence[Job], workspace: Workspace, device: torch.device) -> list[Job]:
        """The training jobs :meth:`run` puts side by side, longest first (models × 3 for
        DP-SGD): the stacked runs that depend on nothing and are not done, on the CPU, when
        there are two or more and more than one worker. The estimate of a plan
        (:func:`privaudit.executor.preview.preview`) schedules them the same way."""
        if device.type != "cpu" or self.worker_count() < 2:
            return []
        jobs = [j for j in jobs if j.kind == "train" and len(j.configs) > 1 and not j.epochs_series
                and not j.deps and not is_done(j, workspace)]
        if len(jobs) < 2:
            return []
        return sorted(jobs, key=lambda j: -len(j.configs) * (3 if j.configs[0].defence.dp else 1))

    def _train_side_by_side(self, jobs: list[Job], workers: int, workspace: Workspace, data: DataCache,
                            device: torch.device, on_job_done: JobDone | None) -> dict[str, Any]:
        """Run independent training jobs (in :meth:`side_by_side`'s order) on ``workers`` threads,
        :meth:`lane_threads` intra-op threads each; report each as it ends (from this thread)."""
        for job in jobs:  # the data once, before the threads
            data.images(job.configs[0])
        total = self.threads or torch.get_num_threads()
        torch.set_num_threads(self.lane_threads())
        out: dict[str, Any] = {}
        pool = ThreadPoolExecutor(min(workers, len(jobs)), thread_name_prefix="privaudit-train")
        try:
            with phase("train"):
                futures = {pool.submit(run_job, job, workspace, data, device): job for job in jobs}
                for future in as_completed(futures):
                    job = futures[future]
                    out[job.id] = future.result()
                    if on_job_done:
                        on_job_done(job, False)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            torch.set_num_threads(total)
        return out
