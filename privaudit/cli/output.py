"""What the commands print: the two consoles, ``--json``, a ``--dry-run``'s plan, a number in a
table, a warning line."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def info_console(as_json: bool) -> Console:
    """Where human-readable summaries go: stdout, or stderr when stdout carries JSON."""
    return err if as_json else out


def warn(line: str) -> None:
    """One warning line on stderr (a damaged folder the reports skipped)."""
    err.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)


def emit_json(document: dict) -> None:
    """Print one JSON document on stdout (for ``--json``), with ``phase_seconds``: where
    the command's wall time went so far (import, data, train, evaluate, attack, report;
    :mod:`privaudit.core.timing`)."""
    from privaudit.core.timing import CLOCK
    from privaudit.files.atomic import dumps_json

    if isinstance(document, dict) and "phase_seconds" not in document:
        document = {**document, "phase_seconds": CLOCK.snapshot()}
    sys.stdout.write(dumps_json(document))
    sys.stdout.flush()


def show_plan(plan, as_json: bool) -> None:
    """Print a ``--dry-run``'s plan: its table and estimate, or its JSON."""
    if as_json:
        emit_json(plan.to_dict())
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


def fmt(value, digits: int = 3) -> str:
    """A metric in a terminal table: ``—`` for None or NaN, a float to ``digits`` places, or
    to 3 significant digits when those places would show it as zero (δ = ``1e-05``, not
    ``0.0000``)."""
    if value is None:
        return "—"
    try:
        if value != value:  # NaN
            return "—"
    except TypeError:
        return str(value)
    if isinstance(value, float):
        if value and abs(value) < 0.5 * 10 ** -digits:
            return f"{value:.3g}"
        return f"{value:.{digits}f}"
    return str(value)
