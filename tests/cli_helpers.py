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


def one_dp_target(tmp_path):
    """A workspace holding one DP-SGD digits MLP (σ 1, ε 3.0949, test accuracy 0.9) and its
    attack metrics (μ 1.05798, ε lb 1.2399): what the audit's summary table reads.
    Returns (workspace, run name, metrics)."""
    from privaudit.core.config import make_config
    from privaudit.files.atomic import write_json
    from privaudit.pipeline.workspace import Workspace

    ws = Workspace(tmp_path).ensure_writable()
    cfg = make_config(dataset="digits", model="mlp", dp=True, noise_multiplier=1.0)
    (ws.models / cfg.run_name).mkdir()
    write_json(ws.models / cfg.run_name / "config.json", {**cfg.to_dict(), "run_name": cfg.run_name,
                                                          "config_hash": cfg.config_hash})
    write_json(ws.models / cfg.run_name / "metrics.json", {"test_accuracy": 0.9, "noise_multiplier": 1.0,
                                                           "epsilon": 3.0949})
    metrics = {"shadow": {"auc": 0.6}, "lira": {"auc": 0.7, "tpr_at_0p1pct_fpr": 0.05, "eps_lower_bound": 1.2399,
                                                "gdp_mu": 1.05798}}
    return ws, cfg.run_name, metrics
