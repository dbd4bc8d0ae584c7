"""A plan before the work: what a job graph would run, what it reuses, its disk and its time.

:func:`preview` prices every job with :class:`~privaudit.executor.costs.CostModel` and
gathers the models by role, architecture and defence. ``--dry-run`` on ``audit``,
``reproduce`` and ``train`` prints the :class:`RunPlan` and exits; a real run prints the same
estimate at its start and, through :class:`Remaining`, the time left as its jobs finish.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from privaudit.executor.costs import BUSY, CostModel, JobCost, estimate_jobs, other_cores
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
    (this process's import and data loading, which the run pays again) plus the jobs' wall
    time (``job_seconds``: side-by-side runs overlap, :class:`Lanes`), with ``correction``
    (the median actual/estimated ratio of the last ``corrected_by`` runs of the same command
    on the same recipes on this machine, :func:`recipe_key`) applied to the jobs."""

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

    def to_dict(self) -> dict:
        """The document ``--dry-run --json`` prints."""
        return {"dry_run": True, "command": self.command, "workdir": str(self.workdir), "models": self.models,
                "attacks": self.attacks, "jobs": self.jobs, "reused_jobs": self.reused_jobs,
                "disk_bytes": self.disk_bytes, "estimated_seconds": self.seconds,
                "estimated_job_seconds": self.job_seconds, "startup_seconds": self.startup_seconds,
                "correction": self.correction, "corrected_by_runs": self.corrected_by,
                "calibration_seconds": self.calibration_seconds, "notes": self.notes,
                "job_estimates": [{"job": c.job.id, "kind": c.job.kind, "seconds": c.seconds,
                                   "disk_bytes": c.disk_bytes, "reused": c.reused} for c in self.costs]}

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text (what a result's ``to_json()`` is)."""
        from privaudit.files.atomic import plain_json

        return json.dumps(plain_json(self.to_dict()), indent=indent)

    def headline(self) -> str:
        """One line: the estimate, the disk, what is reused, how it was estimated."""
        fresh = sum(m["models"] - m["reused"] for m in self.models)
        reused = sum(m["reused"] for m in self.models)
        how = (f", corrected ×{self.correction:.2f} by the last {self.corrected_by} run"
               f"{'s' if self.corrected_by > 1 else ''} of this recipe here" if self.corrected_by else "")
        return (f"estimate: about {duration(self.seconds)} on this machine ({fresh} model{'s' if fresh != 1 else ''} "
                f"to train, {reused} reused; "
                f"{self.jobs - self.reused_jobs} of {self.jobs} jobs to run; {size(self.disk_bytes)} to write{how})")

    def _repr_html_(self) -> str:
        import html

        rows = "".join(f"<tr><td>{html.escape(m['role'])}</td><td>{html.escape(m['model'])}</td>"
                       f"<td>{html.escape(m['defence'])}</td><td>{m['models']}</td><td>{m['reused']}</td>"
                       f"<td>{duration(m['seconds'])}</td></tr>" for m in self.models)
        return (f"<div><p>{html.escape(self.headline())}</p><table><tr><th>role</th><th>model</th><th>defence</th>"
                f"<th>models</th><th>reused</th><th>training</th></tr>{rows}</table>"
                f"<p>attacks: {html.escape(', '.join(self.attacks) or 'none')}</p></div>")


def recipe_key(command: str, jobs: Sequence[Job]) -> str:
    """What a run's actual/estimated ratio corrects: ``command`` and the recipes its jobs train
    (architecture with its arguments and width, dataset, part size, epochs, batch size,
    defence). A ratio learned on one recipe says nothing of another (a digits MLP audit's
    tells nothing of a CNN's, or of the same audit at other sizes), so only a later run of the
    same command on the same recipes is corrected by it."""
    import hashlib

    recipes = sorted({f"{c.model.name}|{c.model.args}|{c.model.width}|{c.data.dataset}|{c.data.part_size}|"
                      f"{c.train.epochs}|{c.train.batch_size}|{c.defence.label}"
                      for job in jobs if job.kind == "train" for c in job.configs})
    return f"{command}|" + hashlib.sha256("\n".join(recipes).encode()).hexdigest()[:16]


def schedule_seconds(seconds: Sequence[float], workers: int) -> float:
    """The wall time of jobs of ``seconds`` each, taken in order by the first free of
    ``workers``: the makespan of list scheduling, as a thread pool runs them."""
    free = [0.0] * max(1, workers)
    for s in seconds:
        free[free.index(min(free))] += s
    return max(free)


@dataclass(frozen=True)
class Lanes:
    """How an executor runs a plan's jobs: the training runs that go side by side (their ids,
    in the order they start) on ``workers`` threads of ``threads`` intra-op threads each, and
    every other job alone, one after another, on the process's threads. The estimate times
    each run on the threads it will get (a run's speed on one thread barely changes while
    another process holds the other core, on two it drops: docs/performance.md) and adds the
    side-by-side runs up as the pool schedules them, each ``slowdown`` times its time alone
    (measured: side by side the runs share the interpreter lock, the memory bus and the cores)."""

    side_by_side: tuple[str, ...] = ()
    workers: int = 1
    threads: int | None = None
    #: how much longer a side-by-side run takes than alone (:meth:`CostModel.side_by_side_factor`)
    slowdown: float = 1.0

    @classmethod
    def of(cls, executor, jobs: Sequence[Job], workspace, device) -> Lanes:
        """The lanes of ``executor`` (a name or an executor) running ``jobs``."""
        from privaudit.executor.local import LocalExecutor

        if executor == "local":
            executor = LocalExecutor()
        if not isinstance(executor, LocalExecutor):
            return cls()
        parallel = executor.side_by_side(jobs, workspace, device)
        if not parallel:
            return cls()
        return cls(tuple(j.id for j in parallel), executor.worker_count(), executor.lane_threads())

    def job_threads(self) -> dict[str, int]:
        """The threads of each side-by-side run, by job id."""
        return {i: self.threads for i in self.side_by_side if self.threads}

    def wall_seconds(self, costs: Sequence[JobCost]) -> float:
        """The plan's time: the jobs alone one after another, plus the side-by-side runs'
        schedule, each run ``slowdown`` times its time alone."""
        by_id = {c.job.id: c.seconds for c in costs}
        alone = sum(c.seconds for c in costs if c.job.id not in self.side_by_side)
        return alone + schedule_seconds([by_id[i] * self.slowdown for i in self.side_by_side if i in by_id],
                                        self.workers)

    def priced(self, model: CostModel, jobs: Sequence[Job]) -> Lanes:
        """These lanes with the side-by-side slowdown measured on the runs that start
        together (the first ``workers`` of the order)."""
        if not self.side_by_side or not self.threads:
            return self
        by_id = {j.id: j for j in jobs}
        first = [list(by_id[i].configs) for i in self.side_by_side[:self.workers]]
        return replace(self, slowdown=model.side_by_side_factor(first, self.threads))


def preview(command: str, jobs: Sequence[Job], workspace, data, device, *, startup_seconds: float | None = None,
            log: Callable[[str], None] | None = None, model: CostModel | None = None,
            notes: Sequence[str] = (), executor="local") -> RunPlan:
    """Price ``jobs`` (of ``command``: ``audit``, ``reproduce`` or ``train``) in ``workspace``.
    ``startup_seconds`` defaults to this process's import and data time so far (the start-up
    a run of the command pays again); ``executor``: the executor that would run them, or its
    name (on Ray the time is this machine's, one job after another)."""
    from privaudit.core.timing import CLOCK

    model = model or CostModel(data, device, log=log)
    if startup_seconds is None:
        phases = CLOCK.snapshot()
        startup_seconds = phases.get("import", 0.0) + phases.get("data", 0.0)
    if getattr(executor, "name", executor) != "local":
        notes = [*notes, "timed for this machine; on Ray the jobs run side by side"]
    lanes = Lanes.of(executor, jobs, workspace, device)
    costs = estimate_jobs(jobs, workspace, model, threads=lanes.job_threads())
    lanes = lanes.priced(model, jobs)
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
              for (role, name, label, dataset), g in sorted(groups.items(),
                                                             key=lambda kv: (order.get(kv[0][0], 9), kv[0]))]
    attacks: list[str] = []
    for job in jobs:
        if job.kind == "attack" and job.attacks is not None:
            plan = job.attacks
            names = (list(plan.shown)
                     or (["shadow", "loss", "confidence"] if plan.shadow else []) + list(plan.pool_attacks))
            if plan.one_run:
                names.append("one-run")
            attacks.extend(n for n in names if n not in attacks)
    notes = [*notes, *load_notes(model, other_cores() if model.measured_seconds > 0 or model.slowdown() >= BUSY
                                        else None)]
    correction, runs = model.correction(recipe_key(command, jobs))
    return RunPlan(command=command, workdir=Path(workspace.root), models=models, attacks=attacks, jobs=len(costs),
                   reused_jobs=sum(c.reused for c in costs), disk_bytes=sum(c.disk_bytes for c in costs),
                   job_seconds=lanes.wall_seconds(costs), startup_seconds=startup_seconds,
                   correction=correction, corrected_by=runs,
                   calibration_seconds=model.measured_seconds, notes=list(notes), costs=costs)


#: the reference count of LiRA's own protocol (Carlini et al. evaluate with 64 and more), the
#: yardstick of the few-reference benchmark (benchmarks/bench_few_refs.py)
LIRA_PROTOCOL_REFERENCES = 64


def pool_savings(models: Sequence[Mapping], pool_size: int) -> list[str]:
    """A dry run's note on what the reference pool's size saves: the reference models the plan
    trains against the same settings at LiRA's protocol of :data:`LIRA_PROTOCOL_REFERENCES`,
    in models and in the plan's own seconds per reference model. Empty without a pool."""
    refs = [m for m in models if m["role"] == "reference"]
    count = sum(int(m["models"]) for m in refs)
    if not pool_size or not count or pool_size >= LIRA_PROTOCOL_REFERENCES:
        return []
    settings = count // pool_size
    seconds = sum(float(m["seconds"]) for m in refs) / count
    extra = settings * (LIRA_PROTOCOL_REFERENCES - pool_size)
    return [f"reference pools of {pool_size} models for {settings} setting{'s' if settings != 1 else ''}: "
            f"{extra:,} fewer trainings than LiRA's protocol of {LIRA_PROTOCOL_REFERENCES} (about "
            f"{duration(extra * seconds)} at this plan's rate); at 16, the default, LiRA with shrunk means "
            f"found 82-89 % of what the strongest attack finds with 63-64 on three CIFAR-10 pools "
            f"(docs/performance.md)"]


def load_notes(model: CostModel, others: float | None = None) -> list[str]:
    """What the machine's load does to the estimate, in the direction it moves it: rates
    measured while the machine was busy price that load (too long once it is quiet); rates
    measured quiet on a machine busy now price a quiet machine (too short while the load
    lasts). ``others``: the cores other processes keep busy now
    (:func:`~privaudit.executor.costs.other_cores`), said when it is half a core or more."""
    slowdown = model.slowdown()
    held = (f"other processes keep {others:.1f} of its {os.cpu_count()} cores busy"
            if others is not None and others >= 0.5 else "another process holds its cores")
    busy = f"the machine is busy now (a speed probe ran {slowdown:.1f}x slower than its fastest here: {held})"
    if model.busy_rates:
        measured = (f"{len(model.busy_rates)} of the rates behind this estimate were measured while the machine was "
                    "busy")
        if slowdown >= BUSY:
            return [f"{busy}; {measured}: the estimate prices a load like this one, and a plan made on a quiet "
                    "machine measures them again"]
        return [f"{measured}: expect less than the estimate while the machine stays quiet (the next plan measures "
                "them again)"]
    if slowdown >= BUSY:
        return [f"{busy}, and the rates were measured on a quiet machine: expect longer than the estimate while the "
                "load lasts"]
    if others is not None and others >= 0.5:
        return [f"{held} now: the rates behind this estimate were measured under that load, and the run takes "
                "less once it ends, more if it grows"]
    return []


class Remaining:
    """The time left of a running plan: the estimate of the jobs not yet done, scaled by how
    the done ones compared with their estimate (once they hold a tenth of it: before that the
    estimate stands as it is)."""

    def __init__(self, plan: RunPlan, clock: Callable[[], float] = time.monotonic):
        self.plan = plan
        self.clock = clock
        self.started = clock()
        # each job's share of the plan's wall time (side-by-side runs overlap)
        work = sum(c.seconds for c in plan.costs)
        share = plan.job_seconds / work if work > 0 else 1.0
        self.by_job = {c.job.id: c.seconds * share * plan.correction for c in plan.costs}
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
              on_estimate: Callable[[RunPlan], None] | None, executor="local") -> Iterator[RunPlan | None]:
    """Around a run of ``jobs``: with ``on_estimate``, price them first and hand it the plan
    (the time it shows is what is left: the start-up is paid), then keep the run's
    actual/estimated ratio for later estimates (:meth:`CostModel.record`). Without it,
    nothing is measured."""
    if on_estimate is None:
        yield None
        return
    model = CostModel(data, device)
    plan = preview(command, jobs, workspace, data, device, model=model, startup_seconds=0.0, executor=executor)
    on_estimate(plan)
    t0 = time.perf_counter()
    yield plan
    model.record(recipe_key(command, jobs), plan.job_seconds, time.perf_counter() - t0)
