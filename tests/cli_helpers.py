"""Running the command line in the test's own process, as the console script does."""

from __future__ import annotations

import contextlib
import io
import sys

from privaudit import cli as cli_mod


def run_cli(*args: str) -> tuple[int, str, str]:
    """``privaudit ARGS`` through the console entry point: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["privaudit", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli_mod.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = old
    return code, out.getvalue(), err.getvalue()


def run_cli_joined(*args: str) -> tuple[int, str]:
    """:func:`run_cli` with stdout and stderr joined: (exit status, output)."""
    code, out, err = run_cli(*args)
    return code, out + err


def one_error_line(output: str) -> str:
    """The single ``error:`` line of a failed command's output (and no traceback)."""
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]
