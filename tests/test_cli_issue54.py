"""A new user's findings (issue 54, item 6): terminal tables at 80 columns, bounds rounded in
their safe direction."""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import numpy as np
import pandas as pd
from rich.console import Console

from cli_helpers import run_cli
from privaudit.core.formatting import lower_bound, sig3, upper_bound, upper_sig3


def render(renderable, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text().splitlines()


# -- item 6: 80 columns, and each bound rounded in its safe direction ---------------------------

def test_bounds_round_in_their_safe_direction():
    """A lower bound shown never exceeds the true value, an upper bound never falls below it."""
    from privaudit.reporting import page_numbers

    assert lower_bound(1.05798) == "1.05" and upper_bound(1.05798) == "1.06"
    assert lower_bound(0.9401) == "0.94" and upper_bound(0.9401) == "0.95"
    assert lower_bound(2.28) == upper_bound(2.28) == "2.28"   # a value stored as 2.2799999… stays 2.28
    assert upper_sig3(3.0949) == "3.10" and sig3(3.0949) == "3.09"
    assert upper_sig3(1.33) == "1.33" and upper_sig3(12345.6) == "1.24e+04" and upper_sig3(9.991) == "10.0"
    assert upper_sig3(math.nan) == "—" and upper_sig3(math.inf) == "∞"
    assert page_numbers.lb3(1.05798) == "1.057" and page_numbers.upper_sig3 is upper_sig3
    rng = np.random.default_rng(0)
    for v in rng.uniform(0, 50, 200):
        assert float(lower_bound(v)) <= v <= float(upper_bound(v)) and v <= float(upper_sig3(v))


def _scan_metrics(mu: float = 1.05798) -> dict:
    """Every attack a scan can run, with numbers as wide as they get."""
    from privaudit.scanning.run import DESCRIPTIONS

    return {name: {"auc": 0.99994, "auc_lo": 0.98765, "auc_hi": 0.99999, "tpr_at_1pct_fpr": 0.98765,
                   "tpr_at_0p1pct_fpr": 0.87654, "precision": 0.91234, "recall": 0.81234, "eps_lower_bound": 12.3456,
                   "gdp_mu": mu, "calibration": ("references" if i > 5 else "cv")}
            for i, name in enumerate(DESCRIPTIONS)}


def test_the_scan_table_shows_whole_numbers_at_80_columns():
    from privaudit.cli.summary import scan_table

    lines = render(scan_table(SimpleNamespace(metrics=_scan_metrics())))
    assert max(map(len, lines)) <= 80 and not any("…" in line for line in lines), "\n".join(lines)
    row = next(line for line in lines if line.lstrip().startswith("lira-offline-global"))
    # AUC, its interval rounded outwards, TPRs, ε and μ lower bounds rounded down
    assert row.split()[1:8] == ["1.000", "0.98–1.00", "0.988", "0.877", "12.34", "1.05", "refs"], row


def test_privaudit_scan_prints_its_table_within_80_columns(tmp_path, monkeypatch):
    from privaudit.cli import output

    rng = np.random.default_rng(14)
    y_in, y_out = rng.integers(0, 10, 150), rng.integers(0, 10, 150)
    logits_in, logits_out = rng.normal(size=(150, 10)), rng.normal(size=(150, 10))
    logits_in[np.arange(150), y_in] += 3.0
    np.savez(tmp_path / "m.npz", logits_in=logits_in, logits_out=logits_out, labels_in=y_in, labels_out=y_out)
    monkeypatch.setattr(output.out, "width", 80)
    code, out, err = run_cli("scan", str(tmp_path / "m.npz"), "--out", str(tmp_path / "r"))
    assert code == 0, err
    lines = out.splitlines()
    table = lines[:lines.index(next(line for line in lines if line.startswith("leaks") or line.startswith("no ")))]
    assert max(map(len, out.splitlines())) <= 80 and not any("…" in line for line in table), out
    assert sum(line.lstrip().startswith(("loss ", "confidence ", "classifier ")) for line in table) == 3


def _verdict(**change) -> dict:
    row = {"model": "mlp", "dataset": "digits", "attack": "lira-online-global", "comparison": "strongest attack",
           "metric": "tpr_at_0p1pct_fpr", "acc_low": 0.922, "acc_high": 0.944, "gap": 0.02419, "gap_lo": 0.005284,
           "gap_hi": 0.044685, "interval": "t over 3 seeds", "verdict": "MG noise leaks less", "reason": "",
           "p_adjusted": 0.012}
    return {**row, **change}


def test_each_verdict_reads_whole_at_80_columns():
    """One block per verdict: its heading line, then the difference and the verdict in at
    most two lines (the table wrapped each verdict over 5-9 lines of a narrow column)."""
    from privaudit.cli.summary import verdict_table

    rows = [_verdict(), _verdict(metric="auc", verdict="no significant difference at 95 %"),
            _verdict(attack="shadow", comparison="paper's attack", metric="auc"),
            _verdict(metric="eps_lower_bound", verdict="no interval: cannot decide", interval="", gap=math.nan,
                     gap_lo=math.nan, gap_hi=math.nan, reason="one seed gives no interval; add --seeds")]
    rows += [{**r, "model": "cnn-improved-small", "dataset": "cifar10"} for r in rows]
    lines = render(verdict_table(SimpleNamespace(verdicts=pd.DataFrame(rows))))
    assert max(map(len, lines)) <= 80
    heads = [i for i, line in enumerate(lines) if " · test acc " in line]
    assert len(heads) == 8
    for start, end in zip(heads, heads[1:] + [len(lines)]):
        body = [line for line in lines[start + 1:end] if line.startswith("  ")]
        assert 1 <= len(body) <= 2, lines[start:end]
    first = " ".join(line.strip() for line in lines[heads[0]:heads[1]])
    assert "DP − MG +2.419 pp [+0.528, +4.469]: MG noise leaks less (t over 3 seeds, adjusted p = 0.012)" in first
    assert any(line.startswith("mlp · digits") for line in lines)
    assert any(line.startswith("cnn-improved-small · cifar10") for line in lines)


def test_the_summary_rounds_mu_down_and_the_accountant_epsilon_up(tmp_path):
    from privaudit.api.attack import summary_rows
    from privaudit.cli.summary import summary_table
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
    text = "\n".join(render(summary_table(summary_rows(ws, [(cfg.run_name, metrics, {})]))))
    assert "3.10" in text and "3.09" not in text          # ε acct, an upper bound: up
    assert " 1.05 " in text and "1.06" not in text        # μ, a lower bound: down
    assert " 1.23 " in text and "1.24" not in text        # ε lb: down
