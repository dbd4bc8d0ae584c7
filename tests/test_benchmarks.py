"""The benchmark suite runs from the repository (quick sizes) and reports its targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_suite_writes_results(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--device", "cpu",
                           "--only", "training,inference,pool,scoring", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    kinds = {r["benchmark"] for r in result["rows"]}
    assert kinds == {"training", "inference", "pool", "scoring"}
    assert result["peak"]["peak"] > 0
    training = next(r for r in result["rows"] if r["benchmark"] == "training")
    assert training["privaudit_samples_per_s"] > 0 and training["dataloader_loop_samples_per_s"] > 0
    inference = next(r for r in result["rows"] if r["benchmark"] == "inference")
    assert inference["privaudit_samples_per_s"] > 0 and inference["max_logit_difference"] < 1e-3
    pool = next(r for r in result["rows"] if r["benchmark"] == "pool")
    assert pool["stacked"] and pool["max_test_accuracy_difference"] == 0  # bit-equal to K = 1 (train_model)
    forced = next(r for r in result["rows"] if r["benchmark"] == "pool" and r["recipe"] == "cifar mlp-16")
    assert not forced["stacked"] and forced["stacked_forced_seconds"] > 0  # where privaudit does not stack
    names = {t["target"] for t in result["targets"]}
    assert "mlp training vs DataLoader loop" in names
    assert (out / "results.md").read_text().startswith("Machine:")


@pytest.mark.slow
def test_unknown_benchmark_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "nope", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown benchmark" in proc.stderr


@pytest.mark.slow
def test_quick_commands_benchmark_fits_fixed_and_per_epoch_costs(tmp_path):
    """The user-facing timing: fresh processes of the plain script, privaudit train and
    privaudit train --dp, each with a fixed cost and a cost per epoch, and the target row."""
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--device", "cpu", "--only", "commands",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "results.json").read_text())
    rows = [r for r in result["rows"] if r["benchmark"] == "commands"]
    assert {r["side"] for r in rows} == {"plain loop", "privaudit", "privaudit DP-SGD"}
    for r in rows:
        lo, hi = r["wall_seconds"]
        assert lo > 0 and hi > 0
        assert abs(r["fixed_seconds"] + r["per_epoch_seconds"] * r["epochs"][0] - lo) < 1e-9
    assert any(t["target"] == "mlp train fixed cost vs plain script + 2 s" for t in result["targets"])


@pytest.mark.slow
def test_quick_digits_audit_benchmark_beside_a_baseline_revision(tmp_path):
    """The main command timed from outside beside a git revision run from its own worktree:
    with the committed code as the baseline, both sides give the same table to the last digit
    (fresh processes, same seeds), and the worktree is removed afterwards."""
    out = tmp_path / "results"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--device", "cpu", "--only", "digits",
                           "--baseline", head, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((out / "results.json").read_text())["rows"]
    current = next(r for r in rows if r["side"] == "current")
    baseline = next(r for r in rows if r["side"] == "baseline")
    assert baseline["revision"] == head and current["wall_seconds"] > 0 and baseline["wall_seconds"] > 0
    assert {"train", "attack", "report"} <= set(current["phase_seconds"])
    diffs = current["differences_from_baseline"]
    assert diffs["rows_only_in_one"] == 0 and diffs["auc"] == 0 and diffs["test_accuracy"] == 0
    assert all(v == 0 for v in diffs.values()), diffs
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert str(tmp_path) not in worktrees and "privaudit-bench" not in worktrees
    assert "privaudit audit --dataset digits" in (out / "results.md").read_text()


def test_speed_benchmark_takes_the_steady_epoch_and_the_first_epochs_extra():
    """A model's speed is its median epoch after the first; the first epoch's excess is apart."""
    from benchmarks.bench_speed import first_epoch_extra, steady_rate

    metrics = {"n_train": 1_000, "epoch_seconds": [2.5, 0.5, 0.4, 0.6, 2.0]}  # one disturbed epoch
    assert steady_rate(metrics) == 1_000 / 0.55
    assert first_epoch_extra(metrics) == 2.5 - 0.55
    assert steady_rate({"n_train": 10, "epoch_seconds": [1.0]}) is None
    assert first_epoch_extra({"n_train": 10}) is None


@pytest.mark.parametrize("schema", [1, 2])
def test_speed_benchmark_tells_dp_sgd_models_apart_in_either_config_schema(tmp_path, schema):
    """The DP-SGD models of a workspace are counted apart from the others, whichever schema
    wrote their ``config.json`` (the committed schema-1 workspace, and the same configs as
    schema 2 writes them, with the defence as a name, a knob and its parameters)."""
    from benchmarks.bench_speed import _models
    from privaudit.core.config import RunConfig

    fixture = ROOT / "tests" / "fixtures" / "workspace-schema1" / "models"
    for folder in sorted(fixture.iterdir()):
        work = tmp_path / folder.name
        copy = work / "models" / folder.name
        copy.mkdir(parents=True)
        raw = json.loads((folder / "config.json").read_text())
        if schema == 2:
            raw = RunConfig.from_dict(raw).to_dict()
        assert raw["schema"] == schema
        (copy / "config.json").write_text(json.dumps(raw))
        metrics = {**json.loads((folder / "metrics.json").read_text()), "epoch_seconds": [0.2, 0.1]}
        (copy / "metrics.json").write_text(json.dumps(metrics))
        [model] = _models(work)
        assert model["dp"] == ("-dp-" in folder.name), folder.name


def test_protocol_projection_counts_every_model_once_and_each_epoch_series_once():
    """The projection's work is the reproduction's job graph: every model the protocol needs,
    and the epoch sweep's series trained once to its longest epoch count."""
    from benchmarks.bench_protocol import work
    from privaudit.reproduction.protocol import protocol

    digits = work("reduced", (0, 1), "digits", (1, 8, 8), 1797)  # Figure 4's baseline is also the sweep's
    assert digits["models"] == protocol("reduced", "digits", seeds=(0, 1)).model_count()
    proto = protocol("reduced", "cifar10", seeds=(0, 1))
    plan = work("reduced", (0, 1), "cifar10", (3, 32, 32), 60_000)
    assert plan["models"] == proto.model_count()
    in_series = {c.run_name for c in proto.epoch_configs()}  # the sweep's baseline is also the series' end
    assert plan["attacked"] == len({c.run_name for c in proto.sweep_configs()} | in_series)
    series = 2 * len(proto.epoch_kappas) * len(proto.seeds) * max(proto.epoch_grid)  # target and shadow
    alone = [c for c in proto.sweep_configs() if c.run_name not in in_series]
    expected = proto.part_size * (sum(c.train.epochs for c in proto.accuracy_configs())
                                  + 2 * sum(c.train.epochs for c in alone) + series)
    assert sum(plan["samples"].values()) == expected


def test_rows_get_flops_per_epoch_and_share_of_peak_from_the_closed_form():
    """A 64-32-10 MLP's step is 2·(64·32 + 32·10) FLOPs forward, the same again for the weight
    gradients and 2·32·10 for the one input gradient that backpropagation needs."""
    from benchmarks.flops import annotate, columns, sample_flops

    forward = 2 * (64 * 32 + 32 * 10)
    assert sample_flops("mlp", (1, 8, 8), 32, forward_only=True) == forward
    step = sample_flops("mlp", (1, 8, 8), 32)
    assert step == 2 * forward + 2 * 32 * 10
    pool = {"benchmark": "pool", "recipe": "digits mlp-32", "models": 8, "members_per_model": 449, "epochs": 12,
            "privaudit_seconds": 2.0, "one_by_one_seconds": 4.0}
    command = {"benchmark": "commands", "model": "mlp", "images": 1_000, "per_epoch_seconds": 0.5}
    annotate([pool, command], peak=100.0)
    assert pool["flops_per_epoch"] == 8 * 449 * step
    assert pool["privaudit_fraction_of_peak"] == 8 * 449 * 12 / 2.0 * step / 1e9 / 100.0
    assert pool["one_by_one_fraction_of_peak"] == pool["privaudit_fraction_of_peak"] / 2
    assert command["side_fraction_of_peak"] == 2_000 * sample_flops("mlp") / 1e9 / 100.0
    assert columns(pool, ("privaudit", "one_by_one"))[0] == f"{8 * 449 * step / 1e9:,.1f}"


def test_familywise_benchmark_counts_false_alarms_with_intervals(tmp_path):
    """benchmarks/bench_familywise.py at tiny sizes: every rule's count and Clopper–Pearson
    interval, the same numbers whatever the number of processes."""
    from benchmarks.bench_familywise import RULES, main

    doc = main(["--sets", "3", "--n", "60", "--permutations", "99", "--power-sets", "2", "--gaps", "1",
                "--out", str(tmp_path)])
    assert set(doc["null"]) == set(RULES) and doc["null"]["headline"]["sets"] == 3
    assert all(r["lo"] <= r["rate"] <= r["hi"] for r in doc["null"].values())
    assert doc["power"]["1"]["headline"]["rate"] == 1.0  # a clear leak is found
    assert (tmp_path / "familywise.md").read_text().startswith("# Family-wise scan headline")
    again = main(["--sets", "3", "--n", "60", "--permutations", "99", "--power-sets", "0", "--jobs", "2",
                  "--out", str(tmp_path / "two")])
    assert again["null_p_values"] == doc["null_p_values"]


def test_few_reference_benchmark_never_gives_a_model_its_complement_and_draws_its_figure(tmp_path):
    from benchmarks.bench_few_refs import _interval, figure, markdown_table, reference_candidates, yardstick

    m = 65
    for t in range(m):
        refs = set(reference_candidates(t, m).tolist())
        assert t not in refs and len(refs) == (64 if t == m - 1 else 63)
        if t < m - 1:
            assert (t ^ 1) not in refs
    mean, lo, hi = _interval([0.1, 0.2, 0.3])
    assert mean == pytest.approx(0.2) and lo < 0.2 < hi
    rows = [{"attack": a, "references": k, "tpr_at_0p1pct_fpr": 0.1 * (k + 1), "tpr_lo": 0.0, "tpr_hi": 1.0,
             "n_attacked": 3} for a in ("rmia", "lira-shrunk-online") for k in (1, 2, 4)]
    rows += [{"attack": a, "references": 64, "tpr_at_0p1pct_fpr": v, "tpr_lo": v - 0.1, "tpr_hi": v + 0.1,
              "n_attacked": 3} for a, v in (("lira-online", 0.5), ("lira-shrunk-online", 0.6), ("rmia", 0.4))]
    # the yardstick is the strongest attack with the whole pool, not LiRA online by fiat
    best = yardstick(rows)
    assert best["attack"] == "lira-shrunk-online"
    share = {(r["attack"], r["references"]): r["share_of_best"] for r in rows}
    assert share[("lira-online", 64)] == pytest.approx(0.5 / 0.6) and share[("rmia", 4)] == pytest.approx(0.5 / 0.6)
    with pytest.raises(ValueError, match="whole pool"):
        yardstick([r for r in rows if r["references"] < 64])
    table = markdown_table({"rows": rows}).splitlines()
    assert table[0] == "| attack | 1 | 2 | 4 | all | share at 8 | share, all |"
    assert table[2].startswith("| lira-shrunk-online | 20.0 (0.0–100.0) |") and table[2].endswith("| 100 % |")
    figure([{"arch": "mlp", "part": 5000, "epochs": 50, "rows": rows}], tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_few_reference_benchmark_shards_merge_to_the_whole_evaluation():
    """Shards attack disjoint models that cover the pool; merging their per-model figures gives
    the rows (means and t-intervals) of one evaluation over every model."""
    import numpy as np

    from benchmarks.bench_few_refs import POOL, merge, shard, summarise

    attacked = list(range(65))
    parts = [shard(attacked, f"{i}/3") for i in range(3)]
    assert sorted(sum(parts, [])) == attacked and shard(attacked, None) == attacked
    with pytest.raises(ValueError, match="i/n"):
        shard(attacked, "3/3")
    rng = np.random.default_rng(0)
    per_model = [{"model": t, "attack": a, "references": k, "tpr": float(rng.random()), "auc": float(rng.random())}
                 for t in attacked for a in ("rmia", "lira-online") for k in (4, POOL)]
    meta = {"arch": "mlp", "augment": "none", "part": 5000, "epochs": 50, "models": 65}
    whole = summarise(meta, per_model, [0.1, 0.2, 0.3], 1.0)
    shards = [summarise(meta, [e for e in per_model if e["model"] in set(p)], [0.1, 0.2, 0.3][i:i + 1], 1.0)
              for i, p in enumerate(parts)]
    merged = merge(shards)
    assert [r["n_attacked"] for r in merged["rows"]] == [65] * 4 and merged["yardstick"] == whole["yardstick"]
    for a, b in zip(merged["rows"], whole["rows"], strict=True):
        assert (a["attack"], a["references"]) == (b["attack"], b["references"])
        for key in ("tpr_at_0p1pct_fpr", "tpr_lo", "tpr_hi", "auc", "auc_lo", "auc_hi", "share_of_best"):
            assert a[key] == pytest.approx(b[key], rel=1e-12)
    assert merged["lt_iqr_precision_top1pct"]["mean"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="different pools"):
        merge([shards[0], {**shards[1], "arch": "cnn"}])


def test_few_reference_benchmark_views_and_combination():
    """The views are the image, its mirror and its shifts by two pixels (reflect-padded); the
    combination averages label-free normal scores of the attacks' ranks."""
    import numpy as np
    import torch

    from benchmarks.bench_few_refs import SHIFT, VIEWS, combined_scores, view_logits, within_target_ranks

    class Pixels(torch.nn.Module):  # "logits": the first channel's pixels, row by row
        def forward(self, x):
            return x[:, 0].flatten(1)

    images = np.arange(2 * 3 * 8 * 8, dtype=np.float32).reshape(2, 3, 8, 8)
    out = view_logits(Pixels(), lambda x: x, images)
    assert out.shape == (2, len(VIEWS), 64)
    grid = {v: out[0, i].reshape(8, 8) for i, v in enumerate(VIEWS)}
    plain = images[0, 0]
    np.testing.assert_array_equal(grid["plain"], plain)
    np.testing.assert_array_equal(grid["mirror"], plain[:, ::-1])
    np.testing.assert_array_equal(grid["up"][SHIFT:], plain[:-SHIFT])  # content moved down by the pad above
    np.testing.assert_array_equal(grid["right"][:, :-SHIFT], plain[:, SHIFT:])
    s = np.array([3.0, 1.0, 2.0, 10.0])
    z = within_target_ranks(s)
    assert np.all(np.argsort(z) == np.argsort(s)) and z.mean() == pytest.approx(0.0)
    both = combined_scores({"a": s, "b": -s}, ("a", "b"))
    np.testing.assert_allclose(both, 0.0, atol=1e-12)  # opposite rankings cancel


def test_default_audit_benchmark_reads_the_strongest_attack_with_its_interval():
    import pandas as pd

    from benchmarks.bench_default_audit import strongest

    table = pd.read_csv(Path(__file__).parent / "fixtures" / "regression" / "audit" / "reports" / "tradeoff.csv")
    got = strongest(table)
    base = table[table["defence"] == "none"]
    for measure, s in got.items():
        assert s["mean"] == pytest.approx(base[f"pool_{measure}"].max())
        assert s["attack"] == base.loc[base[f"pool_{measure}"].idxmax(), "attack"]
        se = float(base.loc[base[f"pool_{measure}"].idxmax(), f"pool_{measure}_se"])
        assert (s["lo"], s["hi"]) == pytest.approx((s["mean"] - 1.96 * se, s["mean"] + 1.96 * se))
        assert s["replicates"] == 16


def test_few_reference_scores_with_two_queries_and_a_learned_prior():
    """On a small simulated pool with two queries (the plain image and its mirror) every
    candidate is scored: the learned prior's rows, the plain image alone, and the rows of a
    pool without them; each score is finite and one per audited sample."""
    import numpy as np

    from benchmarks.bench_few_refs import Signals, few_reference_scores
    from privaudit.attacks.difficulty_prior import DifficultyPrior

    rng = np.random.default_rng(0)
    m, n, z, c = 9, 300, 400, 4
    labels, pop_labels = rng.integers(0, c, n), rng.integers(0, c, z)
    keep = rng.random((m, n)) < 0.5
    logits = rng.normal(size=(m, n, 2, c)) + 2.0 * keep[:, :, None, None] * np.eye(c)[labels][None, :, None]
    pop_logits = rng.normal(size=(m, z, 2, c))
    learned = DifficultyPrior(seed=0, epochs=1).fit(rng.integers(0, 256, (z, 3, 8, 8), dtype=np.uint8), pop_labels)
    prior = (learned, learned.features(rng.integers(0, 256, (n, 3, 8, 8), dtype=np.uint8), labels))
    sig = Signals(logits, pop_logits, None, labels, pop_labels, keep, prior)
    out = few_reference_scores(0, np.arange(1, m), sig)
    for name in ("lira-bayes-online", "lira-bayes-online+prior", "lira-bayes-offline+prior",
                 "lira-bayes-online@plain", "rmia", "combined"):
        assert out[name].shape == (n,) and np.all(np.isfinite(out[name])), name
    one_query = Signals(logits[:, :, :1], pop_logits[:, :, :1], None, labels, pop_labels, keep)
    assert "lira-bayes-online@plain" not in few_reference_scores(0, np.arange(1, m), one_query)
    # the plain image alone is the one-query pool's shrunk-mean LiRA
    np.testing.assert_array_equal(out["lira-bayes-online@plain"],
                                  few_reference_scores(0, np.arange(1, m), one_query)["lira-bayes-online"])
