"""Progress of the training a command runs: rich bars on a terminal, plain lines in a log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from privaudit.cli.output import err


@contextmanager
def training_progress(enabled: bool = True) -> Iterator[TrainingBars | PlainProgress]:
    """Rich bars on a terminal; plain lines (one per model, and one a minute while a model
    trains) when stderr is a file or a pipe, so a long run is never silent."""
    if not enabled:
        yield PlainProgress(lambda line: None)
        return
    if not err.is_terminal:
        yield PlainProgress(lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                        console=err, transient=False)
    with progress:
        yield TrainingBars(progress)


def model_label(config) -> str:
    """``target mlp k0.5 (digits)``, or ``(digits, seed 2)``: what the progress names a model
    by; for a stacked run (a list of configs) ``mlp ×50 stacked: 5 settings, target, shadow,
    reference (digits)``."""
    if isinstance(config, (list, tuple)):
        group, config = config, config[0]
        settings = len({c.defence.label for c in group})
        roles = ", ".join(dict.fromkeys(c.role for c in group))
        seeds = sorted({c.seed for c in group})
        seed = f", seed{'s' if len(seeds) > 1 else ''} {','.join(map(str, seeds))}" if seeds != [0] else ""
        return (f"{config.model.name} ×{len(group)} stacked: {settings} setting{'s' if settings > 1 else ''}, "
                f"{roles} ({config.data.dataset}{seed})")
    seed = f", seed {config.seed}" if config.seed else ""
    return f"{config.role} {config.model.name} {config.defence.label} ({config.data.dataset}{seed})"


class TrainingBars:
    """One bar per trained model, advanced by the trainer's epoch callback."""

    def __init__(self, progress):
        self.progress = progress
        self.task = None
        self.jobs = None
        self.remaining = None

    def plan(self, jobs) -> None:
        """One bar over a whole job graph (``audit``), advanced by :meth:`job_done`."""
        self.jobs = self.progress.add_task("jobs", total=len(jobs), info="")

    def estimate(self, plan) -> None:
        """The run's estimate (:class:`privaudit.executor.preview.RunPlan`): printed once, then
        the time left beside the jobs bar."""
        from privaudit.executor.preview import Remaining

        self.progress.console.print(plan.headline().replace(" on this machine", " left on this machine", 1),
                                    markup=False, highlight=False, soft_wrap=True)
        self.remaining = Remaining(plan)

    def job_done(self, job, reused: bool) -> None:
        if self.jobs is not None:
            left = ""
            if self.remaining is not None:
                from privaudit.executor.preview import duration

                left = f"about {duration(self.remaining.job_done(job))} left · "
            self.progress.update(self.jobs, advance=1, info=f"{left}{job.label}{' (reused)' if reused else ''}")

    def start(self, config) -> None:
        self.task = self.progress.add_task(model_label(config), total=config.train.epochs, info="loss —")

    def on_epoch(self, epoch: int, epochs: int, loss: float) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=epoch, info=f"loss {loss:.4f}")


class PlainProgress:
    """The same callbacks as :class:`TrainingBars`, as plain text lines: one when a model
    finishes, one a minute (at most) while it trains, one per finished audit job."""

    EVERY_SECONDS = 60.0

    def __init__(self, write, clock=time.monotonic):
        self.write = write
        self.clock = clock
        self.label = ""
        self.started = self.last = 0.0
        self.total_jobs = self.done_jobs = 0
        self.remaining = None

    def plan(self, jobs) -> None:
        self.total_jobs = len(jobs)
        self.write(f"{self.total_jobs} jobs planned")

    def estimate(self, plan) -> None:
        """The run's estimate, once; then each job's line says the time left."""
        from privaudit.executor.preview import Remaining

        self.write(plan.headline().replace(" on this machine", " left on this machine", 1))
        self.remaining = Remaining(plan, self.clock)

    def job_done(self, job, reused: bool) -> None:
        self.done_jobs += 1
        left = ""
        if self.remaining is not None:
            from privaudit.executor.preview import duration

            left = f" (about {duration(self.remaining.job_done(job))} left)"
        self.write(f"[{self.done_jobs}/{self.total_jobs}] {job.label}{' (reused)' if reused else ''}{left}")

    def start(self, config) -> None:
        self.label = model_label(config)
        self.started = self.last = self.clock()

    def on_epoch(self, epoch: int, epochs: int, loss: float) -> None:
        now = self.clock()
        if epoch >= epochs:
            self.write(f"trained {self.label}: {epochs} epochs in {now - self.started:.1f} s, loss {loss:.4f}")
        elif now - self.last >= self.EVERY_SECONDS:
            self.last = now
            self.write(f"training {self.label}: epoch {epoch}/{epochs}, loss {loss:.4f}, "
                       f"{now - self.started:.0f} s")
