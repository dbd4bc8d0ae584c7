"""The rest of the Python API: privaudit.attack / report / export_logits / audit_model / theory,
each the command line's command as a function: its to_dict() is the command's --json, and a
bad value raises the command line's one-line error. Each workload runs once, through the API:
that each command calls its function with its options, prints its to_dict() and says the API's
refusals as its one error line is pinned once, for every command, in tests/test_cli_forwarding.py.
Sized for a 2-core CPU: one tiny digits target, two one-epoch reference models, theory on toy
problems."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cli_helpers import one_error_line, run_cli

import privaudit
from privaudit.errors import ArtifactError, ConfigError, DataError
from privaudit.files.atomic import dumps_json
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace

CPU = torch.device("cpu")


def _read_back(doc: dict) -> dict:
    """A --json document as it reads back (no NaN)."""
    return json.loads(dumps_json(doc))


def _refused(call, message: str, kind=ConfigError, cli_args: list[str] | None = None) -> None:
    """The API raises ``kind`` with ``message``, in one line. The command line says what its
    function raises as its one error line (tests/test_cli_forwarding.py pins that for every
    command); ``cli_args``: a command line that must say ``message`` in one line too, exit
    status 2: one whose option the command line refuses itself, as it parses it (a range or a
    choice of a Typer callback, which the API checks in its own code), or one of the API's
    refusals, through the console entry point."""
    with pytest.raises(kind) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)
    if cli_args is not None:
        code, _, err = run_cli(*cli_args)
        assert code == 2 and message in one_error_line(err)


def test_the_new_names_are_the_functions_even_after_the_subpackages_load():
    import privaudit.reporting.build
    import privaudit.theorems.experiments
    from privaudit.api.report import report
    from privaudit.api.theory import theory

    assert privaudit.report is report and privaudit.theory is theory
    assert privaudit.reporting.__name__ == "privaudit.reporting" and privaudit.theorems.__name__ == "privaudit.theorems"
    for name in ("attack", "report", "export_logits", "audit_model", "theory"):
        assert callable(getattr(privaudit, name)) and name in dir(privaudit)


@pytest.fixture(scope="module")
def target(tmp_path_factory, data_cache, tiny):
    """A tiny digits target, attacked (shadow, loss) through the API: (workspace root, run name, result)."""
    ws = Workspace(tmp_path_factory.mktemp("api-more")).ensure_writable()
    run = ensure_model(tiny(kappa=0.5, seed=2), ws, data_cache, CPU)
    result = privaudit.attack(run.name, attacks="shadow,loss", device="cpu", workdir=ws.root)
    return ws.root, run.name, result


@pytest.mark.slow
def test_attack_attacks_once_and_reuses(target):
    root, name, first = target
    assert first.targets == [name] and not first.results[0].reused
    again = privaudit.attack(name, attacks=["shadow", "loss"], workdir=root)  # reused
    assert again.targets == [name] and again.results[0].reused
    doc = again.to_dict()
    assert _read_back(doc["attacks"][0]["metrics"]) == _read_back(first.to_dict()["attacks"][0]["metrics"])
    table = again.metrics
    assert sorted(table["attack"]) == ["confidence", "data-free", "loss", "shadow"]
    assert set(table["target"]) == {name}
    metrics = doc["attacks"][0]["metrics"]
    assert list(table["auc"]) == [metrics[a]["auc"] for a in table["attack"]]
    assert again.report_path.is_file() and again.csv_path.is_file() and "<table" in again._repr_html_()
    quiet = privaudit.attack(name, attacks="loss", workdir=root, report=False)
    assert quiet.to_dict()["report"] is None and quiet.report_path is None


@pytest.mark.slow
def test_attack_refuses_what_the_command_refuses(target, tmp_path):
    root, name, _ = target
    _refused(lambda: privaudit.attack(name, pool_size=3, workdir=root), "must be between 4 and 1024 (got 3)",
             cli_args=["attack", "--target", name, "--pool-size", "3", "--workdir", str(root)])
    _refused(lambda: privaudit.attack("no-such-run", workdir=root), "no target named 'no-such-run'",
             ArtifactError)  # the command's line: tests/test_refusals.py
    _refused(lambda: privaudit.attack(name, dataset="npz:" + str(tmp_path / "none.npz"), workdir=root),
             "none.npz: no such file",
             cli_args=["attack", "--target", name, "--dataset", "npz:" + str(tmp_path / "none.npz"), "--workdir",
                       str(root)])
    with pytest.raises(ConfigError, match="--seeds expects comma-separated integers"):
        privaudit.attack(name, seeds="x", workdir=root)


@pytest.mark.slow
def test_report_rebuilds_the_workspaces_reports(target, tmp_path):
    root, _, _ = target
    result = privaudit.report(workdir=root)
    assert len(result.table) == 4 and result.skipped == [] and result.report_path.is_file()
    doc = result.to_dict()
    assert doc["rows"] == 4 and len(doc["table"]) == 4 and doc["html"] == str(result.report_path)
    assert "privaudit report: 4 rows" in result._repr_html_()
    _refused(lambda: privaudit.report(workdir=tmp_path / "nope"), f"workspace {tmp_path / 'nope'} does not exist",
             ArtifactError)  # the command's line: tests/test_cli_finish.py
    with pytest.raises(ConfigError, match="--workdir must not be empty"):
        privaudit.report(workdir=" ")


@pytest.mark.slow
def test_export_logits_writes_the_file_out_names(target, tmp_path):
    root, name, _ = target
    result = privaudit.export_logits(name, out=tmp_path / "api.npz", workdir=root)
    assert result.path == tmp_path / "api.npz" and result.to_dict()["path"] == str(tmp_path / "api.npz")
    assert result.to_dict()["arrays"]["logits_in"] == [60, 10] and result.shapes["logits_in"] == (60, 10)
    assert {"shadow_logits_in", "labels_out"} <= set(result.shapes)
    with np.load(tmp_path / "api.npz", allow_pickle=False) as api:
        assert set(api.files) == set(result.arrays)
        assert all(np.array_equal(api[k], result.arrays[k]) for k in api.files)
    assert "logits_in" in result._repr_html_()
    _refused(lambda: privaudit.export_logits(name, out=tmp_path / "x.txt", workdir=root),
             "--out must name an .npz file",  # one of the API's refusals, through the console entry point
             cli_args=["export-logits", name, "--out", str(tmp_path / "x.txt"), "--workdir", str(root)])
    _refused(lambda: privaudit.export_logits(name, out=tmp_path / "p.npz", pool_size=2, workdir=root),
             "must be between 4 and 4096 (got 2)",
             cli_args=["export-logits", name, "--out", str(tmp_path / "p.npz"), "--pool-size", "2", "--workdir",
                       str(root)])


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A digits MLP's state dict (width 16) saved by torch.save, as a model trained elsewhere."""
    from torch import nn

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("external") / "mlp.pt"
    torch.save(nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10)).state_dict(), path)
    return path


@pytest.mark.slow
def test_audit_model_audits_a_model_trained_elsewhere(weights, tmp_path):
    recipe = dict(members="0:60", model="mlp", width=16, dataset="digits", references=2, epochs=1, batch_size=32)
    command = f"privaudit audit-model --weights {weights} --members 0:60"  # what the command passes (its line)
    result = privaudit.audit_model(weights=weights, **recipe, mean=[0.0], std="1", device="cpu", workdir=tmp_path,
                                   command=command)
    assert result.to_dict()["command"] == command  # on its page and in its --json
    assert result.references["reference_size"] > 0 and {"lira-offline", "loss"} <= set(result.table["attack"])
    assert result.report_path.is_file() and "privaudit audit-model" in result._repr_html_()
    base = ["audit-model", "--weights", str(weights), "--members", "0:60", "--dataset", "digits", "--workdir",
            str(tmp_path)]
    _refused(lambda: privaudit.audit_model(weights=weights, **{**recipe, "references": 1}, workdir=tmp_path),
             "must be between 2 and 1024 (got 1)", cli_args=[*base, "--pool-size", "1"])
    _refused(lambda: privaudit.audit_model(weights=weights, **recipe, mean="a,b", workdir=tmp_path),
             "--mean takes comma-separated numbers")
    _refused(lambda: privaudit.audit_model(weights=tmp_path / "none.pt", members="0:60", workdir=tmp_path),
             "does not exist", DataError)  # the command's line: tests/test_scan.py


@pytest.mark.slow
def test_theory_runs_each_experiment(tmp_path):
    smoothing = privaudit.theory("smoothing", kappas=[0.5], draws=500, workdir=tmp_path)
    assert np.isfinite(smoothing["max_gap_in_se"]) and smoothing.page_path.is_file()
    assert smoothing.headline.startswith("smoothing: largest |closed form − Monte Carlo|")
    small = dict(iterations=40, n=20, d=5, m=10)
    convergence = privaudit.theory("convergence", **small, kappas=[0, 1], workdir=tmp_path)
    assert [row["kappa"] for row in convergence["per_kappa"]] == [0.0, 1.0] and "λ₀" in convergence._repr_html_()


#: the options of theory's commands that the command line itself refuses as it parses them (a
#: Typer callback's range or choice), before it calls privaudit.theory
PARSED = ("--draws", "--labels")


@pytest.mark.parametrize("experiment, options, cli, message", [
    ("smoothing", {"iterations": 10}, None,
     "theory smoothing takes no option 'iterations'; its options are kappas, draws, seed, workdir"),
    ("all", {"kappas": "1"}, None, "theory all takes no option 'kappas'; its options are seed, workdir"),
    ("bogus", {}, None, "experiment 'bogus' is not one of smoothing, convergence, federated, masked-neurons, all"),
    ("smoothing", {"draws": 50}, ["--draws", "50"], "must be between 100 and 10000000 (got 50)"),
    ("convergence", {"labels": "cats"}, ["--labels", "cats"], "'cats' is not one of teacher, gaussian, sign"),
    ("convergence", {"kappas": [-0.1]}, ["--kappas", "-0.1"], "--kappas values must be between 0 and 100 (got -0.1)"),
    ("federated", {"local_steps": "1.5"}, ["--local-steps", "1.5"], "--local-steps needs whole numbers"),
    ("masked-neurons", {"p": [1]}, ["--p", "1"], "--p needs a value >= 2 for the categorical (IST) heatmap"),
    ("masked-neurons", {"m": 100_000, "d": 100_000}, ["--m", "100000", "--d", "100000"], "--m x --d = "),
])
def test_theory_refuses_what_the_command_refuses(tmp_path, experiment, options, cli, message):
    call = lambda: privaudit.theory(experiment, workdir=tmp_path, **options)  # noqa: E731
    if cli is None:
        with pytest.raises(ConfigError) as info:
            call()
        assert str(info.value) == message
    else:
        parsed = cli[0] in PARSED  # else the API's refusal, which the command says (tests/test_cli_forwarding.py)
        _refused(call, message, cli_args=["theory", experiment, *cli, "--workdir", str(tmp_path)] if parsed else None)
    assert not (tmp_path / "reports").exists()


@pytest.mark.slow
def test_audit_model_names_each_reference_it_trains_and_times_it_from_its_start(weights, tmp_path):
    """The progress lines of audit-model's references carry the model's label and the time
    since that model started (the label was empty and the time counted from the machine's
    boot when the start callback was not called)."""
    from cli_helpers import run_cli

    code, out, err = run_cli("audit-model", "--weights", str(weights), "--members", "0:60", "--model", "mlp",
                             "--width", "16", "--dataset", "digits", "--pool-size", "2", "--epochs", "1",
                             "--workdir", str(tmp_path))
    assert code == 0, err
    trained = [line for line in err.splitlines() if line.startswith("trained ")]
    assert len(trained) == 2, err
    for line in trained:
        label, rest = line[len("trained "):].split(": ", 1)
        assert "mlp" in label
        assert float(rest.split(" epochs in ")[1].split(" s")[0]) < 600
