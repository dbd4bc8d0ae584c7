"""Shared pieces of the commands: options, consoles, error handling, JSON output, progress."""

from __future__ import annotations

import functools
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from privaudit.atomic import dumps_json
from privaudit.data.loaders import DATA_DIR_ENV
from privaudit.errors import PrivauditError

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` as one line on stderr and exit with ``code``."""
    text = escape(" ".join(str(message).split()))  # a message's own brackets are text, not markup
    err.print(f"[bold red]error:[/] {text}", soft_wrap=True, markup=True, emoji=False, highlight=False)
    raise typer.Exit(code)


def handle_errors(fn):
    """Turn expected failures into one line on stderr and a non-zero exit, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except PrivauditError as exc:
            fail(str(exc), 2)
        except KeyboardInterrupt:
            fail("interrupted; finished artifacts are kept and a rerun resumes from them", 130)
        except MemoryError:
            fail("out of memory; try a smaller --part-size, --batch-size or --width", 1)
        except OSError as exc:
            fail(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}", 1)
        except Exception as exc:  # a bug: still one line, the traceback on request
            if os.environ.get("PRIVAUDIT_DEBUG"):
                raise
            fail(f"internal error {type(exc).__name__}: {exc} (set PRIVAUDIT_DEBUG=1 for the traceback)", 1)

    return wrapper


def emit_json(document: dict) -> None:
    """Print one JSON document on stdout (for ``--json``)."""
    sys.stdout.write(dumps_json(document))
    sys.stdout.flush()


def info_console(as_json: bool) -> Console:
    """Where human-readable summaries go: stdout, or stderr when stdout carries JSON."""
    return err if as_json else out


@contextmanager
def training_progress(enabled: bool = True) -> Iterator["TrainingBars"]:
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                        console=err, transient=False, disable=not enabled)
    with progress:
        yield TrainingBars(progress)


class TrainingBars:
    """One bar per trained model, advanced by the trainer's epoch callback."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None
        self.jobs = None

    def plan(self, jobs) -> None:
        """One bar over a whole job graph (``audit``), advanced by :meth:`job_done`."""
        self.jobs = self.progress.add_task("audit jobs", total=len(jobs), info="")

    def job_done(self, job, reused: bool) -> None:
        if self.jobs is not None:
            self.progress.update(self.jobs, advance=1, info=f"{job.label}{' (reused)' if reused else ''}")

    def start(self, config) -> None:
        label = f"{config.role} {config.model.name} {config.defence.label}"
        self.task = self.progress.add_task(label, total=config.train.epochs, info="loss —")

    def on_epoch(self, epoch: int, epochs: int, loss: float) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=epoch, info=f"loss {loss:.4f}")


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "—"
    try:
        if value != value:  # NaN
            return "—"
    except TypeError:
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def parse_attacks(values: list[str] | str, pool_size: int):
    """``--attack lira --attack rmia`` or ``--attacks lira,rmia`` → an AttackPlan."""
    from privaudit.attacks.run import AttackPlan

    items = values.split(",") if isinstance(values, str) else [v for item in values for v in item.split(",")]
    return AttackPlan.from_choices([v.strip() for v in items if v.strip()], pool_size)


def parse_grid(text: str, option: str) -> list[float]:
    """Parse a comma-separated list of finite numbers ("" or "none" = empty)."""
    text = text.strip()
    if text.lower() in ("", "none"):
        return []
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise PrivauditError(f"{option} expects comma-separated numbers, got {part.strip()!r}") from None
        if not math.isfinite(value):
            raise PrivauditError(f"{option} expects finite numbers, got {part.strip()!r}")
        values.append(value)
    return values


# -- options shared by several commands --------------------------------------------------------
WorkdirOpt = Annotated[Path, typer.Option("--workdir", help="Workspace folder that holds models/, attacks/ and reports/.")]
DataDirOpt = Annotated[Optional[Path], typer.Option(
    "--data-dir", envvar=DATA_DIR_ENV,
    help="Folder holding cifar-10-batches-py (or that folder itself); default ./data.")]
DownloadOpt = Annotated[bool, typer.Option("--download", help="Fetch CIFAR-10 through torchvision when it is not in --data-dir (needs a network).")]
DeviceOpt = Annotated[str, typer.Option("--device", help="Where to train: auto (CUDA when present), cpu or cuda.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document of what was produced (paths and metrics) on stdout.")]
PoolSizeOpt = Annotated[int, typer.Option("--pool-size", help="Reference models per defence setting for lira, rmia and the many-shadow attack (even; each trains on half of the target's members and non-members).")]
