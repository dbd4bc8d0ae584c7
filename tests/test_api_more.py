"""The rest of the Python API: privaudit.attack / report / export_logits / audit_model / theory,
each the command line's command as a function: its to_dict() is the command's --json, and a
bad value raises the command line's one-line error. Sized for a 2-core CPU: one tiny digits
target, two one-epoch reference models, theory on toy problems."""

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


def _cli_json(*args: str) -> dict:
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    return _comparable(json.loads(out))


def _comparable(doc: dict, *drop: str) -> dict:
    """A --json document as it reads back (no NaN), without the command's timing and ``drop``."""
    doc = json.loads(dumps_json(doc))
    return {k: v for k, v in doc.items() if k not in ("phase_seconds", *drop)}


def _refused(call, cli_args: list[str], message: str, kind=ConfigError) -> None:
    """The API raises ``kind`` with ``message``, and the command line says it in one line."""
    with pytest.raises(kind) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)
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
def test_attack_is_the_command(target):
    root, name, first = target
    assert first.targets == [name] and not first.results[0].reused
    cli = _cli_json("attack", "--target", name, "--attacks", "shadow,loss", "--workdir", str(root))
    again = privaudit.attack(name, attacks=["shadow", "loss"], workdir=root)  # reused, as the command's was
    assert _comparable(again.to_dict()) == cli
    table = again.metrics
    assert sorted(table["attack"]) == ["confidence", "data-free", "loss", "shadow"]
    assert set(table["target"]) == {name}
    metrics = cli["attacks"][0]["metrics"]
    assert list(table["auc"]) == [metrics[a]["auc"] for a in table["attack"]]
    assert again.report_path.is_file() and again.csv_path.is_file() and "<table" in again._repr_html_()
    quiet = privaudit.attack(name, attacks="loss", workdir=root, report=False)
    assert quiet.to_dict()["report"] is None and quiet.report_path is None


@pytest.mark.slow
def test_attack_refuses_what_the_command_refuses(target, tmp_path):
    root, name, _ = target
    _refused(lambda: privaudit.attack(name, pool_size=3, workdir=root),
             ["attack", "--target", name, "--pool-size", "3", "--workdir", str(root)],
             "must be between 4 and 1024 (got 3)")
    _refused(lambda: privaudit.attack("no-such-run", workdir=root),
             ["attack", "--target", "no-such-run", "--workdir", str(root)], "no target named 'no-such-run'",
             ArtifactError)
    _refused(lambda: privaudit.attack(name, dataset="npz:" + str(tmp_path / "none.npz"), workdir=root),
             ["attack", "--target", name, "--dataset", "npz:" + str(tmp_path / "none.npz"), "--workdir", str(root)],
             "none.npz: no such file")
    with pytest.raises(ConfigError, match="--seeds expects comma-separated integers"):
        privaudit.attack(name, seeds="x", workdir=root)


@pytest.mark.slow
def test_report_is_the_command(target, tmp_path):
    root, _, _ = target
    result = privaudit.report(workdir=root)
    assert _comparable(result.to_dict()) == _cli_json("report", "--workdir", str(root))
    assert len(result.table) == 4 and result.skipped == [] and result.report_path.is_file()
    assert "privaudit report: 4 rows" in result._repr_html_()
    _refused(lambda: privaudit.report(workdir=tmp_path / "nope"), ["report", "--workdir", str(tmp_path / "nope")],
             f"workspace {tmp_path / 'nope'} does not exist", ArtifactError)
    with pytest.raises(ConfigError, match="--workdir must not be empty"):
        privaudit.report(workdir=" ")


@pytest.mark.slow
def test_export_logits_is_the_command(target, tmp_path):
    root, name, _ = target
    result = privaudit.export_logits(name, out=tmp_path / "api.npz", workdir=root)
    cli = _cli_json("export-logits", name, "--out", str(tmp_path / "cli.npz"), "--workdir", str(root))
    assert _comparable(result.to_dict(), "path") == _comparable(cli, "path")
    assert cli["path"] == str(tmp_path / "cli.npz") and result.shapes["logits_in"] == (60, 10)
    assert {"shadow_logits_in", "labels_out"} <= set(result.shapes)
    with np.load(tmp_path / "api.npz", allow_pickle=False) as api, np.load(tmp_path / "cli.npz") as cli_file:
        assert all(np.array_equal(api[k], cli_file[k]) and np.array_equal(api[k], result.arrays[k]) for k in api.files)
    assert "logits_in" in result._repr_html_()
    _refused(lambda: privaudit.export_logits(name, out=tmp_path / "x.txt", workdir=root),
             ["export-logits", name, "--out", str(tmp_path / "x.txt"), "--workdir", str(root)],
             "--out must name an .npz file")
    _refused(lambda: privaudit.export_logits(name, out=tmp_path / "p.npz", pool_size=2, workdir=root),
             ["export-logits", name, "--out", str(tmp_path / "p.npz"), "--pool-size", "2", "--workdir", str(root)],
             "must be between 4 and 4096 (got 2)")


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A digits MLP's state dict (width 16) saved by torch.save, as a model trained elsewhere."""
    from torch import nn

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("external") / "mlp.pt"
    torch.save(nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10)).state_dict(), path)
    return path


@pytest.mark.slow
def test_audit_model_is_the_command(weights, tmp_path):
    recipe = dict(members="0:60", model="mlp", width=16, dataset="digits", references=2, epochs=1, batch_size=32)
    result = privaudit.audit_model(weights=weights, **recipe, mean=[0.0], std="1", device="cpu", workdir=tmp_path)
    args = [f"--{k.replace('_', '-')}={v}" for k, v in recipe.items()]
    cli = _cli_json("audit-model", "--weights", str(weights), *args, "--mean", "0", "--std", "1", "--workdir",
                    str(tmp_path))
    assert _comparable(result.to_dict(), "command") == _comparable(cli, "command")  # the references reused
    assert cli["command"].startswith("privaudit audit-model --weights")
    assert result.references["reference_size"] > 0 and {"lira-offline", "loss"} <= set(result.table["attack"])
    assert result.report_path.is_file() and "privaudit audit-model" in result._repr_html_()
    base = ["audit-model", "--weights", str(weights), "--members", "0:60", "--dataset", "digits", "--workdir",
            str(tmp_path)]
    _refused(lambda: privaudit.audit_model(weights=weights, **{**recipe, "references": 1}, workdir=tmp_path),
             [*base, "--pool-size", "1"], "must be between 2 and 1024 (got 1)")
    _refused(lambda: privaudit.audit_model(weights=weights, **recipe, mean="a,b", workdir=tmp_path),
             [*base, "--mean", "a,b"], "--mean takes comma-separated numbers")
    _refused(lambda: privaudit.audit_model(weights=tmp_path / "none.pt", members="0:60", workdir=tmp_path),
             ["audit-model", "--weights", str(tmp_path / "none.pt"), "--members", "0:60", "--workdir", str(tmp_path)],
             "does not exist", DataError)


@pytest.mark.slow
def test_theory_is_the_command(tmp_path):
    smoothing = privaudit.theory("smoothing", kappas=[0.5], draws=500, workdir=tmp_path)
    cli = _cli_json("theory", "smoothing", "--kappas", "0.5", "--draws", "500", "--workdir", str(tmp_path))
    assert _comparable(smoothing.to_dict()) == cli
    assert smoothing["max_gap_in_se"] == cli["max_gap_in_se"] and smoothing.page_path.is_file()
    assert smoothing.headline.startswith("smoothing: largest |closed form − Monte Carlo|")
    small = dict(kappas="0,1", iterations=40, n=20, d=5, m=10)
    convergence = privaudit.theory("convergence", **{**small, "kappas": [0, 1]}, workdir=tmp_path)
    cli = _cli_json("theory", "convergence", *[f"--{k}={v}" for k, v in small.items()], "--workdir", str(tmp_path))
    assert _comparable(convergence.to_dict()) == cli
    assert [row["kappa"] for row in convergence["per_kappa"]] == [0.0, 1.0] and "λ₀" in convergence._repr_html_()


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
        _refused(call, ["theory", experiment, *cli, "--workdir", str(tmp_path)], message)
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
