"""Pool models as replicates of their setting (privaudit.analysis.replicates, docs/methods/e-replicates.md E).

The jackknife against its closed form and against leave-one-out recomputed by hand; its
standard error against the true spread of pool means on simulated pools; and the verdicts
read through the pools in simulated worlds with a known truth: where the two defences leak
alike at equal accuracy a "leaks less" verdict appears at most at its level, and where they
differ by more than the stated detectable difference it appears at least 80 % of the time.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.bench_pool_replicates import simulated_pool
from privaudit.analysis.familywise import detectable_difference
from privaudit.analysis.replicates import jackknife_se, pool_columns, replicates
from privaudit.attacks.pool_attacks import JACKKNIFED, REPLICATED, leave_one_out, pair_jackknife, replicate_metrics
from privaudit.reporting.summary import VERDICT_DP, VERDICT_MG, compare, settings


def test_jackknife_se_of_a_mean_is_the_standard_error_of_the_unit_means():
    rng = np.random.default_rng(1)
    units = rng.normal(size=8)
    leave_out = [np.delete(units, j).mean() for j in range(8)]
    assert jackknife_se(leave_out) == pytest.approx(units.std(ddof=1) / math.sqrt(8), rel=1e-12)
    assert math.isnan(jackknife_se([0.3]))


def test_detectable_difference_closed_form():
    # normal: (1.95996 + 0.84162) · se; two comparisons: the strictest Holm step, α/2
    assert detectable_difference(0.1) == pytest.approx(0.280158, abs=1e-5)
    assert detectable_difference(0.1, tests=2) == pytest.approx(0.1 * (stats.norm.ppf(1 - 0.0125)
                                                                       + stats.norm.ppf(0.8)))
    assert detectable_difference(1.0, df=4) == pytest.approx(stats.t.ppf(0.975, 4) + stats.t.ppf(0.8, 4))
    assert math.isnan(detectable_difference(math.nan))


def test_pair_jackknife_is_leave_one_out_without_the_pair():
    """Each left-out mean: the pool without pair j scored again, every target evaluated at the
    thresholds it had in the whole pool."""
    rng = np.random.default_rng(0)
    arrays = simulated_pool(rng, 8, rng.normal(0, 1.5, 200), np.abs(rng.normal(0.6, 0.6, 200)), rng.normal(0, 1.5, 100))
    logits, pop, keep, labels, pop_labels = arrays
    full, _ = leave_one_out(*arrays, attacks=("lira-online", "loss"), delta=1e-5)
    jack = pair_jackknife(*arrays, full, attacks=("lira-online", "loss"), delta=1e-5)
    for j in (0, 3):
        rest = np.flatnonzero(np.arange(8) // 2 != j)
        _, scores = leave_one_out(logits[rest], pop[rest], keep[rest], labels, pop_labels, attacks=("lira-online",),
                                  delta=1e-5)
        for k in JACKKNIFED:
            by_hand = [replicate_metrics(keep[t].astype(int), scores["lira-online"][i],
                                         full["lira-online"][t]["eps_threshold"],
                                         full["lira-online"][t]["gdp_threshold"], delta=1e-5)[k]
                       for i, t in enumerate(rest)]
            assert jack["lira-online"][j][k] == pytest.approx(np.mean(by_hand))
    # the loss attack reads no reference: left out, every measure is the other targets' mean
    for k in JACKKNIFED:
        v = np.array([r[k] for r in full["loss"]])
        for j in range(4):
            assert jack["loss"][j][k] == pytest.approx(np.delete(v, [2 * j, 2 * j + 1]).mean())
    assert pair_jackknife(logits[:4], pop[:4], keep[:4], labels, pop_labels, full, attacks=("loss",), delta=1e-5) == {}


def test_the_jackknife_keeps_each_targets_rmia_a():
    """RMIA's a is a tuning choice, like the thresholds: each target keeps the one its
    references chose in the whole pool, and its scores on the pool without pair j are those
    of leave-one-out given that a; calibrating a again gives other scores."""
    rng = np.random.default_rng(4)
    arrays = simulated_pool(rng, 8, rng.normal(0, 1.5, 200), np.abs(rng.normal(0.6, 0.6, 200)), rng.normal(0, 1.5, 100))
    logits, pop, keep, labels, pop_labels = arrays
    full, _ = leave_one_out(*arrays, attacks=("rmia",), delta=1e-5)
    chosen = [r["rmia_a"] for r in full["rmia"]]
    assert all(0 <= a <= 1 for a in chosen) and len(set(chosen)) > 1   # chosen per target, from its references
    jack = pair_jackknife(*arrays, full, attacks=("rmia",), delta=1e-5)
    j = 1
    rest = np.flatnonzero(np.arange(8) // 2 != j)
    kept, scores = leave_one_out(logits[rest], pop[rest], keep[rest], labels, pop_labels, attacks=("rmia",),
                                 delta=1e-5, rmia_a=[chosen[t] for t in rest])
    _, again = leave_one_out(logits[rest], pop[rest], keep[rest], labels, pop_labels, attacks=("rmia",), delta=1e-5)
    assert [r["rmia_a"] for r in kept["rmia"]] == [chosen[t] for t in rest]
    assert not np.allclose(scores["rmia"], again["rmia"])
    by_hand = [replicate_metrics(keep[t].astype(int), scores["rmia"][i], full["rmia"][t]["eps_threshold"],
                                 full["rmia"][t]["gdp_threshold"], delta=1e-5)["auc"] for i, t in enumerate(rest)]
    assert jack["rmia"][j]["auc"] == pytest.approx(np.mean(by_hand))


def test_pool_columns_give_the_mean_and_the_jackknife_se():
    per_model = {"a": [{k: float(i) for k in REPLICATED} for i in range(6)]}
    pairs = {"a": [{k: float(np.delete(np.arange(6.0), [2 * j, 2 * j + 1]).mean()) for k in REPLICATED}
                   for j in range(3)]}
    kept = replicates(per_model, pairs, [0.5, 0.6, 0.7, 0.8, 0.9, 1.0], REPLICATED, 1e-5)["a"]
    cols = pool_columns(kept, REPLICATED)
    pair_means = np.array([0.5, 2.5, 4.5])
    assert cols["pool_n"] == 6 and cols["pool_delta"] == 1e-5
    assert cols["pool_auc"] == pytest.approx(2.5)
    assert cols["pool_auc_se"] == pytest.approx(pair_means.std(ddof=1) / math.sqrt(3))
    assert cols["pool_test_accuracy"] == pytest.approx(0.75)
    assert cols["pool_test_accuracy_se"] == pytest.approx(np.array([0.55, 0.75, 0.95]).std(ddof=1) / math.sqrt(3))


@pytest.mark.slow
def test_the_jackknife_is_not_smaller_than_the_spread_of_pool_means():
    """Simulated pools of 16 models whose records are fixed (the per-setting truth is the
    expected mean over pools): the jackknife's standard error of μ's pool mean is at least
    the true spread of the pool means (it errs wide: about 1.5× on these pools;
    benchmarks/bench_pool_replicates.py has the full table, and the plain standard error of
    the pair means, too small because every target shares its references)."""
    world = np.random.default_rng(123)
    n, z, m, pools = 300, 150, 16, 32
    difficulty, effect, pop = world.normal(0, 1.5, n), np.abs(world.normal(0.6, 0.6, n)), world.normal(0, 1.5, z)
    means, se_jack = [], []
    for s in range(pools):
        arrays = simulated_pool(np.random.default_rng(s), m, difficulty, effect, pop)
        full, _ = leave_one_out(*arrays, attacks=("lira-online",), delta=1e-5)
        jack = pair_jackknife(*arrays, full, attacks=("lira-online",), delta=1e-5)
        means.append(np.mean([r["gdp_mu"] for r in full["lira-online"]]))
        se_jack.append(jackknife_se([p["gdp_mu"] for p in jack["lira-online"]]))
    ratio = np.sqrt(np.mean(np.square(se_jack))) / np.std(means, ddof=1)
    # 32 pools estimate the spread to about ±13 %: a jackknife as small as the spread passes
    assert 0.85 <= ratio <= 3.0, ratio


# -- verdicts in simulated worlds -------------------------------------------------------------

#: (setting, κ, σ, true test accuracy): MG noise and DP-SGD over overlapping accuracies
GRID = [("base", 0.0, math.nan, 0.90), ("k1", 1.0, math.nan, 0.86), ("k2", 2.0, math.nan, 0.80),
        ("k4", 4.0, math.nan, 0.72), ("s1", 0.0, 0.5, 0.85), ("s2", 0.0, 1.0, 0.78), ("s4", 0.0, 2.0, 0.70)]
MODELS, SD_MU, SD_ACC = 16, 0.08, 0.01


def _world(rng: np.random.Generator, dp_excess: float) -> pd.DataFrame:
    """One audit's rows of one attack with pools of :data:`MODELS`: each setting's pool mean
    of μ and of accuracy drawn around its truth (μ falls with the noise alike for both
    defences, plus ``dp_excess`` for DP-SGD) with the spread of a mean of 16 models, and its
    jackknife standard error drawn as a variance estimate on 7 degrees of freedom."""
    rows = []
    pairs = MODELS // 2
    for name, kappa, sigma, acc in GRID:
        dp = math.isfinite(sigma)
        mu = 0.1 + 2.0 * (acc - 0.6) + (dp_excess if dp and name != "base" else 0.0)
        cols = {"pool_n": MODELS, "pool_delta": 1e-5}
        for key, truth, sd in (("test_accuracy", acc, SD_ACC), ("gdp_mu", mu, SD_MU)):
            se = sd / math.sqrt(MODELS)
            cols[f"pool_{key}"] = truth + se * rng.standard_normal()
            cols[f"pool_{key}_se"] = se * math.sqrt(rng.chisquare(pairs - 1) / (pairs - 1))
        rows.append(dict(target_run=name, model="mlp", dataset="digits",
                         defence="dpsgd" if dp else ("mg" if kappa else "none"),
                         kappa=kappa, dp=dp, noise_multiplier=sigma, seed=0, attack="lira-shrunk-online",
                         test_accuracy=acc, gdp_mu=mu, **cols))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("dp_excess", [0.0])
def test_equal_leakage_is_called_a_difference_at_most_at_its_level(dp_excess):
    rng = np.random.default_rng(7)
    worlds = 200
    calls = sum(compare(_world(rng, dp_excess), "gdp_mu", seed=w)["verdict"] in (VERDICT_MG, VERDICT_DP)
                for w in range(worlds))
    # at most 5 %: below the binomial(200, 0.05) 97.5 % quantile, so a true 5 % fails 2.5 % of the time
    assert calls <= stats.binom.ppf(0.975, worlds, 0.05), calls


def test_a_difference_above_the_detectable_one_is_found_80_percent_of_the_time():
    rng = np.random.default_rng(8)
    first = compare(_world(np.random.default_rng(0), 0.0), "gdp_mu")
    assert first["n_models"] == MODELS and first["interval"].startswith("jackknife over 8 pool pairs")
    excess = 1.4 * first["detectable"]
    found, above = 0, 0
    for w in range(200):
        c = compare(_world(rng, excess), "gdp_mu", seed=w)
        if excess > c["detectable"]:
            above += 1
            found += c["verdict"] == VERDICT_MG
    assert above >= 100, above
    # at least 80 %: above the binomial(above, 0.8) 2.5 % quantile
    assert found >= stats.binom.ppf(0.025, above, 0.8), (found, above)


def test_the_setting_reads_mu_with_its_interval_over_models():
    rows = _world(np.random.default_rng(3), 0.0)
    per = settings(rows)
    base = per[per["setting"] == "baseline"].iloc[0]
    r = rows.iloc[0]
    half = stats.t.ppf(0.975, 7) * r["pool_gdp_mu_se"]
    assert base["pool_gdp_mu"] == pytest.approx(r["pool_gdp_mu"])
    assert base["pool_gdp_mu_lo"] == pytest.approx(r["pool_gdp_mu"] - half)
    assert base["pool_gdp_mu_hi"] == pytest.approx(r["pool_gdp_mu"] + half)
    assert base["pool_n"] == MODELS
    assert base["pool_mu_epsilon"] > base["pool_mu_epsilon_lo"] >= 0.0


def test_without_pools_the_verdict_reads_the_target_as_before():
    rows = _world(np.random.default_rng(3), 0.0)
    c = compare(rows.drop(columns=[k for k in rows if k.startswith("pool_")]), "gdp_mu")
    # one seed, one model a setting, and no per-model interval of μ: a gap without an interval
    assert (c["n_models"], c["interval"], c["status"]) == (1, "sampling (1 seed)", "no interval")
    assert math.isfinite(c["gap"]) and math.isnan(c["detectable"])


def test_the_readme_audit_verdicts_read_16_replicates_a_defence():
    """The README's digits audit (its table as tests/fixtures/regression recorded it, which
    test_regression.py checks is still what the audit writes): every compared verdict reads
    the 16 pool models of each setting and states its detectable difference; μ is among them."""
    from pathlib import Path

    from privaudit.reporting.summary import summarise

    table = pd.read_csv(Path(__file__).parent / "fixtures" / "regression" / "audit" / "reports" / "tradeoff.csv")
    v = summarise(table).verdicts
    assert "gdp_mu" in set(v["metric"])
    compared = v[v["status"] == "compared"]
    assert len(compared) == 3
    assert (compared["n_models"] == 16).all() and (compared["detectable"] > 0).all()
    assert compared["interval"].str.startswith("jackknife over 8 pool pairs").all()
