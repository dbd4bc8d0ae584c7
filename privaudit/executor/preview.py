"""A plan before the work: what a job graph would run, what it reuses, its disk and its time.

:func:`preview` prices every job with :class:`~privaudit.executor.costs.CostModel` and
gathers the models by role, architecture and defence. ``--dry-run`` on ``audit``,
``reproduce`` and ``train`` prints the :class:`RunPlan` and exits; a real run prints the same
estimate at its start and, through :class:`Remaining`, the time left as its jobs finish.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from privaudit.executor.costs import BUSY, CostModel, JobCost, estimate_jobs
from privaudit.executor.plan import Job


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 05 min``: a time as a reader takes it in."""
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        m, r = divmod(int(round(s)), 60)
        return f"{m} min {r:02d} s"
    h, r = divmod(int(round(s / 60)), 60)
    return f"{h} h {r:02d} min"


def size(n: float) -> str:
    """Bytes as ``512 KB``, ``1.2 MB``, ``3.40 GB`` (powers of 1,000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            v = n / scale
            return f"{v:.2f} {unit}" if v < 10 else f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{int(n)} B"


@dataclass
class RunPlan:
    """What a command would do (``--dry-run``): the models by role and defence, the attacks,
    the jobs (and how many are reused as they stand), the disk they write and the time they
    take here. ``seconds`` is the whole run from the command's start: ``startup_seconds``
    (this process's import and data loading, which the run pays again) plus the jobs, with
    ``correction`` (the median actual/estimated ratio of the last ``corrected_by`` runs of the
    command on this machine) applied to the jobs."""

    command: str
    workdir: Path
    models: list[dict]
    attacks: list[str]
    jobs: int
    reused_jobs: int
    disk_bytes: int
    job_seconds: float
    startup_seconds: float
    correction: float
    corrected_by: int
    calibration_seconds: float
    notes: list[str] = field(default_factory=list)  #: what the estimate leaves out
    costs: list[JobCost] = field(repr=False, default_factory=list)

    @property
    def seconds(self) -> float:
        return self.startup_seconds + self.job_seconds * self.correction

    def to_json(self) -> dict:
        """The document ``--dry-run --json`` prints."""
        return {"dry_run": True, "command": self.command, "workdir": str(self.workdir), "models": self.models,
                "attacks": self.attacks, "jobs": self.jobs, "reused_jobs": self.reused_jobs,
                "disk_bytes": self.disk_bytes, "estimated_seconds": self.seconds,
                "estimated_job_seconds": self.job_seconds, "startup_seconds": self.startup_seconds,
                "correction": self.correction, "corrected_by_runs": self.corrected_by,
                "calibration_seconds": self.calibration_seconds, "notes": self.notes,
                "job_estimates": [{"job": c.job.id, "kind": c.job.kind, "seconds": c.seconds, "disk_bytes": c.disk_bytes,
                                   "reused": c.reused} for c in self.costs]}

    def headline(self) -> str:
        """One line: the estimate, the disk, what is reused, how it was estimated."""
        fresh = sum(m["models"] - m["reused"] for m in self.models)
        reused = sum(m["reused"] for m in self.models)
        how = (f", corrected ×{self.correction:.2f} by the last {self.corrected_by} run"
               f"{'s' if self.corrected_by > 1 else ''} here" if self.corrected_by else "")
        return (f"estimate: about {duration(self.seconds)} on this machine ({fresh} model{'s' if fresh != 1 else ''} to "
                f"train, {reused} reused; "
                f"{self.jobs - self.reused_jobs} of {self.jobs} jobs to run; {size(self.disk_bytes)} to write{how})")

    def _repr_html_(self) -> str:
        import html

        rows = "".join(f"<tr><td>{html.escape(m['role'])}</td><td>{html.escape(m['model'])}</td>"
                       f"<td>{html.escape(m['defence'])}</td><td>{m['models']}</td><td>{m['reused']}</td>"
                       f"<td>{duration(m['seconds'])}</td></tr>" for m in self.models)
        return (f"<div><p>{html.escape(self.headline())}</p><table><tr><th>role</th><th>model</th><th>defence</th>"
                f"<th>models</th><th>reused</th><th>training</th></tr>{rows}</table>"
                f"<p>attacks: {html.escape(', '.join(self.attacks) or 'none')}</p></div>")


def preview(command: str, jobs: Sequence[Job], workspace, data, device, *, startup_seconds: float | None = None,
            log: Callable[[str], None] | None = None, model: CostModel | None = None,
            notes: Sequence[str] = (), executor: str = "local") -> RunPlan:
    """Price ``jobs`` (of ``command``: ``audit``, ``reproduce`` or ``train``) in ``workspace``.
    ``startup_seconds`` defaults to this process's import and data time so far (the start-up
    a run of the command pays again); ``executor``: where the run would go (the time is this
    machine's, one job after another)."""
    from privaudit.core.timing import CLOCK

    model = model or CostModel(data, device, log=log)
    if startup_seconds is None:
        phases = CLOCK.snapshot()
        startup_seconds = phases.get("import", 0.0) + phases.get("data", 0.0)
    if executor != "local":
        notes = [*notes, "timed for this machine; on Ray the jobs run side by side"]
    costs = estimate_jobs(jobs, workspace, model)
    groups: dict[tuple, dict] = defaultdict(lambda: {"models": 0, "reused": 0, "seconds": 0.0})
    seen: set[str] = set()
    for cost in costs:
        if cost.job.kind != "train":
            continue
        fresh = [c for c in cost.job.configs if c.run_name not in seen]
        seen.update(c.run_name for c in fresh)
        for c in fresh:
            g = groups[(c.role, c.model.name, c.defence.label, c.data.dataset)]
            g["models"] += 1
            g["reused"] += int(c.run_name in cost.present)
            g["seconds"] += cost.seconds / max(1, len(cost.job.configs))
    order = {"target": 0, "shadow": 1, "reference": 2, "canary": 3}
    models = [{"role": role, "model": name, "defence": label, "dataset": dataset, **g}
              for (role, name, label, dataset), g in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0]))]
    attacks: list[str] = []
    for job in jobs:
        if job.kind == "attack" and job.attacks is not None:
            plan = job.attacks
            names = list(plan.shown) or (["shadow", "loss", "confidence"] if plan.shadow else []) + list(plan.pool_attacks)
            if plan.one_run:
                names.append("one-run")
            attacks.extend(n for n in names if n not in attacks)
    slowdown = model.slowdown()
    if slowdown >= BUSY:
        notes = [*notes, f"the machine is busy now (a speed probe ran {slowdown:.1f}x slower than its fastest here: "
                         "another process holds its cores): expect longer than the estimate while the load lasts"]
    correction, runs = model.correction(command)
    return RunPlan(command=command, workdir=Path(workspace.root), models=models, attacks=attacks, jobs=len(costs),
                   reused_jobs=sum(c.reused for c in costs), disk_bytes=sum(c.disk_bytes for c in costs),
                   job_seconds=sum(c.seconds for c in costs), startup_seconds=startup_seconds,
                   correction=correction, corrected_by=runs,
                   calibration_seconds=model.measured_seconds, notes=list(notes), costs=costs)


class Remaining:
    """The time left of a running plan: the estimate of the jobs not yet done, scaled by how
    the done ones compared with their estimate (once they hold a tenth of it: before that the
    estimate stands as it is)."""

    def __init__(self, plan: RunPlan, clock: Callable[[], float] = time.monotonic):
        self.plan = plan
        self.clock = clock
        self.started = clock()
        self.by_job = {c.job.id: c.seconds * plan.correction for c in plan.costs}
        self.left = sum(self.by_job.values())
        self.done = 0.0

    def job_done(self, job: Job) -> float:
        """Mark ``job`` done; returns the seconds left."""
        est = self.by_job.pop(job.id, 0.0)
        self.left -= est
        self.done += est
        return self.seconds_left()

    def seconds_left(self) -> float:
        elapsed = self.clock() - self.started
        total = self.done + self.left
        pace = elapsed / self.done if self.done > 0.1 * total and self.done > 0 else 1.0
        return max(0.0, self.left * pace)


@contextmanager
def estimated(command: str, jobs: Sequence[Job], workspace, data, device,
              on_estimate: Callable[[RunPlan], None] | None) -> Iterator[RunPlan | None]:
    """Around a run of ``jobs``: with ``on_estimate``, price them first and hand it the plan
    (the time it shows is what is left: the start-up is paid), then keep the run's
    actual/estimated ratio for later estimates (:meth:`CostModel.record`). Without it,
    nothing is measured."""
    if on_estimate is None:
        yield None
        return
    model = CostModel(data, device)
    plan = preview(command, jobs, workspace, data, device, model=model, startup_seconds=0.0)
    on_estimate(plan)
    t0 = time.perf_counter()
    yield plan
    model.record(command, plan.job_seconds, time.perf_counter() - t0)
