"""Reference pools, the pool attacks end to end, the one-run audit, and their artifacts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.data import split_parts
from privaudit.data.splits import member_indices, pool_keep
from privaudit.errors import ConfigError
from privaudit.pipeline.attacking import AttackPlan, attack_target
from privaudit.pipeline.pools import ensure_pool, model_logits
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace

CPU = torch.device("cpu")


@pytest.mark.parametrize("m, n", [(2, 10), (4, 11), (8, 1000), (16, 37)])
def test_keep_is_balanced_and_reproducible(m, n):
    keep = pool_keep(m, n, seed=5)
    assert keep.shape == (m, n) and keep.dtype == bool
    assert (keep.sum(axis=0) == m // 2).all()                 # every sample IN in exactly half
    assert set(keep.sum(axis=1)) <= {n // 2, n - n // 2}       # every model the target's size
    assert np.array_equal(keep, pool_keep(m, n, seed=5))
    assert not np.array_equal(keep, pool_keep(m, n, seed=6))


def test_keep_needs_an_even_pool():
    for m in (0, 1, 3):
        with pytest.raises(ConfigError, match="even"):
            pool_keep(m, 10, 0)


def test_reference_members_follow_keep():
    from privaudit.data.splits import pool_seed

    split = split_parts(400, 50, seed=1)
    keep = pool_keep(4, 100, pool_seed(1, 4))
    for i in range(4):
        idx_in, idx_out = member_indices("reference", split, pool_size=4, pool_index=i, seed=1)
        assert np.array_equal(idx_in, split.pool[keep[i]]) and np.array_equal(idx_out, split.pool[~keep[i]])
        assert not set(idx_in) & set(split.population)


def test_attack_choices():
    plan = AttackPlan.from_choices(["all"], 4)
    assert plan.shadow and plan.one_run and plan.pool_size == 4
    assert set(plan.pool_attacks) == {"lira-online", "lira-online-global", "lira-offline", "lira-offline-global",
                                      "lira-shrunk-online", "lira-shrunk-offline", "lira-bayes-online",
                                      "lira-bayes-offline", "rmia", "quantile", "shadow-pool"}
    assert AttackPlan.from_choices(["shadow", "loss"]).pool_attacks == ()
    assert AttackPlan.from_choices(["rmia"], 4).pool_attacks == ("rmia",)
    assert AttackPlan.from_choices(["quantile"], 4).pool_attacks == ("quantile",)
    with pytest.raises(ConfigError, match="`pool_size`"):
        AttackPlan.from_choices(["lira"], 3)
    with pytest.raises(ConfigError, match="unknown attack"):
        AttackPlan.from_choices(["bogus"])


@pytest.fixture(scope="module")
def pooled(tmp_path_factory, data_cache, tiny):
    """An overfit digits target attacked with every attack, pool of 4."""
    ws = Workspace(tmp_path_factory.mktemp("pool")).ensure_writable()
    cfg = tiny(part_size=100, width=128, epochs=40, batch_size=25, seed=2)
    target = ensure_model(cfg, ws, data_cache, CPU)
    result = attack_target(ws, target.name, data_cache, CPU, AttackPlan.from_choices(["all"], 4))
    return ws, cfg, target, result


def test_pool_outputs_are_saved_once_and_match_the_models(pooled, data_cache):
    ws, cfg, _, _ = pooled
    pool = ensure_pool(cfg, 4, ws, data_cache, CPU)
    assert pool.logits.shape == (4, 200, 1, 10) and pool.pop_logits.shape == (4, 200, 1, 10)
    assert (pool.keep.sum(axis=0) == 2).all()
    names = sorted(p.name for p in ws.models.glob("reference-*"))
    assert names == sorted(pool.models) and len(names) == 4
    images = data_cache.get("digits")
    again = model_logits(ws, pool.models[1], images, pool.indices, pool.queries, CPU)
    assert np.array_equal(again, pool.logits[1])
    # each reference model trained on exactly its keep row; its test accuracy travels with the
    # pool's outputs (an attack on a worker that was sent the pool alone reads it there)
    for i, name in enumerate(pool.models):
        metrics = json.loads((ws.models / name / "metrics.json").read_text())
        assert metrics["n_train"] == pool.keep[i].sum()
        assert pool.accuracies is not None and pool.accuracies[i] == metrics["test_accuracy"]


def test_every_attack_and_the_leave_one_out_summary(pooled):
    ws, cfg, target, result = pooled
    expected = {"shadow", "loss", "confidence", "data-free", "lira-online", "lira-online-global", "lira-offline",
                "lira-offline-global", "lira-shrunk-online", "lira-shrunk-offline", "lira-bayes-online",
                "lira-bayes-offline", "rmia", "quantile", "shadow-pool"}
    assert set(result.metrics) == expected
    for m in result.metrics.values():
        assert 0 <= m["auc"] <= 1 and m["eps_lower_bound"] >= 0 and m["gdp_mu"] >= 0 and m["gdp_epsilon"] >= 0
        assert m["tpr_at_1pct_fpr_lo"] <= m["tpr_at_1pct_fpr"] <= m["tpr_at_1pct_fpr_hi"]
    # an overfit target: the strongest attacks clearly beat chance
    assert max(result.metrics[a]["auc"] for a in ("lira-online-global", "rmia")) > 0.6
    loo = result.extras["loo"]["summary"]
    assert all(s["n_targets"] == 4 for s in loo.values())
    assert loo["rmia"]["auc_mean"] > 0.55
    assert set(result.extras["one_run"]) >= {"eps_lower_bound", "num_guesses", "num_correct", "canary_run"}
    folder = ws.attacks / target.name
    assert {p.name for p in folder.iterdir()} == {"config.json", "metrics.json", "scores.npz", "loo.json",
                                                   "exposure.json", "exposed.npz", "one_run.json", "manifest.json"}
    with np.load(folder / "scores.npz") as npz:
        assert {f"score_{a}" for a in expected} <= set(npz.files)
        assert npz["labels"].sum() == 100 and len(npz["labels"]) == 200


def test_adding_attacks_retrains_nothing(pooled, data_cache):
    ws, cfg, target, result = pooled
    before = {p.name: p.stat().st_mtime_ns for p in ws.models.iterdir()}
    again = attack_target(ws, target.name, data_cache, CPU, AttackPlan.from_choices(["all"], 4))
    assert again.reused and again.metrics == result.metrics
    only_rmia = attack_target(ws, target.name, data_cache, CPU, AttackPlan.from_choices(["rmia"], 4))
    assert only_rmia.reused and set(only_rmia.metrics) == set(result.metrics)  # earlier attacks are kept
    assert {p.name: p.stat().st_mtime_ns for p in ws.models.iterdir()} == before


@pytest.mark.slow
def test_dp_run_empirical_epsilon_stays_below_the_accountant(tmp_path, data_cache, tiny):
    ws = Workspace(tmp_path).ensure_writable()
    cfg = tiny(dp=True, target_epsilon=1.0, part_size=100, width=64, epochs=6, batch_size=25, seed=4)
    target = ensure_model(cfg, ws, data_cache, CPU)
    eps = target.metrics["epsilon"]
    assert eps <= 1.0
    result = attack_target(ws, target.name, data_cache, CPU, AttackPlan.from_choices(["all"], 4))
    for name, m in result.metrics.items():
        assert m["eps_lower_bound"] <= eps, name
    assert result.extras["one_run"]["eps_lower_bound"] <= eps
    for s in result.extras["loo"]["summary"].values():
        assert s["eps_lower_bound_mean"] <= eps


@pytest.mark.slow
def test_cli_attack_with_pool_and_bad_pool_size(tmp_path):
    runner = CliRunner()
    small = ["--dataset", "digits", "--part-size", "60", "--epochs", "5", "--width", "32", "--device", "cpu",
             "--workdir", str(tmp_path)]
    run = json.loads(runner.invoke(app, ["train", *small, "--json"]).stdout)["run"]
    result = runner.invoke(app, ["attack", "--target", run, "--attack", "lira,rmia", "--pool-size", "4",
                                 "--workdir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["attacks"][0]
    assert {"lira-online", "rmia"} <= set(doc["metrics"]) and doc["loo"]["pool_size"] == 4
    bad = runner.invoke(app, ["attack", "--target", run, "--attack", "lira", "--pool-size", "3",
                              "--workdir", str(tmp_path)])
    assert bad.exit_code == 2 and "--pool-size" in bad.output


@pytest.mark.parametrize("lost", [1, 3])
def test_an_interrupted_stacked_pool_resumes_bit_for_bit(tmp_path, tiny, data_cache, lost):
    """A reference pool trained as one stacked group, then interrupted (``lost`` of its four
    models not saved): the rerun trains the whole group again and saves only the missing models, which come
    out bit for bit as before (training them alone or in a smaller stack would not)."""
    import shutil

    from privaudit.pipeline.runs import ensure_models
    from privaudit.training.stacked import stack_groups

    recipe = tiny(epochs=3).recipe
    members = [recipe.as_reference(4, i).validated() for i in range(4)]
    assert stack_groups(members, data_cache.get("digits").input_shape, 1797) == [members]   # one stacked group
    ws = Workspace(tmp_path / "a").ensure_writable()
    ensure_models(members, ws, data_cache, CPU)
    before = {c.run_name: (ws.model_dir(c.run_name) / "weights.npz").read_bytes() for c in members}
    kept = {c.run_name: (ws.model_dir(c.run_name) / "weights.npz").stat().st_mtime_ns for c in members[:4 - lost]}
    for c in members[4 - lost:]:
        shutil.rmtree(ws.model_dir(c.run_name))
    ensure_models(members, ws, data_cache, CPU)
    for c in members:
        assert (ws.model_dir(c.run_name) / "weights.npz").read_bytes() == before[c.run_name], c.run_name
    for name, mtime in kept.items():   # the finished ones are reused, not rewritten
        assert (ws.model_dir(name) / "weights.npz").stat().st_mtime_ns == mtime


def test_a_quantile_model_that_cannot_fit_is_a_one_line_error_only_when_asked(tmp_path, data_cache, tiny):
    """Parts of 30: a population of 60 samples, fewer than the quantile regression needs. Named
    in --attacks it is a one-line error naming what is missing; through "all" it is left out
    and every other attack runs."""
    ws = Workspace(tmp_path).ensure_writable()
    target = ensure_model(tiny(part_size=30, epochs=2), ws, data_cache, CPU)
    with pytest.raises(ConfigError, match="quantile attack cannot run.*public"):
        attack_target(ws, target.name, data_cache, CPU, AttackPlan.from_choices(["quantile"], 4))
    result = attack_target(ws, target.name, data_cache, CPU, AttackPlan.from_choices(["all"], 4))
    assert "quantile" not in result.metrics and "rmia" in result.metrics
