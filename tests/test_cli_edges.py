"""The command line's edges: terminal tables at 80 columns, bounds
rounded in their safe direction, one spelling of defence, the options each command shares,
and the small edges (empty grids, unwritable workspaces, σ of a method without noise, …)."""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import typer.main
from cli_helpers import one_dp_target, one_error_line, run_cli
from rich.console import Console

from privaudit.cli import app
from privaudit.core.formatting import lower_bound, sig3, upper_bound, upper_sig3
from privaudit.errors import ConfigError


def render(renderable, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text().splitlines()


# -- 80 columns, and each bound rounded in its safe direction ---------------------------

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
    from privaudit.attacks.registry import OUTPUTS, REFERENCE_ATTACKS, names

    scanned = ("loss", "confidence", *names(source=OUTPUTS), "shadow", *REFERENCE_ATTACKS)

    return {name: {"auc": 0.99994, "auc_lo": 0.98765, "auc_hi": 0.99999, "tpr_at_1pct_fpr": 0.98765,
                   "tpr_at_0p1pct_fpr": 0.87654, "precision": 0.91234, "recall": 0.81234, "eps_lower_bound": 12.3456,
                   "gdp_mu": mu, "calibration": ("references" if i > 5 else "cv")}
            for i, name in enumerate(scanned)}


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

    ws, run_name, metrics = one_dp_target(tmp_path)
    text = "\n".join(render(summary_table(summary_rows(ws, [(run_name, metrics, {})]))))
    assert "3.10" in text and "3.09" not in text          # ε acct, an upper bound: up
    assert " 1.05 " in text and "1.06" not in text        # μ, a lower bound: down
    assert " 1.23 " in text and "1.24" not in text        # ε lb: down


# -- one spelling, the options siblings share -------------------------------------------

def _command(*path: str):
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def _option(cmd, name: str):
    return next(p for p in cmd.params if name in getattr(p, "opts", ()) or name in getattr(p, "aliases", ()))


@pytest.mark.parametrize("argv, shown, hidden", [
    (["audit"], "--defences", ("--defenses", "--defense", "--defence")),
    (["train"], "--defence", ("--defense",)),
    (["epsilon"], "--defence", ("--defense",)),
])
def test_the_options_say_defence_and_the_american_spelling_still_works(argv, shown, hidden):
    cmd = _command(*argv)
    p = _option(cmd, shown)
    assert p.opts == [shown] and set(p.aliases) == set(hidden)
    code, out, _ = run_cli(*argv, "--help")
    assert code == 0 and shown in out and "--defense" not in out and "--defenses" not in out
    for alias in hidden:
        ctx = cmd.make_context(" ".join(argv), [alias, "mixup"], resilient_parsing=True)
        assert ctx.params[p.name] == "mixup", alias


def test_attack_takes_seed_as_its_siblings_do(monkeypatch, tmp_path):
    import privaudit.api.attack as api

    got = []

    def record(target, **kwargs):
        got.append(kwargs["seeds"])
        raise ConfigError("recorded")

    monkeypatch.setattr(api, "attack", record)
    for argv, seeds in ((["--seed", "3"], 3), (["--seeds", "1,2"], "1,2"), ([], None)):
        code, _, err = run_cli("attack", "--target", "mlp", "--workdir", str(tmp_path), *argv)
        assert code == 2 and one_error_line(err) == "error: recorded"
        assert got.pop() == seeds
    code, _, err = run_cli("attack", "--target", "mlp", "--seed", "-1")
    assert code == 2 and "--seed" in one_error_line(err)
    assert "--seed " in run_cli("attack", "--help")[1]


@pytest.mark.parametrize("option, value", [("--device", "cuda"), ("--ray-address", "auto"), ("--cpus-per-job", "2")])
def test_masked_neurons_says_why_it_takes_no_device_or_ray_options(option, value, tmp_path):
    code, _, err = run_cli("reproduce", "masked-neurons", option, value, "--workdir", str(tmp_path))
    line = one_error_line(err)
    assert code == 2 and option in line and "runs in this process, on the CPU" in line
    assert not (tmp_path / "reports").exists()
    code, out, _ = run_cli("reproduce", "masked-neurons", "--help")
    assert "takes no --device, --ray-address or --cpus-per-job" in " ".join(out.replace("│", " ").split())


def test_the_top_level_help_names_every_attack_the_audit_runs():
    code, out, _ = run_cli("--help")
    text = " ".join(out.replace("│", " ").split())
    assert code == 0
    for words in ("shadow-model attack", "LiRA", "RMIA", "quantile-regression attack", "label-only", "one-run"):
        assert words in text, words


def test_the_accounting_docstring_gives_the_measured_ratio_of_the_sigma_half_bound():
    """The σ/2 comparator is not "about 4×" looser: the ratio depends on σ (4.1× at σ = 1,
    1.4× at σ = 2, 1.01× at the paper's σ = 15); the two cheap ones are recomputed here."""
    from privaudit.analysis.accounting import replace_one_epsilon, replace_one_epsilon_sigma_half

    doc = " ".join(replace_one_epsilon.__doc__.split())
    assert "about 4×" not in doc and "1.4× at σ = 2" in doc and "1.01×" in doc
    for sigma, q, steps, ratio in ((2.0, 1 / 106, 5300, 1.4), (15.0, 1 / 60, 24000, 1.01)):
        exact = replace_one_epsilon(sigma, q, steps, 1e-5)[0]
        half = replace_one_epsilon_sigma_half(sigma, q, steps, 1e-5)[0]
        assert half / exact == pytest.approx(ratio, abs=0.05 if ratio > 1.1 else 0.01)


# -- the smaller edges -------------------------------------------------------------------

@pytest.mark.parametrize("option", ["--kappas", "--sigmas", "--target-epsilons"])
def test_an_empty_grid_is_refused_not_read_as_none(option, tmp_path):
    code, _, err = run_cli("audit", "--dataset", "digits", option, "", "--workdir", str(tmp_path), "--dry-run")
    assert code == 2 and one_error_line(err) == f"error: {option} is empty: give comma-separated numbers, or none " \
                                                "for no values"
    from privaudit.api import params

    assert params.grid("none", "--kappas") == [] and params.grid(" 0.5,1 ", "--kappas") == [0.5, 1.0]


def test_an_unwritable_workdir_is_refused_before_the_plan(tmp_path, monkeypatch):
    """A path the workspace cannot be made at is bad input (exit 2), also with --dry-run,
    which planned and exited 0; a machine that refuses (read-only, full) stays exit 1."""
    import tempfile

    import privaudit.api.audit as audit_api

    (tmp_path / "file").write_text("not a folder")

    def no_plan(*args, **kwargs):
        raise AssertionError("planned")

    monkeypatch.setattr(audit_api, "_preview", no_plan)
    code, _, err = run_cli("audit", "--dataset", "digits", "--workdir", str(tmp_path / "file" / "ws"), "--dry-run")
    assert code == 2 and "is a file, not a folder" in one_error_line(err) and "--workdir" in one_error_line(err)

    def missing(*args, **kwargs):  # what mkdir and mkstemp meet under /proc
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))

    monkeypatch.setattr(tempfile, "mkstemp", missing)
    code, _, err = run_cli("audit", "--dataset", "digits", "--workdir", str(tmp_path / "ws"), "--dry-run")
    assert code == 2 and "is not writable (No such file or directory)" in one_error_line(err)
    if Path("/proc/self").is_dir() and os.geteuid() == 0:
        monkeypatch.undo()
        monkeypatch.setattr(audit_api, "_preview", no_plan)
        code, _, err = run_cli("audit", "--dataset", "digits", "--workdir", "/proc/nope", "--dry-run")
        assert code == 2 and "--workdir /proc/nope" in one_error_line(err)


def test_a_method_without_noise_prints_no_sigma():
    from privaudit.reproduction.hidden_state import cell_line

    noisy = cell_line(1, 4, ("dpsgd-convex", 1.33, 0), {"test_accuracy": 0.91234, "sigma": 2.5, "seconds": 12.4})
    assert noisy == "[1/4] dpsgd-convex at ε 1.33, seed 0: test accuracy 0.9123 (σ 2.5, 12 s)"
    ssp = cell_line(2, 4, ("ssp-relu", 1.33, 0), {"test_accuracy": 0.8, "sigma": math.nan, "seconds": 3.0})
    assert ssp == "[2/4] ssp-relu at ε 1.33, seed 0: test accuracy 0.8000 (3 s)" and "nan" not in ssp


def test_the_repr_rounds_durations():
    from privaudit.api.audit import AuditReport

    report = AuditReport(table=pd.DataFrame(), verdicts=pd.DataFrame(), report_path=Path("r/index.html"),
                         csv_path=Path("r/tradeoff.csv"), workdir=Path("."), seeds=[0], executor="local", jobs=3,
                         wall_seconds=384.7550575199998, phase_seconds={"train": 300.04999, "attack": 80.123456})
    text = repr(report)
    assert "wall_seconds=384.8" in text and "train: 300.0" in text and "attack: 80.1" in text
    assert "384.755" not in text and "jobs=3" in text


@pytest.mark.parametrize("given, says", [("logits", "logits"), ("probs", "probabilities"), ("loss", "losses")])
def test_a_scan_says_what_its_input_held(given, says):
    from privaudit.scanning.inputs import check

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 10)
    z = rng.normal(size=(10, 3))
    values = {"logits": z, "probs": np.exp(z) / np.exp(z).sum(1, keepdims=True), "loss": rng.uniform(0, 2, 10)}
    arrays = {f"{given}_in": values[given], f"{given}_out": values[given], "labels_in": y, "labels_out": y}
    assert check(arrays).describe()["outputs"] == says


# -- what the pages say -----------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _words(path: str) -> str:
    return " ".join((ROOT / path).read_text(encoding="utf-8").split())


def test_getting_started_gives_the_pool_size_the_audit_uses():
    from privaudit.core.defaults import DEFAULT_POOL_SIZE

    assert f"a reference pool of {DEFAULT_POOL_SIZE} models per setting" in _words("docs/getting-started.md")


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_cpu_wheel_line_says_what_to_do_where_its_index_cannot_be_reached(page):
    text = _words(page)
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    assert "--retries 0 --timeout 10" in text and "pip install -e . " in text and "default index" in text


def test_methods_describes_lira_offline_as_the_code_computes_it():
    """D.2: the offline score is the one-sided log Φ((φ − μ_out)/σ_out) on the OUT Gaussian,
    and where the reference code differs (median, two-sided) is said; the code agrees."""
    from scipy.stats import norm

    from privaudit.attacks.lira import lira_scores

    text = _words("docs/methods/d-attacks.md")
    d2 = text[text.index("### D.2 LiRA"):text.index("### D.3")]
    assert "one-sided" in d2 and "p = P(Z < (φ − μ_out)/σ_out) = Φ((φ − μ_out)/σ_out)" in d2
    assert "median" in d2 and "two-sided, −log N(φ; μ_out, σ_out²)" in d2
    rng = np.random.default_rng(3)
    ref = rng.normal(size=(6, 5))
    keep = np.zeros((6, 5), bool)
    keep[:3, :2] = True                      # samples 0 and 1 are IN three references
    target = rng.normal(size=5)
    out = ~keep
    mu = (ref * out).sum(0) / out.sum(0)
    sd = np.sqrt(((ref - mu) ** 2 * out).sum(0) / out.sum(0))
    assert lira_scores(target, ref, keep, online=False) == pytest.approx(norm.logcdf((target - mu) / sd))


def test_a_dry_runs_plan_table_fits_80_columns():
    """The longest durations and every role: no cell cut, no line over 80 characters; the
    dataset moves to the title when the plan has one."""
    from privaudit.cli.summary import plan_table

    models = [{"role": role, "model": "cnn-improved-small", "defence": defence, "dataset": "cifar10",
               "models": 16 if role == "reference" else 1, "reused": 0, "seconds": 9_000.0}
              for defence in ("plain", "k0.5", "dp-s0.5") for role in ("target", "shadow", "reference", "canary")]
    lines = render(plan_table(SimpleNamespace(command="audit", models=models)))
    text = "\n".join(lines)
    assert "…" not in text and max(map(len, lines)) <= 80, text
    assert "on cifar10" in lines[0] and "10 h 00 min" in text and "refs" in text


def test_train_prints_its_estimate_before_it_trains(tmp_path):
    """`train` prices what it will train first, as `audit`, `attack` and `reproduce` do; a
    second run reuses the model and its estimate says so."""
    from typer.testing import CliRunner

    args = ["train", "--dataset", "digits", "--epochs", "2", "--width", "16", "--part-size", "60", "--device", "cpu",
            "--workdir", str(tmp_path)]
    first = CliRunner().invoke(app, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    estimate = next(i for i, line in enumerate(lines) if line.startswith("estimate:"))
    assert "1 model to train, 0 reused" in lines[estimate]
    assert estimate < next(i for i, line in enumerate(lines) if line.startswith("trained "))
    again = CliRunner().invoke(app, args, catch_exceptions=False)
    assert "0 models to train, 1 reused" in again.output
