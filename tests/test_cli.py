"""The command line end to end on digits, in temporary workspaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.files.locks import LOCK_FOLDER

runner = CliRunner()
SMALL = ["--dataset", "digits", "--part-size", "120", "--epochs", "12", "--width", "64", "--device", "cpu"]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_help_explains_every_option():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("train", "attack", "report", "audit", "epsilon"):
        assert command in result.output
    import typer.main

    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert invoke(name, "--help").exit_code == 0
        for param in command.params:
            if param.name == "help":
                continue
            assert getattr(param, "help", None), f"{name} --{param.name} has no help text"


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """One small audit, run once for the tests below."""
    ws = tmp_path_factory.mktemp("audit")
    result = invoke("audit", *SMALL, "--kappas", "1,4", "--sigmas", "1", "--attacks", "shadow,loss",
                    "--workdir", str(ws), "--json")
    assert result.exit_code == 0, result.output
    return ws, json.loads(result.stdout)


@pytest.mark.slow
def test_audit_writes_models_attacks_and_reports(audited):
    ws, doc = audited
    assert len(doc["targets"]) == 4  # baseline, two kappas, one sigma
    names = [t["run"] for t in doc["targets"]]
    assert names[0].startswith("target-mlp-digits-plain-")
    assert any("-k4-" in n for n in names) and any("-dp-s1-" in n for n in names)
    for run in names:
        folder = ws / "models" / run
        assert {p.name for p in folder.iterdir()} == {"config.json", "metrics.json", "weights.npz", "manifest.json",
                                                      "loss_trace.npz"}
        cfg = json.loads((folder / "config.json").read_text())
        for key in ("privaudit_version", "torch_version", "device", "wall_seconds", "git_revision"):
            assert key in cfg["provenance"]
        shadow = run.replace("target-", "shadow-", 1)
        assert not (ws / "models" / shadow).exists()  # the shadow's hash differs: its role is part of the config
    assert len(list((ws / "models").glob("shadow-*"))) == 4
    table = pd.read_csv(ws / "reports" / "tradeoff.csv")
    assert len(table) == 4 * 4
    assert set(table["attack"]) == {"shadow", "loss", "confidence", "data-free"}
    dp_rows = table[table["dp"]]
    assert (dp_rows["epsilon"] > 0).all() and (dp_rows["delta"] == 1e-5).all()
    assert table[~table["dp"]]["epsilon"].isna().all()
    for col in ("auc", "precision", "recall", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "test_accuracy"):
        assert table[col].between(0, 1).all(), col
    html = (ws / "reports" / "index.html").read_text()
    assert "<svg" in html and "tradeoff" in html.lower() or "trade-off" in html.lower()
    phases = doc["phase_seconds"]  # where the audit's time went
    assert {"data", "train", "attack", "report"} <= set(phases)
    assert phases["train"] > 0 and phases["attack"] > 0 and phases["report"] > 0
    assert sum(phases.values()) <= doc["wall_seconds"] + 1e-6


@pytest.mark.slow
def test_audit_rerun_reuses_everything_and_gives_the_same_table(audited):
    ws, doc = audited
    before = snapshot(ws / "models")
    csv_before = (ws / "reports" / "tradeoff.csv").read_text()
    result = invoke("audit", *SMALL, "--kappas", "1,4", "--sigmas", "1", "--attacks", "shadow,loss",
                    "--workdir", str(ws), "--json")
    assert result.exit_code == 0
    again = json.loads(result.stdout)
    assert all(t["reused"] for t in again["targets"])
    assert snapshot(ws / "models") == before
    assert (ws / "reports" / "tradeoff.csv").read_text() == csv_before


@pytest.mark.slow
def test_same_seed_same_numbers_in_a_fresh_workspace(audited, tmp_path):
    """A config hash names one computation: ``train`` alone (the stacked engine with one
    model) gives bit for bit the model the audit trained in a stacked run beside the other
    settings' models, and the same command twice gives it again."""
    ws, doc = audited
    runs = []
    for folder in ("a", "b"):
        result = invoke("train", *SMALL, "--kappa", "1", "--workdir", str(tmp_path / folder), "--json")
        assert result.exit_code == 0
        runs.append(json.loads(result.stdout))
    fresh = runs[0]
    original = next(t for t in doc["targets"] if t["run"] == fresh["run"])
    assert original["metrics"]["stacked_models"] > 1 and fresh["metrics"]["stacked_models"] == 1
    for key in ("train_accuracy", "test_accuracy", "train_loss", "test_loss", "loss_history"):
        assert fresh["metrics"].get(key) == original["metrics"].get(key) == runs[1]["metrics"].get(key), key
    a = np.load(ws / "models" / fresh["run"] / "weights.npz")
    b = np.load(tmp_path / "a" / "models" / fresh["run"] / "weights.npz")
    c = np.load(tmp_path / "b" / "models" / fresh["run"] / "weights.npz")
    assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert all(np.array_equal(b[k], c[k]) for k in b.files)


@pytest.mark.slow
def test_attack_by_architecture_and_report(audited):
    ws, _ = audited
    result = invoke("attack", "--target", "mlp", "--attacks", "shadow,loss", "--workdir", str(ws), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["attacks"]) == 4 and all(a["reused"] for a in doc["attacks"])
    result = invoke("report", "--workdir", str(ws), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["rows"] == 16


@pytest.mark.slow
def test_train_then_attack_one_run_by_name(tmp_path):
    result = invoke("train", *SMALL, "--kappa", "0.5", "--workdir", str(tmp_path), "--json")
    assert result.exit_code == 0
    run = json.loads(result.stdout)["run"]
    result = invoke("attack", "--target", run, "--attacks", "shadow,loss", "--workdir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    attack = json.loads(result.stdout)["attacks"][0]
    assert attack["target"] == run and attack["shadow"].startswith("shadow-mlp-digits-k0.5-")
    shadow_cfg = json.loads((tmp_path / "models" / attack["shadow"] / "config.json").read_text())
    target_cfg = json.loads((tmp_path / "models" / run / "config.json").read_text())
    for key in ("data", "model", "defence", "train", "seed"):
        assert shadow_cfg[key] == target_cfg[key]  # identical recipe, defence included
    assert set(attack["metrics"]) == {"shadow", "loss", "confidence", "data-free"}


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.mark.parametrize("args, needles", [
    (["--kappa", "-0.5"], ["--kappa"]),
    (["--dp", "--noise-multiplier", "0"], ["--sigma"]),
    (["--dp", "--noise-multiplier", "-1"], ["--sigma"]),
    (["--dp"], ["--sigma", "--target-epsilon"]),
    (["--model", "resnet"], ["resnet"]),
    (["--part-size", "100000"], ["--part-size"]),
    (["--delta", "2"], ["--delta"]),
])
def test_bad_training_input_is_one_line(tmp_path, args, needles):
    result = invoke("train", "--dataset", "digits", *args, "--workdir", str(tmp_path))
    _one_line_error(result, *needles)
    assert not (tmp_path / "models").exists() or not any(p.name != LOCK_FOLDER for p in (tmp_path / "models").iterdir())


def test_missing_cifar_names_the_ways_out(tmp_path):
    result = invoke("train", "--kappa", "0.5", "--data-dir", str(tmp_path / "nowhere"), "--workdir", str(tmp_path))
    _one_line_error(result, "--data-dir", "--download", "--dataset digits")


def test_unknown_target_and_unwritable_workdir(tmp_path):
    _one_line_error(invoke("attack", "--target", "mlp", "--workdir", str(tmp_path)), "mlp")
    _one_line_error(invoke("attack", "--target", "no-such-run", "--workdir", str(tmp_path)), "no-such-run")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _one_line_error(invoke("train", *SMALL, "--workdir", str(blocker / "ws")), "is a file, not a folder")


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "foreign"])
def test_damaged_target_weights_are_set_aside_and_the_target_trained_again(tmp_path, damage):
    result = invoke("train", *SMALL, "--workdir", str(tmp_path), "--json")
    run = json.loads(result.stdout)["run"]
    weights = tmp_path / "models" / run / "weights.npz"
    original = weights.read_bytes()
    if damage == "corrupt":
        weights.write_bytes(os.urandom(2000))
    elif damage == "truncate":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        np.savez(weights, w=np.zeros(3))
    damaged = weights.read_bytes()
    result = invoke("attack", "--target", run, "--attack", "loss", "--workdir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert f"note: model folder {tmp_path / 'models' / run} is damaged (weights.npz" in result.output
    assert weights.read_bytes() == original                      # trained again from its config: the same bytes
    (kept,) = (tmp_path / "models" / ".damaged").glob(f"{run}-*")
    assert (kept / "weights.npz").read_bytes() == damaged        # the damaged copy, kept
    assert (tmp_path / "attacks" / run / "scores.npz").is_file()


def test_console_script_usage_errors_are_one_line(tmp_path):
    for args in (["train", "--epochs", "abc"], ["train", "--bogus"],
                 ["audit", "--kappas", "a,b", "--dataset", "digits"]):
        proc = subprocess.run([sys.executable, "-m", "privaudit", *args, "--workdir", str(tmp_path)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr


@pytest.mark.slow
def test_convex_relu_noisycgd_audit_end_to_end(tmp_path):
    """train → attack → report for the second DP family: rows named noisycgd with their
    hidden-state ε, the report names the mechanism."""
    result = invoke("audit", "--model", "convex-relu", "--dataset", "digits", "--part-size", "120", "--epochs", "10",
                    "--width", "16", "--sigmas", "5", "--attacks", "shadow,loss", "--workdir", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [t["run"].split("-")[3:5] for t in doc["targets"]] == [["digits", "plain"], ["digits", "ncgd"]]
    table = pd.read_csv(tmp_path / "reports" / "tradeoff.csv")
    ncgd = table[table["defence"] == "noisycgd"]
    assert len(ncgd) == 4 and (ncgd["accountant"] == "hidden-state GDP").all() and (ncgd["epsilon"] > 0).all()
    html = (tmp_path / "reports" / "index.html").read_text()
    assert "NoisyCGD σ=5" in html
    bad = invoke("train", "--model", "convex-relu", "--dataset", "digits", "--kappa", "0.5", "--workdir", str(tmp_path))
    assert bad.exit_code == 2 and "MG noise" in bad.stderr


def test_abort_and_broken_pipe_are_handled_without_traceback(monkeypatch):
    """`privaudit --help | head -1` closes the pipe early: the console entry point exits
    without an exception escaping (it used to fail looking up Click's Abort)."""
    import sys

    from privaudit.cli import _ABORT, main

    sink = open(os.devnull, "w")  # what the console re-points a broken stdout at

    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            return sink.fileno()

        def flush(self):
            pass

        def isatty(self):
            return False

    assert issubclass(_ABORT, BaseException)
    monkeypatch.setattr(sys, "argv", ["privaudit", "theory", "--help"])
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    with pytest.raises(SystemExit) as exit_info:
        main()
    sink.close()
    assert exit_info.value.code in (0, 1)


def test_console_entry_skips_the_teardown_only_when_it_is_safe(monkeypatch):
    """The console entry point relaxes the garbage collector for its own process, runs the exit
    handlers, then leaves with os._exit and the command's status; with another thread alive, a
    status that is not a number or a profiler attached, it takes the normal exit (SystemExit)."""
    import sys

    import privaudit.cli as cli
    from privaudit.core import timing

    calls = []
    monkeypatch.setattr(timing, "FREEZE_IMPORTS", False)  # restored after the test: entry() sets it
    monkeypatch.setattr(cli.gc, "set_threshold", lambda *t: calls.append(("gc threshold", t[0])))
    monkeypatch.setattr(cli.atexit, "_run_exitfuncs", lambda: calls.append("exit handlers"))
    monkeypatch.setattr(cli.os, "_exit", lambda code: calls.append(("os._exit", code)))

    def run(status, threads=1, profiler=None):
        calls.clear()
        monkeypatch.setattr(cli, "main", lambda: sys.exit(status))
        monkeypatch.setattr(cli.threading, "active_count", lambda: threads)
        monkeypatch.setattr(cli.sys, "getprofile", lambda: profiler)
        try:
            cli.entry()
        except SystemExit as exc:
            return calls[1:], exc.code
        return calls[1:], None

    relaxed = ("gc threshold", cli.YOUNG_GC_THRESHOLD)
    assert run(3) == (["exit handlers", ("os._exit", 3)], None) and calls[0] == relaxed and timing.FREEZE_IMPORTS
    assert run(None) == (["exit handlers", ("os._exit", 0)], None)
    assert run("a message") == ([], "a message")
    assert run(2, threads=2) == ([], 2)                     # another thread still running
    assert run(2, profiler=object()) == ([], 2)             # python -m cProfile -m privaudit ...
