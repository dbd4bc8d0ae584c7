"""The Python API: privaudit.audit / train / epsilon, the command line's options as keyword
arguments, result objects whose to_dict() is the command's --json (to_json() the same as text).
Each workload runs once, through the API: that each command calls its function with its options
and prints its to_dict() is pinned once for every command in tests/test_cli_forwarding.py."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import privaudit
from privaudit.errors import ConfigError

AUDIT = dict(dataset="digits", kappas="0.5", sigmas="none", epochs=2, attacks="shadow,loss")


def test_import_privaudit_loads_no_heavy_library_and_names_the_api():
    probe = ("import sys, privaudit\n"
             "names = [n for n in ('audit', 'train', 'epsilon', 'AuditReport', 'errors') if n in dir(privaudit)]\n"
             "print(','.join(m for m in ('torch', 'numpy', 'pandas') if m in sys.modules), '|', ','.join(names))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    heavy, names = out.stdout.strip().split("|")
    assert heavy.strip() == "" and names.strip() == "audit,train,epsilon,AuditReport,errors"
    with pytest.raises(AttributeError):
        _ = privaudit.no_such_function


def test_every_lazy_name_resolves_and_the_stub_declares_it():
    import re
    from pathlib import Path

    stub = (Path(privaudit.__file__).parent / "__init__.pyi").read_text()
    declared = set(re.findall(r"as (\w+)", stub))
    assert declared == set(privaudit.__all__) - {"__version__"}
    for name in privaudit.__all__:
        assert getattr(privaudit, name) is not None


@pytest.fixture(scope="module")
def api_audit(tmp_path_factory):
    return privaudit.audit(**AUDIT, workdir=tmp_path_factory.mktemp("api"))


@pytest.mark.slow
def test_audit_returns_the_table_the_verdicts_and_its_json(api_audit):
    report = api_audit
    attacks = set(report.table["attack"])
    assert {"shadow", "loss"} <= attacks and len(report.table) == 2 * len(attacks)  # 2 targets × every attack
    assert report.report_path.is_file() and report.csv_path.is_file() and report.seeds == [0]
    doc = json.loads(report.to_json())  # what audit --json prints (tests/test_cli_forwarding.py)
    assert doc["seeds"] == [0] and [t["run"] for t in doc["targets"]] == [t.name for t in report.targets]
    assert len(doc["targets"]) == 2 and doc["report"] == {"csv": str(report.csv_path), "html": str(report.report_path)}


@pytest.mark.slow
def test_audit_scores_are_the_per_sample_scores_behind_the_table(api_audit):
    report = api_audit
    baseline = report.attacks[0].target
    scores = report.scores()
    assert list(scores.columns[:1]) == ["member"] and {"shadow", "loss"} <= set(scores.columns)
    row = report.table[(report.table["target_run"] == baseline) & (report.table["attack"] == "loss")].iloc[0]
    assert len(scores) == row["n_members"] + row["n_nonmembers"] and scores["member"].sum() == row["n_members"]
    assert roc_auc_score(scores["member"], scores["loss"]) == pytest.approx(row["auc"], abs=1e-9)
    with pytest.raises(ConfigError, match="no attacked target"):
        report.scores("target-nope")


@pytest.mark.slow
def test_audit_shows_its_first_screen_in_a_notebook(api_audit):
    page = api_audit._repr_html_()
    assert "which defence leaks less" in page and api_audit.report_path.resolve().as_uri() in page
    assert "gap_lo" in page and "<table" in page


@pytest.mark.parametrize("kwargs, message", [
    ({"sigmas": "abc"}, "--sigmas expects comma-separated numbers, got 'abc'"),
    ({"kappas": [0.5, -1]}, "--kappas values must be between 0 and 100 (got -1)"),
    ({"seeds": [0, 0]}, "--seeds lists 0 twice"),
    ({"executor": "dask"}, "--executor 'dask' is not one of local, ray"),
    ({"dataset": "imagenet"}, "--dataset 'imagenet' is not one of"),
    ({"epochs": 0}, "--epochs must be >= 1 (got 0)"),
    ({"attacks": "nope"}, "unknown attack 'nope'"),
])
def test_bad_values_raise_the_command_lines_one_line_errors(tmp_path, kwargs, message):
    with pytest.raises(ConfigError) as info:
        privaudit.audit(**{**AUDIT, **kwargs}, workdir=tmp_path)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_grids_and_seeds_take_lists_numbers_or_the_command_lines_text():
    from privaudit.api import params

    assert params.grid("0.5, 1", "--kappas") == params.grid([0.5, 1], "--kappas") == [0.5, 1.0]
    assert params.grid("none", "--sigmas") == params.grid([], "--sigmas") == [] and params.grid(2, "--x") == [2.0]
    assert params.seeds("0,1,2") == params.seeds([0, 1, 2]) == [0, 1, 2] and params.seeds(None, 4) == [4]
    assert params.seeds(3) == [3]
    with pytest.raises(ConfigError, match="finite"):
        params.grid([float("nan")], "--kappas")


def test_train_reuses_a_model_and_gives_one_per_seed(tmp_path):
    kw = dict(dataset="digits", kappa=0.5, epochs=2, workdir=tmp_path)
    first = privaudit.train(**kw)
    again = privaudit.train(**kw)
    assert not first.runs[0].reused and again.runs[0].reused and again.path == first.path
    assert 0 <= first.metrics["test_accuracy"] <= 1 and "<table" in first._repr_html_()
    assert again.to_dict()["reused"] and again.to_dict()["path"] == str(first.path)
    several = privaudit.train(**kw, seeds=[0, 1])
    assert [r.reused for r in several.runs] == [True, False] and len(several.to_dict()["runs"]) == 2


@pytest.mark.slow
def test_epsilon_is_the_accountants():
    from privaudit.analysis.accounting import epsilon_from_history

    result = privaudit.epsilon(defence="dpsgd", batch_size=128, dataset_size=10_520, epochs=50, noise_multiplier=1.0)
    steps = -(-10_520 // 128) * 50
    assert result.epsilon == epsilon_from_history([(1.0, 1 / (steps // 50), steps)], 1e-5)[0]
    assert result["steps"] == steps and "<table" in result._repr_html_()
    calibrated = privaudit.epsilon(defence="dpsgd", batch_size=128, dataset_size=10_520, epochs=50,
                                   target_epsilon=result.epsilon)
    assert calibrated.noise_multiplier == pytest.approx(1.0, rel=1e-2) and calibrated.epsilon <= result.epsilon + 1e-9
    with pytest.raises(ConfigError, match="give exactly one of --sigma and --target-epsilon"):
        privaudit.epsilon(defence="dpsgd", batch_size=128, dataset_size=100, epochs=1)
    with pytest.raises(ConfigError, match="--batch-size must be"):
        privaudit.epsilon(defence="dpsgd", batch_size=0, dataset_size=100, epochs=1, noise_multiplier=1.0)
    assert np.isfinite(privaudit.epsilon(defence="noisycgd", batch_size=10, dataset_size=100, epochs=2,
                                         noise_multiplier=2.0, lr=0.1, l2=0.01).epsilon)


def test_to_json_is_to_dict_as_text():
    """Each result's to_dict() is its command's --json; to_json() is that document as JSON text
    (a str, as pandas' to_json returns), from the one shared method."""
    import dataclasses
    import importlib
    import pkgutil

    import privaudit.api
    from privaudit.api.results import ShortRepr

    result = privaudit.epsilon(defence="dpsgd", batch_size=128, dataset_size=10_520, epochs=50, noise_multiplier=1.0)
    text = result.to_json()
    assert isinstance(text, str) and "\n" not in text
    assert json.loads(text) == result.to_dict()
    assert json.loads(result.to_json(indent=2)) == result.to_dict() and "\n  " in result.to_json(indent=2)
    for info in pkgutil.iter_modules(privaudit.api.__path__):
        importlib.import_module(f"privaudit.api.{info.name}")
    classes = [c for c in _subclasses(ShortRepr) if dataclasses.is_dataclass(c)]
    assert len(classes) >= 10, classes
    for cls in classes:
        assert "to_dict" in {n for k in cls.__mro__ if k is not ShortRepr for n in vars(k)}, cls
        assert cls.to_json is ShortRepr.to_json, f"{cls.__name__} overrides to_json"


def _subclasses(cls: type) -> list[type]:
    return [s for c in cls.__subclasses__() for s in (c, *_subclasses(c))]


def _outputs(seed: int = 0, n: int = 300, gap: float = 1.5) -> dict:
    """Logits of a model more confident on its members (class-dependent, 5 classes)."""
    rng = np.random.default_rng(seed)
    y_in, y_out = rng.integers(0, 5, n), rng.integers(0, 5, n)
    logits_in, logits_out = rng.normal(size=(n, 5)), rng.normal(size=(n, 5))
    logits_in[np.arange(n), y_in] += gap
    return {"logits_in": logits_in, "labels_in": y_in, "logits_out": logits_out, "labels_out": y_out}


@pytest.mark.slow
def test_scan_takes_arrays_or_a_file(tmp_path):
    import torch

    arrays = _outputs()
    np.savez(tmp_path / "outputs.npz", **arrays)
    from_file = privaudit.scan(tmp_path / "outputs.npz", out=tmp_path / "file")
    from_arrays = privaudit.scan(out=tmp_path / "arrays", **{k: torch.as_tensor(v) for k, v in arrays.items()})
    cols = ["attack", "auc", "auc_lo", "auc_hi", "tpr_at_0p1pct_fpr"]
    assert from_file.table[cols].equals(from_arrays.table[cols])
    assert from_file.strongest and "leak" in from_file.verdict and from_file.report_path.is_file()
    scores = from_file.scores()
    loss = from_file.table.set_index("attack").loc["loss", "auc"]
    assert roc_auc_score(scores["member"], scores["loss"]) == pytest.approx(loss, abs=1e-9)
    with pytest.raises(ConfigError, match="not both"):
        privaudit.scan(tmp_path / "outputs.npz", **arrays)
    with pytest.raises(ConfigError, match="unknown array 'logit_in'"):
        privaudit.scan(logit_in=arrays["logits_in"])
    assert "<table" in from_arrays._repr_html_()


@pytest.mark.slow
def test_reproduce_returns_the_checked_statements(tmp_path):
    result = privaudit.reproduce("mg-noise", dataset="digits", models="mlp", experiments=["accuracy"], seeds=[0, 1],
                                 workdir=tmp_path)
    assert len(result.claims) == sum(result.counts.values()) > 0
    verdicts = result.claims["verdict"]
    assert result.counts["agrees"] == (verdicts == "agrees").sum()
    assert result.counts["disagrees"] == (verdicts == "disagrees").sum()
    assert {"figure", "model", "value", "lo", "hi"} <= set(result.claims.columns)
    assert result.report_path.is_file() and (result.folder / "accuracy.csv").is_file()
    again = privaudit.reproduce("mg-noise", dataset="digits", models="mlp", experiments="accuracy", seeds="0,1",
                                workdir=tmp_path)
    assert again.claims.equals(result.claims)  # resumed: every model reused, the same numbers
    with pytest.raises(ConfigError, match="--models takes some of"):
        privaudit.reproduce(models="resnet", workdir=tmp_path)
    with pytest.raises(ConfigError, match="paper 'lira' is not one of mg-noise"):
        privaudit.reproduce("lira", workdir=tmp_path)
