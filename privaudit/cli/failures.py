"""A failure as one ``error: …`` line on stderr and an exit status, never a traceback."""

from __future__ import annotations

import functools
import os

import typer
from rich.markup import escape

from privaudit.api.params import as_options
from privaudit.cli.output import err
from privaudit.errors import PrivauditError, plain

#: what an interrupted command says (Ctrl-C or SIGTERM), with exit status 130
INTERRUPTED_LINE = "interrupted; finished artifacts are kept and rerunning the same command resumes from them"


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` as one line on stderr and exit with ``code``: a message's
    own brackets are text, not markup, and terminal escape codes in it (torch's bold, Ray's
    colours) are left out (:func:`~privaudit.errors.plain`)."""
    text = escape(plain(message))
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
        except PrivauditError as exc:  # named as the options, also when raised below the API
            fail(as_options(str(exc)), exc.exit_code)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (privaudit.cli.main raises it for that too)
            fail(INTERRUPTED_LINE, 130)
        except MemoryError:
            fail("out of memory; try a smaller --part-size, --batch-size or --width", 1)
        except OSError as exc:
            fail(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}", 1)
        except Exception as exc:  # the CLI's boundary: anything else is a bug, still one line
            if os.environ.get("PRIVAUDIT_DEBUG"):
                raise
            fail(f"internal error {type(exc).__name__}: {exc} (set PRIVAUDIT_DEBUG=1 for the traceback)", 1)

    return wrapper
