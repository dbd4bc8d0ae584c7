"""Each command forwards to its function of the Python API (privaudit.api), pinned once here
for every command: with the function replaced by a recorder, the command is run with options
that differ from their defaults, and the recorded call must carry exactly those values under
the function's keyword arguments (every keyword the command passes, so an option that is
dropped, added or sent to the wrong keyword fails). Where a real result object is cheap to
build the recorder returns one and ``--json`` must print exactly its ``to_dict()`` (with
``phase_seconds``, and audit's own ``wall_seconds``); otherwise it raises a ConfigError right
after recording, which the command must say as one ``error:`` line with exit status 2, as it
says every refusal of the API.

This is why the API's tests (tests/test_api.py, tests/test_api_more.py) run each workload
once, through the API, and do not run it again through the command line to compare."""

from __future__ import annotations

import importlib
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typer.main
from cli_helpers import one_error_line, run_cli

from privaudit.api.recipe import Recipe
from privaudit.cli import app
from privaudit.core.hooks import AuditHooks
from privaudit.errors import ConfigError
from privaudit.files.atomic import dumps_json

#: what the recorder raises when it returns no result
SENTINEL = "recorded by the forwarding test"
#: the keyword arguments that carry a command's progress display and log, not an option
CALLBACKS = ("hooks", "log", "progress", "on_start", "on_epoch", "on_estimate")
#: stands for the command line as typed (``privaudit ARGV``), which some commands record
COMMAND = object()

#: every recipe option of train and audit away from its default, and the Recipe they make
RECIPE_ARGV = ["--model", "cnn", "--model-arg", "depth=2", "--dataset", "digits", "--epochs", "3", "--batch-size",
               "16", "--lr", "0.01", "--weight-decay", "0.001", "--precision", "bf16", "--augment", "flip", "--width",
               "24", "--part-size", "50", "--canaries", "mislabeled:5", "--max-grad-norm", "2", "--delta", "1e-6"]
RECIPE = Recipe(model="cnn", model_args=["depth=2"], dataset="digits", epochs=3, batch_size=16, lr=0.01,
                weight_decay=0.001, precision="bf16", augment="flip", width=24, part_size=50, canaries="mislabeled:5",
                max_grad_norm=2.0, delta=1e-6)
#: the options of where the data are and what runs them, as given and as forwarded
WHERE_ARGV = ["--data-dir", "data", "--download", "--device", "cpu", "--workdir", "ws"]
WHERE = dict(data_dir=Path("data"), download=True, device="cpu", workdir=Path("ws"))
RAY_ARGV = ["--executor", "ray", "--ray-address", "auto", "--cpus-per-job", "2"]
RAY = dict(executor="ray", ray_address="auto", cpus_per_job=2)


@dataclass
class Case:
    """``privaudit ARGV`` must call ``MODULE.FUNCTION(*args, **kwargs)``; ``result`` builds
    what the recorder returns (None: it raises), ``extra``: keys --json adds to to_dict()."""

    argv: list[str]
    module: str
    function: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Callable[[], Any] | None = None
    extra: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        """The command's words (``audit``, ``theory smoothing``)."""
        return " ".join(self.argv[:2] if self.argv[0] in ("theory", "reproduce") else self.argv[:1])

    def expected(self) -> dict[str, Any]:
        typed = "privaudit " + shlex.join(self.argv)
        return {k: typed if v is COMMAND else v for k, v in self.kwargs.items()}


# -- the cheap real results -----------------------------------------------------------------

def _audit_report():
    from privaudit.api.audit import AuditReport

    return AuditReport(table=pd.DataFrame({"attack": ["loss"], "auc": [0.61]}), verdicts=pd.DataFrame(),
                       report_path=Path("ws/reports/index.html"), csv_path=Path("ws/reports/tradeoff.csv"),
                       workdir=Path("ws"), seeds=[1, 2], executor="ray", jobs=4, wall_seconds=1234.5,
                       phase_seconds={"train": 1000.0, "attack": 234.5})


def _trained_models():
    from privaudit.api.train import TrainedModels
    from privaudit.core.config import make_config
    from privaudit.pipeline.runs import RunResult

    cfg = make_config(dataset="digits", model="mlp", width=24, seed=1)
    run = RunResult(name=cfg.run_name, path=Path("ws/models") / cfg.run_name, reused=True,
                    metrics={"test_accuracy": 0.8, "epsilon": float("nan"), "loss_history": [2.3, 1.1]})
    return TrainedModels(runs=[run], configs=[cfg])


def _attack_results():
    from privaudit.api.attack import AttackResults

    return AttackResults(metrics=pd.DataFrame(), workdir=Path("ws"))


def _workspace_report():
    from privaudit.api.report import WorkspaceReport

    return WorkspaceReport(table=pd.DataFrame({"attack": ["loss", "shadow"], "auc": [0.61, float("nan")]}),
                           verdicts=pd.DataFrame(), report_path=Path("ws/reports/index.html"),
                           csv_path=Path("ws/reports/tradeoff.csv"), skipped=["attacks/damaged"])


def _scan_summary(**more: Any) -> dict[str, Any]:
    return {"html": "out/index.html", "headline": {"verdict": "leaks", "strongest": "loss"},
            "attacks": [{"attack": "loss", "auc": 0.6, "auc_lo": 0.55, "auc_hi": 0.65}], **more}


def _scan_report():
    from privaudit.api.scan import ScanReport

    summary = _scan_summary(command="privaudit scan outputs.npz")
    return ScanReport(table=pd.DataFrame(summary["attacks"]), groups=pd.DataFrame(), headline=summary["headline"],
                      folder=Path("out"), report_path=Path("out/index.html"), summary=summary)


def _model_audit():
    from privaudit.api.audit_model import ModelAudit

    summary = _scan_summary(references={"reference_test_accuracy": 0.7, "ks_distance": 0.1})
    return ModelAudit(table=pd.DataFrame(summary["attacks"]), groups=pd.DataFrame(), headline=summary["headline"],
                      folder=Path("out"), report_path=Path("out/index.html"), summary=summary,
                      references=summary["references"])


def _exported_logits():
    from privaudit.api.export_logits import ExportedLogits

    return ExportedLogits(path=Path("out.npz"), arrays={"logits_in": np.zeros((3, 10), np.float32),
                                                        "labels_in": np.zeros(3, np.int64)})


def _epsilon_result():
    from privaudit.api.epsilon import EpsilonResult

    return EpsilonResult(values={"defense": "noisycgd", "delta": 1e-6, "epsilon": 1.25, "noise_multiplier": 2.0})


def _theory_result():
    from privaudit.api.theory import TheoryResult

    return TheoryResult(experiment="smoothing", values={"max_gap": 1e-3, "max_gap_se": 2e-3, "max_gap_in_se": 0.5},
                        page_path=Path("ws/reports/theory/index.html"))


def _hidden_state_plan():
    return {"paper": "hidden-state", "cells": 6, "seconds": 12.5}  # what reproduce's dry run returns there


# -- every command, with options away from their defaults ----------------------------------

CASES = [
    Case(["audit", *RECIPE_ARGV, *WHERE_ARGV, *RAY_ARGV, "--kappas", "0.5,1", "--sigmas", "2", "--target-epsilons",
          "4", "--defences", "mg,mixup", "--knobs", "mixup=0.2,0.5", "--attacks", "shadow,loss", "--pool-size", "6",
          "--shadow-dataset", "digits", "--seed", "3", "--seeds", "1,2", "--match-accuracy", "--target-accuracies",
          "0.6", "--match-tolerance", "0.05", "--dry-run", "--json"],
         "privaudit.api.audit", "audit", (RECIPE,),
         dict(WHERE, **RAY, kappas="0.5,1", sigmas="2", target_epsilons="4", defences="mg,mixup",
              knobs=["mixup=0.2,0.5"], attacks=["shadow,loss"], pool_size=6, shadow_dataset="digits", seed=3,
              seeds="1,2", match_accuracy=True, match_tolerance=0.05, target_accuracies="0.6", dry_run=True),
         _audit_report, extra=("wall_seconds",)),
    Case(["train", *RECIPE_ARGV, *WHERE_ARGV, "--kappa", "0.5", "--dp", "--defence", "dpsgd", "--knob", "0.7",
          "--sigma", "1.5", "--target-epsilon", "4", "--seed", "3", "--seeds", "1,2", "--dry-run", "--json"],
         "privaudit.api.train", "train", (RECIPE,),
         dict(WHERE, kappa=0.5, dp=True, defence="dpsgd", knob=0.7, noise_multiplier=1.5, target_epsilon=4.0, seed=3,
              seeds="1,2", dry_run=True), _trained_models),
    Case(["attack", "--target", "cnn", "--attacks", "loss", "--attacks", "lira", "--pool-size", "6",
          "--shadow-dataset", "digits", "--dataset", "digits", "--seed", "3", *WHERE_ARGV, "--no-report",
          "--dry-run", "--json"],
         "privaudit.api.attack", "attack", ("cnn",),
         dict(WHERE, attacks=["loss", "lira"], pool_size=6, shadow_dataset="digits", dataset="digits", seeds=3,
              report=False, dry_run=True), _attack_results),
    Case(["attack", "--target", "mlp-digits-run", "--seeds", "1,2", "--workdir", "ws"],  # --seeds replaces --seed
         "privaudit.api.attack", "attack", ("mlp-digits-run",),
         dict(attacks=["all"], pool_size=None, shadow_dataset=None, dataset=None, seeds="1,2", data_dir=None,
              download=False, device="auto", workdir=Path("ws"), report=True, dry_run=False)),
    Case(["report", "--workdir", "ws", "--json"], "privaudit.api.report", "report", (),
         dict(workdir=Path("ws")), _workspace_report),
    Case(["scan", "outputs.npz", "--out", "out", "--delta", "1e-6", "--folds", "3", "--seed", "4", "--json"],
         "privaudit.api.scan", "scan", (Path("outputs.npz"),),
         dict(out=Path("out"), delta=1e-6, folds=3, seed=4, command=COMMAND), _scan_report),
    Case(["export-logits", "mlp-digits-run", "--out", "out.npz", "--pool-size", "6", *WHERE_ARGV[:2],
          *WHERE_ARGV[3:], "--json"],
         "privaudit.api.export_logits", "export_logits", ("mlp-digits-run",),
         dict(out=Path("out.npz"), pool_size=6, data_dir=Path("data"), device="cpu", workdir=Path("ws")),
         _exported_logits),
    Case(["audit-model", "--weights", "model.pt", "--members", "0:60", "--model", "cnn", "--model-arg", "depth=2",
          "--width", "24", "--dataset", "digits", *WHERE_ARGV, "--non-members", "60:120", "--pool-size", "4",
          "--epochs", "3", "--batch-size", "16", "--lr", "0.01", "--weight-decay", "0.001", "--augment", "flip",
          "--kappa", "0.5", "--mean", "0.5", "--std", "0.25", "--seed", "3", "--delta", "1e-6", "--out", "out",
          "--json"],
         "privaudit.api.audit_model", "audit_model", (),
         dict(WHERE, weights=Path("model.pt"), members="0:60", model="cnn", model_args=["depth=2"], width=24,
              dataset="digits", non_members="60:120", references=4, epochs=3, batch_size=16, lr=0.01,
              weight_decay=0.001, augment="flip", kappa=0.5, mean="0.5", std="0.25", seed=3, delta=1e-6,
              out=Path("out"), command=COMMAND), _model_audit),
    Case(["epsilon", "--defence", "noisycgd", "--batch-size", "10", "--dataset-size", "100", "--epochs", "2",
          "--sigma", "2", "--target-epsilon", "3", "--lr", "0.1", "--weight-decay", "0.01", "--smoothness", "5",
          "--delta", "1e-6", "--json"],
         "privaudit.api.epsilon", "epsilon", (),
         dict(defence="noisycgd", batch_size=10, dataset_size=100, epochs=2, noise_multiplier=2.0, target_epsilon=3.0,
              lr=0.1, l2=0.01, smoothness=5.0, delta=1e-6), _epsilon_result),
    Case(["theory", "smoothing", "--kappas", "0.3,0.7", "--draws", "1000", "--seed", "3", "--workdir", "ws",
          "--json"],
         "privaudit.api.theory", "theory", ("smoothing",),
         dict(seed=3, workdir=Path("ws"), kappas="0.3,0.7", draws=1000), _theory_result),
    Case(["theory", "convergence", "--kappas", "0,1", "--iterations", "50", "--lr", "0.01", "--n", "30", "--d", "4",
          "--m", "8", "--labels", "sign", "--seed", "3", "--workdir", "ws"],
         "privaudit.api.theory", "theory", ("convergence",),
         dict(seed=3, workdir=Path("ws"), kappas="0,1", iterations=50, lr=0.01, n=30, d=4, m=8, labels="sign")),
    Case(["theory", "federated", "--kappas", "0,1", "--local-steps", "2,3", "--workers", "3", "--rounds", "20",
          "--lr", "0.01", "--labels", "gaussian", "--seed", "3", "--workdir", "ws"],
         "privaudit.api.theory", "theory", ("federated",),
         dict(seed=3, workdir=Path("ws"), kappas="0,1", local_steps="2,3", workers=3, rounds=20, lr=0.01,
              labels="gaussian")),
    Case(["theory", "masked-neurons", "--p", "2,4", "--xi", "0.5", "--local-steps", "2", "--rounds", "20", "--n",
          "30", "--d", "4", "--m", "8", "--lr", "0.1", "--labels", "sign", "--seed", "3", "--workdir", "ws"],
         "privaudit.api.theory", "theory", ("masked-neurons",),
         dict(seed=3, workdir=Path("ws"), p="2,4", xi="0.5", local_steps="2", rounds=20, n=30, d=4, m=8, lr=0.1,
              labels="sign")),
    Case(["theory", "all", "--seed", "3", "--workdir", "ws"], "privaudit.api.theory", "theory", ("all",),
         dict(seed=3, workdir=Path("ws"))),
    Case(["reproduce", "mg-noise", "--scale", "full", "--dataset", "digits", *WHERE_ARGV, *RAY_ARGV, "--models",
          "mlp,cnn", "--experiments", "accuracy,sweep", "--seeds", "0,1", "--dry-run"],
         "privaudit.api.reproduce", "reproduce", ("mg-noise",),
         dict(WHERE, **RAY, scale="full", dataset="digits", models="mlp,cnn", experiments="accuracy,sweep",
              seeds="0,1", command=COMMAND, dry_run=True)),
    Case(["reproduce", "hidden-state", "--scale", "full", "--dataset", "mnist", *WHERE_ARGV[:3], *WHERE_ARGV[5:],
          *RAY_ARGV, "--experiments", "table1", "--seeds", "0,1", "--dry-run", "--json"],
         "privaudit.api.reproduce", "reproduce", ("hidden-state",),
         dict(RAY, scale="full", dataset="mnist", data_dir=Path("data"), download=True, workdir=Path("ws"),
              experiments="table1", seeds="0,1", command=COMMAND, dry_run=True), _hidden_state_plan),
    Case(["reproduce", "masked-neurons", "--scale", "full", "--data-dir", "communities", "--experiments",
          "bernoulli", "--seeds", "0,1", "--executor", "ray", "--workdir", "ws", "--dry-run"],
         "privaudit.api.reproduce", "reproduce", ("masked-neurons",),
         dict(scale="full", data_dir="communities", experiments="bernoulli", seeds="0,1", executor="ray",
              workdir=Path("ws"), command=COMMAND, dry_run=True)),
]


class Recorder:
    """Stands in for an API function: records each call, then returns ``result`` or, when it
    is None, raises a ConfigError saying :data:`SENTINEL`."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self.result is None:
            raise ConfigError(SENTINEL)
        return self.result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_command_calls_its_api_function_with_its_options(case, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    result = case.result() if case.result is not None else None
    recorder = Recorder(result)
    monkeypatch.setattr(importlib.import_module(case.module), case.function, recorder)
    code, out, err = run_cli(*case.argv)
    if result is None:  # the API's refusal is the command's one line, exit status 2
        assert code == 2 and one_error_line(err) == f"error: {SENTINEL}", err
    else:
        assert code == 0, err
    assert len(recorder.calls) == 1
    args, kwargs = recorder.calls[0]
    for name in CALLBACKS:
        if name in kwargs:
            given = kwargs.pop(name)
            assert isinstance(given, AuditHooks) if name == "hooks" else callable(given), (name, given)
    assert args == case.args
    assert kwargs == case.expected()
    if result is not None:
        _prints_its_to_dict(out, result, case.extra)


def _prints_its_to_dict(out: str, result: Any, extra: tuple[str, ...]) -> None:
    """``--json`` printed one document: ``result.to_dict()`` (a dry run's dict plan itself)
    with ``phase_seconds`` (the result's own where it has them) and the ``extra`` keys."""
    shown = json.loads(out)
    document = json.loads(dumps_json(result if isinstance(result, dict) else result.to_dict()))
    phases = shown.pop("phase_seconds")
    assert phases == document.pop("phase_seconds") if "phase_seconds" in document else isinstance(phases, dict)
    for key in extra:  # audit's wall_seconds: the command's own time, not the result's
        assert 0 <= shown.pop(key) < 600 and document.pop(key, None) == 1234.5
    assert shown == document


def test_every_command_is_pinned():
    """A new command (or subcommand) needs its case above."""
    root = typer.main.get_command(app)
    commands = set()
    for name, cmd in root.commands.items():
        subcommands = getattr(cmd, "commands", None)
        commands |= {f"{name} {sub}" for sub in subcommands} if subcommands else {name}
    assert commands == {case.name for case in CASES}

