"""The ``privaudit`` command line: each command a thin Typer layer over its function of the
Python API (:mod:`privaudit.api`): its options parsed and checked, the function called, the
result printed. The commands share their option declarations (``options``) and callbacks
(``callbacks``), what they print (``output``, ``summary``), the one-line failure
(``failures``) and the training progress (``progress``).

Importing this package loads Typer and rich only; each command imports the library (torch,
NumPy, pandas, scikit-learn) when it runs, so ``--help`` and usage errors answer at once.
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
from typing import Annotated, Any

import typer

from privaudit.cli import attack, audit, epsilon, report, reproduce, scan, theory, train
from privaudit.cli.command import Command, Group
from privaudit.cli.failures import INTERRUPTED_LINE
from privaudit.errors import plain


def _click_exceptions():
    """Click's exception classes as the installed Typer uses them (recent Typer vendors Click)."""
    try:
        from typer._click import exceptions
    except ImportError:  # older Typer depends on Click itself
        from click import exceptions
    return exceptions


# Typer's Abort (Ctrl-C at a prompt); recent Typer keeps it on the package, not beside the
# vendored Click's other exceptions.
_ABORT = getattr(typer, "Abort", None) or _click_exceptions().Abort
# Click >= 8.2 raises this for a group called without arguments (no_args_is_help); older Click
# prints the help itself.
_NO_ARGS_IS_HELP: Any = (getattr(_click_exceptions(), "NoArgsIsHelpError", None)
                         or type("_NoSuchError", (Exception,), {}))


def run_one_line(invoke) -> int:
    """Run ``invoke()`` (the command line, not standalone) and turn a usage error into one line
    ``error: …`` on stderr: the exit status, 2 for a usage error."""
    cx = _click_exceptions()
    try:
        code = invoke()
    except _NO_ARGS_IS_HELP as exc:
        print(exc.ctx.get_help() if exc.ctx else "")
        code = 0
    except cx.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = plain(exc.format_message())
        print(f"error: {message}{hint}", file=sys.stderr)
        code = exc.exit_code
    except _ABORT:
        print("error: aborted", file=sys.stderr)
        code = INTERRUPTED
    except KeyboardInterrupt:  # before a command's own handler runs (parsing, a callback)
        print(f"error: {INTERRUPTED_LINE}", file=sys.stderr)
        code = INTERRUPTED
    except BrokenPipeError:  # e.g. `privaudit --help | head`: the reader has gone
        code = 0
    return code if isinstance(code, int) else 0


class OneLineErrors(Group):
    """The root command: however it is invoked (the console script, ``python -m privaudit``,
    Typer's test runner), a usage error is one ``error:`` line, never a boxed panel."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        def invoke():
            from privaudit.core.timing import CLOCK

            CLOCK.reset()  # phase_seconds count from the command's start
            return super(OneLineErrors, self).main(args, prog_name, complete_var, standalone_mode=False, **extra)

        if not standalone_mode:
            return invoke()
        sys.exit(run_one_line(invoke))


app = typer.Typer(
    name="privaudit",
    cls=OneLineErrors,
    help="Audit how much a trained image classifier leaks about its training data, and compare defences "
         "(multiplicative Gaussian input noise, DP-SGD) by membership-inference attacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",  # help text is rich markup: a literal [ is written \\[
    context_settings={"help_option_names": ["-h", "--help"]},
)


def version() -> str:
    """The installed privaudit's version (the package's own when it runs from a source tree)."""
    from importlib import metadata

    try:
        return metadata.version("privaudit")
    except metadata.PackageNotFoundError:
        from privaudit import __version__

        return __version__


def _print_version(value: bool) -> None:
    """``--version``: print ``privaudit <version>`` and exit 0, whatever else was given."""
    if value:
        print(f"privaudit {version()}")
        raise typer.Exit(0)


@app.callback()
def _root(_version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                 help="Print privaudit's version and exit.")] = False) -> None:
    """The root's own options (``--version``); each command does the work."""


#: the commands: (name, function, the one line ``privaudit --help`` gives it)
COMMANDS = (
    ("train", train.train_cmd, "Train one target model with a defence and save it to the workspace."),
    ("attack", attack.attack_cmd, "Attack trained targets: the paper's shadow-model attack, the "
                                  "loss/confidence/data-free baselines, LiRA, RMIA, the quantile-regression attack, "
                                  "the label-only attacks and the one-run canary audit."),
    ("report", report.report_cmd, "Rebuild reports/tradeoff.csv and reports/index.html from the whole workspace."),
    ("audit", audit.audit_cmd, "The main job: baseline, MG-noise grid and DP-SGD grid for one model: train, attack, "
                               "report."),
    ("scan", scan.scan_cmd, "Audit a model from its outputs alone: arrays of logits, probabilities or losses from any "
                            "framework (.npz, .npy folder or CSV), with every attack they allow."),
    ("export-logits", scan.export_cmd, "Write a trained target's outputs (with its shadow model's and a pool's) as an "
                                       ".npz that privaudit scan reads."),
    ("audit-model", scan.audit_model_cmd, "Audit a model trained elsewhere from its weights file: references trained "
                                          "with its recipe on data it did not see, every attack, intervals, and how "
                                          "well the references match."),
    ("epsilon", epsilon.epsilon_cmd, "The epsilon a NoisyCGD or DP-SGD setting will cost (or the noise for a target "
                                     "epsilon), without training."),
)
for _name, _function, _help in COMMANDS:
    app.command(_name, cls=Command, help=_help)(_function)
app.add_typer(theory.app, name="theory")
app.add_typer(reproduce.app, name="reproduce")


#: the exit status of an interrupted command (128 + SIGINT), as shells report it; a SIGTERM
#: (conventionally 143) ends with it too, as the interruption it is
INTERRUPTED = 130

#: allocations between collections of the youngest generation in the command's own process
#: (Python's default: 700); see :func:`entry`
YOUNG_GC_THRESHOLD = 10_000


def main() -> None:
    """The command line in this process: usage errors become one line on stderr, exit status 2
    (raises SystemExit with the status)."""
    sys.exit(run_one_line(lambda: app(standalone_mode=False)))


def _interrupt_where_it_cannot_be_raised(hook: Any) -> Any:
    """``sys.unraisablehook`` for :func:`entry`: an interrupt that arrives inside a callback
    Python cannot raise from (a module lock's weak-reference callback while something is being
    imported, a finaliser) would be printed as an ignored exception with its traceback and then
    lost, and the command would run on; it ends the command as every other interrupt does (the
    one ``interrupted`` line, exit status :data:`INTERRUPTED`, without the teardown, as
    :func:`entry` leaves). Anything else goes to ``hook``."""

    def handle(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            sys.stderr.write(f"error: {INTERRUPTED_LINE}\n")
            sys.stderr.flush()
        finally:
            os._exit(INTERRUPTED)

    return handle


def entry() -> None:
    """Console entry point (the ``privaudit`` script and ``python -m privaudit``): :func:`main`,
    then an exit without the interpreter's teardown.

    Once torch, scikit-learn, Opacus and matplotlib are loaded, the interpreter's shutdown spends
    a noticeable time (docs/performance.md) tearing down modules that a finished process need
    not free. When the command has returned, everything it wrote is closed (artifacts are
    written atomically, :mod:`privaudit.files.atomic`), so the process runs its exit handlers, flushes
    its streams and leaves with :func:`os._exit`. Where another thread is still alive, the exit
    status is not a number, or a profiler or tracer is watching (``python -m cProfile``, which
    writes its results after the program returns), the normal shutdown runs instead.

    An interrupted command (Ctrl-C, exit status :data:`INTERRUPTED`) always leaves this way,
    even with threads still alive (a training worker finishing its step, a noise-drawing
    thread, a progress display): the interpreter's teardown would destroy C++ thread objects
    those threads still hold, which aborts the process ("terminate called without an active
    exception", exit 134, seen once in 20 interrupts under load), and waiting for them would
    delay the exit. Nothing is lost or damaged: every artifact is written atomically, so a
    half-written one is a hidden temporary file or folder that is never read (the next run
    removes the folders).

    In this process the cyclic garbage collector also does less needless work: the command's
    imports are kept out of its full passes (:func:`privaudit.core.timing.importing`), and its
    youngest generation is collected every 10,000 allocations instead of 700 (a training loop
    allocates thousands of short-lived tensors that reference counting frees anyway;
    docs/performance.md measures the gain).

    SIGTERM (``kill``, a scheduler's time limit, a container being stopped) interrupts the
    command as Ctrl-C does: the one ``interrupted`` line, which says that rerunning the same
    command resumes, and exit status :data:`INTERRUPTED`, every finished artifact kept, instead
    of the bare ``Terminated`` of a process the signal ends outright.
    """
    from privaudit.core import timing

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # raises KeyboardInterrupt
    sys.unraisablehook = _interrupt_where_it_cannot_be_raised(sys.unraisablehook)

    timing.FREEZE_IMPORTS = True  # this process is the command's own (privaudit.core.timing.importing)
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        main()
        code: str | int | None = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    watched = sys.getprofile() is not None or sys.gettrace() is not None
    if not isinstance(code, int) or watched or (threading.active_count() > 1 and code != INTERRUPTED):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can reach it
            pass
    os._exit(code)
