"""Shared pieces of the commands: options, consoles, error handling, JSON output, progress.

Nothing here imports torch, NumPy, pandas or scikit-learn: the command modules import the
library inside their functions, so ``privaudit --help``, a usage error or a refused value
answers without loading them (``benchmarks/bench_startup.py`` measures it).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape

from privaudit.api.params import num as _num, outside as _outside, range_text as _range_text
from privaudit.core.timing import importing  # noqa: F401  (the commands' import phase)
from privaudit.core.defaults import DATA_DIR_ENV, MAX_POOL_SIZE, MAX_SEED
from privaudit.errors import ArtifactError, DataError, PrivauditError
from privaudit.files.npfiles import npz_problem

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
    """Print one JSON document on stdout (for ``--json``), with ``phase_seconds``: where
    the command's wall time went so far (import, data, train, evaluate, attack, report;
    :mod:`privaudit.core.timing`)."""
    from privaudit.files.atomic import dumps_json
    from privaudit.core.timing import CLOCK

    if isinstance(document, dict) and "phase_seconds" not in document:
        document = {**document, "phase_seconds": CLOCK.snapshot()}
    sys.stdout.write(dumps_json(document))
    sys.stdout.flush()


def show_plan(plan, as_json: bool) -> None:
    """Print a ``--dry-run``'s plan: its table and estimate, or its JSON."""
    if as_json:
        emit_json(plan.to_json())
        return
    from privaudit.cli.summary import plan_table

    console = info_console(as_json)
    console.print(plan_table(plan))
    console.print(plan.headline(), markup=False, highlight=False, soft_wrap=True)
    if plan.attacks:
        console.print(f"attacks: {', '.join(plan.attacks)}", markup=False, highlight=False, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"nothing was trained (--dry-run); the timing took {plan.calibration_seconds:.1f} s and is cached "
                  f"for the next plans on this machine", markup=False, highlight=False, soft_wrap=True)


def info_console(as_json: bool) -> Console:
    """Where human-readable summaries go: stdout, or stderr when stdout carries JSON."""
    return err if as_json else out


# -- numbers on the command line -----------------------------------------------------------

def number(low: float | None = None, high: float | None = None, *, low_open: bool = False) -> "callable":
    """A Typer callback that refuses a value outside [low, high] (or (low, high] with
    ``low_open``), NaN and ±inf, as a usage error naming the option: every numeric option
    of every command declares its range this way (``tests/test_cli_finish.py`` checks)."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        if not math.isfinite(value):
            raise typer.BadParameter(f"must be a finite number (got {value})")
        if _outside(value, low, high, low_open):
            raise typer.BadParameter(f"must be {_range_text(low, high, low_open)} (got {_num(value)})")
        return value

    return check



def path_option(value):
    """Typer callback of the path options: an empty path is refused (it would silently mean
    the current folder)."""
    if value is None:
        return None
    if not str(value).strip():
        raise typer.BadParameter("must not be empty (give a folder, e.g. '.')")
    return Path(value)


def require_workspace(workdir: Path, *, with_content: bool = True) -> Path:
    """``workdir`` when it exists (and, with ``with_content``, holds ``models/`` or
    ``attacks/``: it is a privaudit workspace); else an :class:`ArtifactError` naming it."""
    root = Path(workdir)
    if not root.is_dir():
        raise ArtifactError(f"workspace {root} does not exist (give --workdir the folder that holds models/ "
                            "and attacks/, or run `privaudit audit` or `privaudit train` there first)")
    if with_content and not ((root / "models").is_dir() or (root / "attacks").is_dir()):
        raise ArtifactError(f"{root} is not a privaudit workspace: it holds neither models/ nor attacks/ "
                            "(run `privaudit audit` or `privaudit train` there first)")
    return root


# -- progress ---------------------------------------------------------------------------------

@contextmanager
def training_progress(enabled: bool = True) -> Iterator["TrainingBars | PlainProgress"]:
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
        self.jobs = self.progress.add_task("audit jobs", total=len(jobs), info="")

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
        self.write(f"audit: {self.total_jobs} jobs planned")

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


# -- parsing ----------------------------------------------------------------------------------

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


def parse_attacks(values: list[str] | str, pool_size: int, shadow_dataset: str | None = None):
    """``--attacks lira --attacks rmia`` or ``--attacks lira,rmia`` → an AttackPlan."""
    from privaudit.api import params

    return params.attacks(values, pool_size, shadow_dataset)


def parse_grid(text: str, option: str, *, low: float | None = None, low_open: bool = False,
               high: float | None = None) -> list[float]:
    """A comma-separated list of finite numbers ("" or "none" = empty) within [low, high]
    (:func:`privaudit.api.params.grid`)."""
    from privaudit.api import params

    return params.grid(text, option, low=low, low_open=low_open, high=high)


def parse_seeds(text: str | None, seed: int) -> list[int]:
    """``--seeds 0,1,2`` → [0, 1, 2] (order kept, duplicates refused); without it, [seed]."""
    from privaudit.api import params

    return params.seeds(text, seed)


def one_of(*choices: str):
    """A Typer callback that refuses a word outside ``choices`` as a usage error naming the
    option (checked before anything heavy loads)."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing or value in choices:
            return value
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")

    return check


def dataset_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """Typer callback of ``--dataset``: a dataset known by name, or the user's own data
    ``npz:PATH`` / ``folder:PATH``, returned with its path made absolute (the name a model's
    config records); anything else is a usage error naming the option."""
    from privaudit.api.params import normal_dataset
    from privaudit.core.defaults import NAMED_DATASETS

    if value is None or ctx.resilient_parsing:
        return value
    name = normal_dataset(value)
    if name is None:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(NAMED_DATASETS)}, npz:PATH or folder:PATH")
    problem = custom_dataset_problem(name)
    if problem:
        raise typer.BadParameter(problem)
    return name


def custom_dataset_problem(name: str) -> str | None:
    """Why the user's own data ``npz:PATH`` / ``folder:PATH`` cannot be read, judged from the
    file system alone (a missing path, a file where a folder is expected, a file that is not
    an .npz archive), or None: so that ``--dataset`` is refused before torch loads."""
    kind, _, raw = str(name).partition(":")
    if kind not in ("npz", "folder"):
        return None
    path = Path(raw)
    if kind == "folder":
        if not path.exists():
            return f"folder:{path}: no such folder"
        return None if path.is_dir() else f"folder:{path}: a file, not a folder (expected one sub-folder per class)"
    if not path.exists():
        return f"npz:{path}: no such file"
    if path.is_dir():
        return f"npz:{path}: a folder, not an .npz file (for a folder of images give folder:PATH)"
    try:
        problem = npz_problem(path)
    except DataError as exc:
        return str(exc)
    return f"npz:{path}: {problem}" if problem else None


def model_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """Typer callback of ``--model``: a built-in architecture, ``torchvision:NAME`` or
    ``module:MODULE:CALLABLE`` (checked for its form here; built, and so checked for real,
    when a model trains)."""
    from privaudit.core.config import MODELS
    from privaudit.core.defaults import CUSTOM_MODEL_PREFIXES

    if value is None or ctx.resilient_parsing or value in MODELS:
        return value
    kind, _, rest = str(value).partition(":")
    if (kind == "torchvision" and rest.strip()) or (kind == "module" and all(p.strip() for p in rest.rpartition(":")[::2])
                                                   and ":" in rest):
        return value
    raise typer.BadParameter(f"{value!r} is not one of {', '.join(MODELS)}, "
                             f"{' or '.join(p + '…' for p in CUSTOM_MODEL_PREFIXES)} (torchvision:NAME, "
                             "module:MODULE:CALLABLE)")


def parse_model_args(items: list[str] | None) -> dict:
    """``--model-arg key=value`` pairs as a dict (:func:`privaudit.api.params.model_args`)."""
    from privaudit.api import params

    return params.model_args(items)


def dataset_config(dataset: str, data_dir, download: bool):
    """(what make_config needs beyond the dataset's name, the DataCache that loaded it or None):
    :func:`privaudit.api.params.dataset_config`, its imports counted as the import phase."""
    from privaudit.api import params

    with importing():
        return params.dataset_config(dataset, data_dir, download)


def refresh_reports(ws):
    """Rebuild ``reports/`` after a command wrote results it feeds, so the pages never lag
    behind the workspace; one warning line on stderr per skipped damaged folder. Returns the
    :class:`~privaudit.reporting.build.ReportResult`."""
    from privaudit.reporting.build import build_reports

    rep = build_reports(ws)
    for line in rep.warnings:
        err.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return rep


# -- options shared by several commands --------------------------------------------------------
WorkdirOpt = Annotated[str, typer.Option("--workdir", callback=path_option,
                                         help="Workspace folder that holds models/, attacks/ and reports/.")]
DataDirOpt = Annotated[Optional[str], typer.Option(
    "--data-dir", envvar=DATA_DIR_ENV, callback=path_option,
    help="Folder holding cifar-10-batches-py (or that folder itself); default ./data.")]
DownloadOpt = Annotated[bool, typer.Option("--download", help="Fetch CIFAR-10 through torchvision when it is not in --data-dir (needs a network).")]
DeviceOpt = Annotated[str, typer.Option("--device", callback=one_of("auto", "cpu", "cuda"), help="Where to train: auto (CUDA when present), cpu or cuda.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document of what was produced (paths and metrics) on stdout.")]
PoolSizeOpt = Annotated[int, typer.Option("--pool-size", callback=number(4, MAX_POOL_SIZE), help="Reference models per defence setting for lira, rmia and the many-shadow attack (even, >= 4; each trains on half of the target's members and non-members).")]
SeedOpt = Annotated[int, typer.Option("--seed", callback=number(0, MAX_SEED), help="Root seed (>= 0) of every random choice: data split, initialisation, shuffling, masks, DP noise.")]
SeedsOpt = Annotated[Optional[str], typer.Option(
    "--seeds", help="Comma-separated root seeds to replicate over, e.g. 0,1,2: every setting once per seed, each "
                    "seed re-drawing the data split and all training randomness (replaces --seed); summaries give "
                    "the mean and a 95% t-interval over seeds.")]
AttacksOpt = Annotated[list[str], typer.Option(
    "--attacks", "--attack",
    help="Comma-separated or repeated: shadow (the paper's attack), loss (loss, confidence and data-free baselines), lira, "
         "rmia, one-run (canary audit) or all. shadow and loss share one shadow model and are computed together; "
         "the summary shows what was asked. lira and rmia train a reference pool, one-run a canary model.")]
DEFAULT_ATTACKS = ["all"]
ShadowDatasetOpt = Annotated[Optional[str], typer.Option(
    "--shadow-dataset", callback=dataset_option,
    help="Add ML-Leaks' transfer attack (adversary 2): a shadow model with the target's recipe trained on this other "
         "dataset (any --dataset value), the attacker's own data.")]
