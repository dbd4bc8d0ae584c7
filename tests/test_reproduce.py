"""``privaudit reproduce mg-noise``: the protocol, the statistics behind each claim, and the
command end to end on digits."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import linregress
from scipy.stats import t as student_t
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.core.config import make_config
from privaudit.errors import ConfigError
from privaudit.executor.auditing import audit_plan
from privaudit.reproduction import protocol
from privaudit.reproduction.claims import (
    AGREES,
    DISAGREES,
    UNDECIDED,
    Estimate,
    accuracy_claims,
    epoch_claims,
    leakage_claims,
    paired_difference,
    reading,
    tradeoff_claims,
    trend,
)

runner = CliRunner()


# -- the protocol ---------------------------------------------------------------------------

def test_full_scale_is_the_papers_protocol():
    p = protocol("full", "cifar10")
    assert p.seeds == (0, 1, 2) and p.part_size == 10_520
    assert (p.accuracy_epochs, p.accuracy_batch, p.epochs, p.batch) == (80, 128, 50, 100)
    assert p.kappas == (0.2, 0.6, 1.0, 1.4, 1.8, 2.5, 3.0)
    assert p.sigmas == (0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0)
    assert p.epoch_kappas == (0.0, 0.5, 1.2, 1.8) and p.epoch_grid == (20, 40, 60, 80, 100, 120)
    acc = p.accuracy_configs()
    assert {c.model.name for c in acc} == {"mlp", "cnn", "cnn-improved-small"}
    assert all(c.train.epochs == 80 and c.train.batch_size == 128 and c.role == "target" for c in acc)
    sweep = p.sweep_configs()
    # per seed: mlp baseline + 7 kappas; each CNN baseline + 7 kappas + 8 sigmas
    assert len(sweep) == 3 * (8 + 2 * 16)
    dp = [c for c in sweep if c.defence.dp]
    assert {c.model.name for c in dp} == {"cnn", "cnn-improved"}
    assert all(c.defence.max_grad_norm == 1.0 and c.defence.delta == 1e-5 for c in dp)
    assert {c.model.name for c in p.epoch_configs()} == {"cnn"} and len(p.epoch_configs()) == 4 * 6 * 3
    assert p.reduces == ()


def test_the_sweep_reuses_what_audit_trains():
    """An audit of the Standard CNN over the paper's grids asks for exactly the reproduction's
    sweep targets (same run names, so the same cached models)."""
    p = protocol("full", "cifar10", seeds=[0], families=["cnn"], experiments=["sweep"])
    base = make_config(model="cnn", dataset="cifar10", seed=0)
    audit = audit_plan(base, p.kappas, p.sigmas)
    assert sorted(c.run_name for c in audit) == sorted(c.run_name for c in p.sweep_configs())


def test_reduced_scale_says_what_it_reduces_and_is_smaller():
    full, reduced = protocol("full", "cifar10"), protocol("reduced", "cifar10")
    assert reduced.reduces and any("1,000" in r for r in reduced.reduces)
    assert reduced.model_count() < full.model_count() / 2
    assert set(reduced.kappas) <= set(full.kappas) and set(reduced.sigmas) <= set(full.sigmas)
    only = protocol("reduced", "digits", seeds=[4], families=["mlp"], experiments=["accuracy"])
    assert only.sweep_configs() == [] and only.epoch_configs() == []
    assert {c.seed for c in only.accuracy_configs()} == {4}


@pytest.mark.parametrize("kwargs,match", [({"scale": "huge"}, "scale"), ({"families": ["resnet"]}, "resnet"),
                                          ({"experiments": ["figure8"]}, "figure8"), ({"seeds": []}, "seed")])
def test_bad_protocol_settings_are_refused(kwargs, match):
    args = {"scale": "reduced", **kwargs}
    with pytest.raises(ConfigError, match=match):
        protocol(args.pop("scale"), "digits", **args)


# -- the statistics -------------------------------------------------------------------------

def test_trend_over_seeds_is_t_over_per_seed_slopes():
    x = np.array([0.0, 0.5, 1.0, 2.0])
    slopes = [-0.10, -0.12, -0.08]
    frame = pd.DataFrame([{"seed": s, "kappa": xi, "acc": 0.6 + b * xi + 0.01 * s}
                          for s, b in enumerate(slopes) for xi in x])
    est = trend(frame, "kappa", "acc")
    half = student_t.ppf(0.975, 2) * np.std(slopes, ddof=1) / math.sqrt(3)
    assert est.n == 3 and est.value == pytest.approx(np.mean(slopes))
    assert (est.lo, est.hi) == pytest.approx((np.mean(slopes) - half, np.mean(slopes) + half))
    assert reading(est, -1) == AGREES and reading(est, +1) == DISAGREES


def test_trend_of_one_seed_is_the_regression_interval():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 3, 12)
    y = 0.5 - 0.05 * x + rng.normal(0, 0.02, len(x))
    est = trend(pd.DataFrame({"seed": 0, "k": x, "y": y}), "k", "y")
    ref = linregress(x, y)
    half = student_t.ppf(0.975, len(x) - 2) * ref.stderr
    assert est.n == 1 and est.value == pytest.approx(ref.slope)
    assert (est.lo, est.hi) == pytest.approx((ref.slope - half, ref.slope + half))


def test_paired_difference_pairs_by_seed_and_falls_back_to_binomial():
    frame = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "kappa": [0, 0.2] * 3,
                          "acc": [0.50, 0.52, 0.40, 0.43, 0.60, 0.61], "n": 1000})
    est = paired_difference(frame, "kappa", 0.2, 0.0, "acc", "n")
    d = np.array([0.02, 0.03, 0.01])
    half = student_t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert est.value == pytest.approx(0.02) and (est.lo, est.hi) == pytest.approx((0.02 - half, 0.02 + half))
    one = paired_difference(frame[frame["seed"] == 0], "kappa", 0.2, 0.0, "acc", "n")
    se = math.sqrt(0.5 * 0.5 / 1000 + 0.52 * 0.48 / 1000)
    assert one.value == pytest.approx(0.02) and one.hi - one.value == pytest.approx(1.959964 * se, rel=1e-5)
    assert reading(one, +1) == UNDECIDED  # 2 points on 1,000 samples each cannot be told from 0


def test_reading_with_a_margin():
    assert reading(Estimate(-0.005, -0.015, 0.005, 3, ""), +1, -0.02) == AGREES       # holds within 2 points
    assert reading(Estimate(-0.05, -0.06, -0.04, 3, ""), +1, -0.02) == DISAGREES      # lost 5 points
    assert reading(Estimate(-0.02, -0.04, 0.0, 3, ""), +1, -0.02) == UNDECIDED
    assert reading(Estimate(1.0, math.nan, math.nan, 1, ""), +1) == UNDECIDED


def _accuracy_frame(mlp_gain: float, cnn_slope: float) -> pd.DataFrame:
    rows = []
    for seed in range(3):
        for k in (0.0, 0.2, 0.5, 1.0, 2.0):
            jitter = 0.002 * (seed - 1)
            mlp = 0.45 + (mlp_gain if k == 0.2 else 0.0) - (0.05 * k if k > 0.2 else 0.0) + jitter
            cnn = 0.60 + cnn_slope * max(k - 0.2, 0.0) + jitter
            rows += [{"model": "mlp", "kappa": k, "seed": seed, "test_accuracy": mlp, "n_test": 10_000},
                     {"model": "cnn", "kappa": k, "seed": seed, "test_accuracy": cnn, "n_test": 10_000}]
    return pd.DataFrame(rows)


def test_figure4_claims_read_a_clear_pattern_both_ways():
    agree = {(c.model, c.statement[:10]): c.verdict for c in accuracy_claims(_accuracy_frame(0.02, -0.1))}
    assert set(agree.values()) == {AGREES} and len(agree) == 4
    claims = accuracy_claims(_accuracy_frame(-0.03, +0.05))
    # mlp: kappa 0.2 hurts, yet accuracy still falls past it (not at every step); cnn: holds, then rises
    assert [c.verdict for c in claims] == [DISAGREES, AGREES, AGREES, DISAGREES]
    assert "rises at 1 of 3 steps (0.2→0.5)" in claims[1].detail and "rises" in claims[3].detail


def _sweep_frame(dp_leak_extra: float) -> pd.DataFrame:
    """A baseline, three MG and three DP settings per seed: accuracy falls along both curves,
    the attack's precision and recall fall with accuracy; DP leaks ``dp_leak_extra`` more."""
    rows = []
    for seed in range(3):
        j = 0.003 * (seed - 1)
        for dp, strength in [(False, 0.0)] + [(False, k) for k in (0.6, 1.4, 2.5)] + [(True, s) for s in (0.5, 1, 2)]:
            acc = 0.6 - 0.1 * strength + j
            leak = 0.5 + 0.3 * (acc - 0.3) + (dp_leak_extra if dp else 0.0) + j
            rows.append({"target_run": f"t{seed}{dp}{strength}", "model": "cnn", "dataset": "cifar10", "width": 100,
                         "part_size": 1000, "epochs": 20, "defence": "dpsgd" if dp else ("mg" if strength else "none"),
                         "kappa": 0.0 if dp else strength, "dp": dp, "noise_multiplier": strength if dp else math.nan,
                         "seed": seed, "attack": "shadow", "test_accuracy": acc, "auc": leak, "precision": leak,
                         "recall": leak, "n_members": 1000, "n_nonmembers": 1000})
    return pd.DataFrame(rows)


def test_leakage_and_tradeoff_claims():
    sweep = _sweep_frame(0.03)
    leak = leakage_claims(sweep)
    assert [c.figure for c in leak] == ["Figure 5", "Figure 6", "Figure 7"]
    assert all(c.verdict == AGREES and c.value == pytest.approx(-0.03) for c in leak)  # 0.3 * -0.1 per unit kappa
    trade = {c.measure.split(",")[0]: c for c in tradeoff_claims(sweep)}
    assert set(trade) == {"attack AUC", "attack precision", "attack recall"}
    for c in trade.values():
        assert c.verdict == "MG noise leaks less" and c.lo > 0 and c.n_seeds == 3
    tie = tradeoff_claims(_sweep_frame(0.0))
    assert all(c.verdict.startswith("no significant difference") for c in tie)
    assert tradeoff_claims(sweep[~sweep["dp"]]) == []


def test_epoch_claims_compare_slopes_by_seed():
    rows = []
    for seed in range(3):
        for kappa, rate in ((0.0, 0.10), (1.2, 0.04)):
            for e in (5, 10, 20):
                rows.append({"seed": seed, "kappa": kappa, "epochs": e,
                             "auc": 0.5 + rate * e / 100 + 0.001 * seed * e / 20})
    claims = epoch_claims(pd.DataFrame(rows))
    assert [c.verdict for c in claims] == [AGREES, AGREES, AGREES]
    assert claims[0].value == pytest.approx(0.105)   # per 100 epochs: 0.10 + the seeds' mean drift 0.005
    assert claims[2].value == pytest.approx(-0.06) and claims[2].n_seeds == 3


# -- the command ----------------------------------------------------------------------------

@pytest.mark.slow
def test_reproduce_reduced_on_digits_end_to_end(tmp_path):
    """The reduced protocol on the digits, the MLP and the Standard CNN (DP-SGD included), two
    seeds: every experiment, CSV, figure and statement; a rerun trains nothing."""
    args = ["reproduce", "mg-noise", "--scale", "reduced", "--dataset", "digits", "--models", "mlp,cnn",
            "--seeds", "0,1", "--device", "cpu", "--workdir", str(tmp_path), "--json"]
    first = runner.invoke(app, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    folder = tmp_path / "reports" / "reproduce" / "mg-noise"
    assert doc["models_missing"] == 0 and doc["protocol"]["scale"] == "reduced" and doc["protocol"]["seeds"] == [0, 1]
    for name in ("accuracy.csv", "sweep.csv", "epochs.csv", "claims.csv", "summary.json", "index.html"):
        assert (folder / name).is_file(), name
    acc = pd.read_csv(folder / "accuracy.csv")
    assert set(acc["model"]) == {"mlp", "cnn"} and len(acc) == 2 * 5 * 2
    sweep = pd.read_csv(folder / "sweep.csv")
    assert set(sweep["attack"]) == {"shadow"} and sweep["dp"].astype(bool).sum() == 2 * 2  # cnn: 2 sigmas x 2 seeds
    assert sweep["auc"].between(0, 1).all() and sweep["test_accuracy"].between(0, 1).all()
    claims = pd.read_csv(folder / "claims.csv")
    figures = set(claims["figure"])
    assert {"Figure 4", "Figure 5", "Figure 6", "Figure 7", "Figure 9", "Figure 10"} <= figures
    assert "Epoch sweep (Figures 5–7)" in figures
    assert claims["n_seeds"].max() == 2
    # the baseline is the best model on digits: accuracy falls with kappa for both models
    slope = claims[(claims["figure"] == "Figure 4") & claims["statement"].str.startswith("Beyond")]
    assert (slope["value"] < 0).all()
    svgs = sorted(p.name for p in folder.glob("*.svg"))
    assert "figure-4-accuracy.svg" in svgs and "figure-9-precision-cnn.svg" in svgs and len(svgs) == 7
    page = (folder / "index.html").read_text()
    assert "data:image/svg+xml;base64," in page and "<script" not in page and "Figure 10" in page
    assert "What this scale changes from the paper" in page
    # the counts are family-wise (Holm over the claims with a p-value), the one-by-one counts beside them
    fw = doc["familywise"]
    assert fw["comparisons"] == claims["p_value"].notna().sum() > 0 and "Holm" in fw["correction"]
    assert doc["counts"]["agrees"] <= fw["row_agrees"] and doc["counts"]["disagrees"] <= fw["row_disagrees"]
    assert ((claims["p_adjusted"] >= claims["p_value"] - 1e-12) | claims["p_value"].isna()).all()
    assert fw["correction"] in page and f"give {fw['row_agrees']} agree" in page
    again = runner.invoke(app, args, catch_exceptions=False)
    assert again.exit_code == 0
    redo = json.loads(again.stdout)
    assert [c["value"] for c in redo["claims"]] == [c["value"] for c in doc["claims"]]
    assert redo["wall_seconds"] < doc["wall_seconds"]


def test_reproduce_refuses_bad_input_in_one_line(tmp_path):
    bad = runner.invoke(app, ["reproduce", "mg-noise", "--models", "resnet", "--workdir", str(tmp_path)])
    assert bad.exit_code != 0 and "--models" in bad.output and "Traceback" not in bad.output
    assert len(bad.output.strip().splitlines()) == 1
    scale = runner.invoke(app, ["reproduce", "mg-noise", "--scale", "huge"])
    assert scale.exit_code == 2 and "huge" in scale.output


def test_trend_uses_only_seeds_that_give_a_slope():
    """A seed with one setting so far (a run under way) gives no slope: the others decide."""
    x = np.linspace(0, 3, 6)
    rows = [{"seed": 0, "k": xi, "y": 0.5 - 0.05 * xi + 0.01 * (-1) ** i} for i, xi in enumerate(x)]
    rows.append({"seed": 1, "k": 0.0, "y": 0.6})
    est = trend(pd.DataFrame(rows), "k", "y")
    ref = linregress(x, [r["y"] for r in rows[:-1]])
    assert est.n == 1 and est.value == pytest.approx(ref.slope) and math.isfinite(est.lo)


def _claim_of(values, boundary=0.0, sign=-1):
    """A claim whose value is the mean of per-seed ``values`` with its t interval over seeds."""
    from privaudit.reporting.summary import t_interval
    from privaudit.reproduction.claims import Estimate, _claim, reading

    mean, lo, hi, n = t_interval(values)
    est = Estimate(mean, lo, hi, n, "slope per seed, t over seeds", n - 1)
    return _claim("Figure 5", "mlp", "AUC slope on κ", "falls", "slope", est, reading(est, sign, boundary),
                  boundary=boundary)


def test_the_claim_counts_hold_family_wise_where_each_claim_is_a_null():
    """Twelve claims whose true values lie on their boundaries (no effect), 3 seeds each, over
    300 simulated runs: a run reports some claim as agreeing or disagreeing in at most about
    5 % of runs family-wise (Clopper–Pearson interval reaching below 5 %), while the claims
    read one by one do so in far more (about 1 − 0.95¹² ≈ 46 %)."""
    from scipy import stats

    from privaudit.reproduction.claims import familywise

    rng = np.random.default_rng(7)
    named = row_named = 0
    for _ in range(300):
        claims = familywise([_claim_of(rng.standard_normal(3) + b, b) for b in [0.0] * 11 + [-0.02]])
        named += any(c.verdict in (AGREES, DISAGREES) for c in claims)
        row_named += any(c.row_verdict in (AGREES, DISAGREES) for c in claims)
    lo = stats.beta.ppf(0.025, named, 300 - named + 1) if named else 0.0
    assert lo < 0.05 and row_named > 90, (named, row_named)


def test_family_wise_claims_keep_strong_effects_and_read_p_from_the_interval():
    """Four claims over 3 seeds: each p-value is the one-sample t-test's on its seeds (against
    its boundary); Holm keeps the strong ones, and turns the one that agrees only on its own
    (p ≈ 0.035, second largest: × 2) undecided."""
    from scipy import stats

    from privaudit.reproduction.claims import familywise

    seeds = {"strong": ([-1.0, -1.1, -0.9], 0.0, -1), "weak": ([-0.2, -0.4, -0.3], 0.0, -1),
             "hold": ([-0.011, -0.012, -0.010], -0.02, +1), "null": ([0.1, -0.1, 0.05], 0.0, -1)}
    out = dict(zip(seeds, familywise([_claim_of(v, b, s) for v, b, s in seeds.values()])))
    for name, (v, b, _) in seeds.items():
        assert out[name].p_value == pytest.approx(stats.ttest_1samp(v, b).pvalue, rel=1e-6), name
        assert out[name].comparisons == 4
    p = {k: c.p_value for k, c in out.items()}
    assert out["weak"].p_adjusted == pytest.approx(max(2 * p["weak"], 3 * p["hold"], 4 * p["strong"]))
    assert out["weak"].row_verdict == AGREES and out["weak"].verdict == UNDECIDED
    assert out["strong"].verdict == AGREES and out["hold"].verdict == AGREES
    assert out["null"].verdict == out["null"].row_verdict == UNDECIDED and out["null"].p_adjusted <= 1.0
