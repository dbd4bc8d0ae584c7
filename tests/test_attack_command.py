"""``privaudit attack`` on a workspace an audit left: it reuses the pools there, says what it
would train and how long that takes before it starts, and ``--dry-run`` trains nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privaudit.cli import app

runner = CliRunner()
SMALL = ["--dataset", "digits", "--part-size", "120", "--epochs", "4", "--width", "32", "--device", "cpu"]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


@pytest.fixture(scope="module")
def audited_with_four(tmp_path_factory):
    """An audit with pools of 4 (not the default size): baseline and one κ."""
    ws = tmp_path_factory.mktemp("attack-ws")
    result = invoke("audit", *SMALL, "--kappas", "1", "--sigmas", "none", "--attacks", "lira", "--pool-size", "4",
                    "--workdir", str(ws), "--json")
    assert result.exit_code == 0, result.output
    return ws


@pytest.mark.slow
def test_saved_pool_sizes_finds_each_recipes_own_pool(audited_with_four):
    from dataclasses import replace

    from privaudit.pipeline.pools import saved_pool_sizes
    from privaudit.pipeline.workspace import Workspace

    ws = Workspace(audited_with_four)
    targets = ws.model_names("target")
    assert len(targets) == 2
    for name in targets:
        cfg = ws.read_model_config(name)
        assert saved_pool_sizes(cfg, ws) == [4]
        other = replace(cfg, train=replace(cfg.train, epochs=cfg.train.epochs + 1))  # a recipe never pooled here
        assert saved_pool_sizes(other, ws) == []


@pytest.mark.slow
def test_dry_run_reuses_the_audits_pools_and_trains_nothing(audited_with_four):
    ws = audited_with_four
    before = folders(ws / "models")
    result = invoke("attack", "--target", "mlp", "--attacks", "lira", "--workdir", str(ws), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["dry_run"] and plan["command"] == "attack"
    refs = [m for m in plan["models"] if m["role"] == "reference"]
    assert sum(m["models"] for m in refs) == 8 and all(m["reused"] == m["models"] for m in refs)
    assert all(m["reused"] == m["models"] for m in plan["models"])
    assert folders(ws / "models") == before

    result = invoke("attack", "--target", "mlp", "--attacks", "lira", "--pool-size", "6", "--workdir", str(ws),
                    "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    refs = [m for m in plan["models"] if m["role"] == "reference"]
    assert sum(m["models"] for m in refs) == 12 and sum(m["reused"] for m in refs) == 0
    assert plan["estimated_seconds"] > 0
    assert folders(ws / "models") == before  # a dry run trains nothing


@pytest.mark.slow
def test_attack_prints_its_estimate_first_and_trains_no_new_pool(audited_with_four):
    ws = audited_with_four
    models, pools = folders(ws / "models"), folders(ws / "attacks" / "pools")
    result = invoke("attack", "--target", "mlp", "--attacks", "lira", "--workdir", str(ws), "--no-report")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    estimate = next(i for i, line in enumerate(lines) if line.startswith("estimate:"))
    first_job = next(i for i, line in enumerate(lines) if line.startswith("[1/"))
    assert estimate < first_job
    assert "0 models to train, 10 reused" in lines[estimate]
    assert folders(ws / "models") == models and folders(ws / "attacks" / "pools") == pools

    result = invoke("attack", "--target", "mlp", "--attacks", "lira", "--workdir", str(ws), "--no-report", "--json")
    doc = json.loads(result.stdout)
    assert [a["loo"]["pool_size"] for a in doc["attacks"]] == [4, 4]
