"""The ``privaudit`` command line: thin Typer wrappers over the library."""

from __future__ import annotations

import sys

import typer

from privaudit.cli import attack, audit, epsilon, report, theory, train

app = typer.Typer(
    name="privaudit",
    help="Audit how much a trained image classifier leaks about its training data, and compare defences "
         "(multiplicative Gaussian input noise, DP-SGD) by membership-inference attacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("train", help="Train one target model with a defence and save it to the workspace.")(train.train_cmd)
app.command("attack", help="Attack trained targets with the shadow-model attack and the loss/confidence baselines.")(attack.attack_cmd)
app.command("report", help="Rebuild reports/tradeoff.csv and reports/index.html from the whole workspace.")(report.report_cmd)
app.command("audit", help="The main job: baseline, MG-noise grid and DP-SGD grid for one model: train, attack, report.")(audit.audit_cmd)
app.add_typer(theory.app, name="theory")
app.command("epsilon", help="The epsilon a NoisyCGD or DP-SGD setting will cost (or the noise for a target epsilon), without training.")(epsilon.epsilon_cmd)


def _click_exceptions():
    """Click's exception classes as the installed Typer uses them (recent Typer vendors Click)."""
    try:
        from typer._click import exceptions
    except ImportError:  # older Typer depends on Click itself
        from click import exceptions
    return exceptions


# Typer's Abort (Ctrl-C at a prompt); recent Typer keeps it on the package, not beside the
# vendored Click's other exceptions.
_ABORT = getattr(typer, "Abort", None) or getattr(_click_exceptions(), "Abort")


def main() -> None:
    """Console entry point: usage errors become one line on stderr, exit status 2."""
    cx = _click_exceptions()
    try:
        code = app(standalone_mode=False)
    except cx.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else "")
        code = 0
    except cx.ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = " ".join(exc.format_message().split())
        print(f"error: {message}{hint}", file=sys.stderr)
        code = exc.exit_code
    except _ABORT:
        print("error: aborted", file=sys.stderr)
        code = 130
    except BrokenPipeError:  # e.g. `privaudit --help | head`: the reader has gone
        code = 0
    sys.exit(code if isinstance(code, int) else 0)
