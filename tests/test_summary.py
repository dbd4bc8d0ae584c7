"""The summary layer (privaudit.reporting.summary): intervals, the strongest attack, verdicts.

Verdicts are checked on constructed tables whose answer is known: DP-SGD clearly leakier,
MG noise clearly leakier, and a tie (no true difference, noise only), with seeds and with
one seed; the intervals against SciPy and a slow reference, and their coverage by simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from reference_iso import iso_accuracy
from scipy import stats

import privaudit.reporting.summary as summary_module
from privaudit.analysis.metrics import auc_interval
from privaudit.reporting.summary import (
    VERDICT_DP,
    VERDICT_MG,
    VERDICT_TIE,
    binomial_interval,
    compare,
    comparisons,
    iso_gap,
    iso_gaps,
    overview,
    read_verdict,
    settings,
    strongest_attack,
    summarise,
    t_interval,
    verdicts,
)

# (setting, kappa, sigma, test accuracy): MG noise and DP-SGD with overlapping accuracy ranges
SETTINGS = [("base", 0.0, math.nan, 0.80), ("k1", 1.0, math.nan, 0.74), ("k2", 2.0, math.nan, 0.66),
            ("k4", 4.0, math.nan, 0.58), ("s1", 0.0, 1.0, 0.72), ("s2", 0.0, 2.0, 0.62)]


def _auc_of(acc: float, dp: bool, dp_excess) -> float:
    """True AUC: falls with accuracy alike for both defences, plus ``dp_excess`` for DP rows
    (a number, or a function of the setting's accuracy)."""
    extra = (dp_excess(acc) if callable(dp_excess) else dp_excess) if dp else 0.0
    return 0.5 + (acc - 0.5) * 0.8 + extra


def table(dp_excess, seeds=(0, 1, 2), noise: float = 0.004, acc_noise: float = 0.004, seed: int = 0,
          ci: float = 0.01, attacks=("shadow", "lira"), grid=SETTINGS) -> pd.DataFrame:
    """Rows per (setting of ``grid``, seed, attack); AUC and accuracy with seed-to-seed noise,
    and a per-model interval of half-width ``ci`` around each AUC (as DeLong would give)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in seeds:
        for name, kappa, sigma, acc in grid:
            a = acc + acc_noise * rng.standard_normal()
            dp = math.isfinite(sigma)
            for j, attack in enumerate(attacks):
                auc = _auc_of(acc, dp, dp_excess) + 0.05 * j + noise * rng.standard_normal()
                tpr = max(0.0, (auc - 0.5) * 0.2)
                rows.append(dict(target_run=f"{name}-{s}", model="mlp", dataset="cifar10", width=512, part_size=10520,
                                 epochs=30, defence="dpsgd" if dp else ("mg" if kappa else "none"), kappa=kappa, dp=dp,
                                 noise_multiplier=sigma, epsilon=3.0 / sigma if dp else math.nan, seed=s,
                                 test_accuracy=a, attack=attack, auc=auc, auc_lo=auc - ci, auc_hi=auc + ci,
                                 tpr_at_0p1pct_fpr=tpr, tpr_at_0p1pct_fpr_lo=max(0.0, tpr - ci / 5),
                                 tpr_at_0p1pct_fpr_hi=tpr + ci / 5, eps_lower_bound=tpr * 10, gdp_mu=tpr * 8,
                                 n_nonmembers=10520))
    return pd.DataFrame(rows)


# -- intervals ----------------------------------------------------------------------------

def test_t_interval_is_scipys():
    v = [0.61, 0.64, 0.60, 0.66]
    mean, lo, hi, n = t_interval(v)
    ref = stats.t.interval(0.95, len(v) - 1, loc=np.mean(v), scale=stats.sem(v))
    assert n == 4 and mean == pytest.approx(np.mean(v)) and (lo, hi) == pytest.approx(ref)
    assert math.isnan(t_interval([0.5])[1]) and t_interval([])[3] == 0
    assert t_interval([0.5, math.nan, 0.7])[3] == 2          # NaN is a missing value, not a number


def test_binomial_interval_is_clopper_pearson():
    lo, hi = binomial_interval(0.42, 1000)
    ref = stats.binomtest(420, 1000).proportion_ci(0.95, method="exact")
    assert (lo, hi) == pytest.approx((ref.low, ref.high))
    assert binomial_interval(0.0, 50)[0] == 0.0 and binomial_interval(1.0, 50)[1] == 1.0


def test_delong_interval_matches_a_slow_reference_and_sklearn():
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(70), np.zeros(90)].astype(int)
    scores = np.round(rng.normal(labels * 0.8, 1.0), 1)       # rounded: ties, where ψ counts ½
    x, y = scores[labels == 1], scores[labels == 0]
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10, v01 = psi.mean(1), psi.mean(0)
    sd = math.sqrt(v10.var(ddof=1) / len(x) + v01.var(ddof=1) / len(y))
    auc, lo, hi = auc_interval(labels, scores)
    assert auc == pytest.approx(psi.mean()) and hi - lo == pytest.approx(2 * 1.959964 * sd, rel=1e-5)
    from sklearn.metrics import roc_auc_score
    assert auc == pytest.approx(roc_auc_score(labels, scores))


def test_delong_interval_covers_the_true_auc():
    """Binormal scores with a known AUC Φ(d/√2): the 95 % interval covers it about 95 % of
    the time (600 trials: the count lies in [0.92, 0.98] unless the interval is wrong)."""
    rng = np.random.default_rng(0)
    d = 0.6
    true = stats.norm.cdf(d / math.sqrt(2))
    labels = np.r_[np.ones(150), np.zeros(150)].astype(int)
    hits = 0
    for _ in range(600):
        _, lo, hi = auc_interval(labels, rng.normal(labels * d, 1.0))
        hits += lo <= true <= hi
    assert 0.92 <= hits / 600 <= 0.98


# -- iso gap, strongest attack ------------------------------------------------------------

def test_iso_gap_equals_the_mean_of_iso_accuracy():
    t = table(0.03, seeds=(0,))
    rows = t[t["attack"] == "shadow"]
    ref = iso_accuracy(rows, "auc")["dp_minus_mg"].mean()
    mg, dp = rows[~rows["dp"]], rows[rows["dp"] | (rows["kappa"] == 0) & ~rows["dp"]]
    gap, lo, hi = iso_gap(mg["test_accuracy"].to_numpy(), mg["auc"].to_numpy(), dp["test_accuracy"].to_numpy(),
                          dp["auc"].to_numpy())
    assert gap == pytest.approx(ref) and lo < hi
    assert math.isnan(iso_gap(np.array([0.5, 0.6]), np.array([1, 2.]), np.array([0.7, 0.8]), np.array([1, 2.]))[0])


def test_iso_gaps_is_iso_gap_row_by_row():
    """The bootstrap's vectorised gaps against the one-curve-pair reference, on random curves
    of 2 to 5 points, with overlapping and disjoint ranges, and with rows the fast path must
    hand to the reference (equal accuracies, NaNs)."""
    rng = np.random.default_rng(11)
    for n_mg, n_dp in ((2, 2), (4, 3), (5, 5)):
        ma, da = rng.uniform(0.3, 0.8, (400, n_mg)), rng.uniform(0.3, 0.8, (400, n_dp))
        mv, dv = rng.uniform(0.5, 0.9, (400, n_mg)), rng.uniform(0.5, 0.9, (400, n_dp))
        ma[:40, 1] = ma[:40, 0]                                  # equal accuracies: averaged
        mv[40:50, 0] = np.nan                                    # a missing value: dropped
        da[50:60] = da[50:60] * 0.1                              # no overlap: NaN
        fast = iso_gaps(ma, mv, da, dv)
        slow = np.array([iso_gap(ma[d], mv[d], da[d], dv[d])[0] for d in range(400)])
        assert np.array_equal(np.isnan(fast), np.isnan(slow)) and np.isnan(fast[50:60]).all()
        assert np.isfinite(fast).sum() > 150                    # most rows are compared
        np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-12, atol=1e-12)


def test_the_strongest_attack_is_the_highest_tpr_at_low_fpr():
    t = table(0.0, seeds=(0,))
    assert strongest_attack(t) == "lira"                     # lira's AUC and TPR sit 0.05 above shadow's


# -- verdicts: known answers --------------------------------------------------------------

@pytest.mark.parametrize("excess, expected", [(0.04, VERDICT_MG), (-0.04, VERDICT_DP)])
def test_verdicts_over_seeds_give_the_known_answer(excess, expected):
    v = verdicts(table(excess, noise=0.004))
    paper = v[v["comparison"] == "paper's attack"].iloc[0]
    assert paper["verdict"] == expected and paper["interval"] == "t over 3 seeds" and paper["n_seeds"] == 3
    strongest = v[(v["comparison"] == "strongest attack") & (v["metric"] == "tpr_at_0p1pct_fpr")].iloc[0]
    assert strongest["attack"] == "lira" and strongest["verdict"] == expected
    # the noiseless gap is the excess itself: the compared range (0.62–0.72) ends at the most
    # accurate DP-SGD setting, so the straight line from it to the baseline (which has no
    # excess) no longer dilutes it
    exact = verdicts(table(excess, noise=0.0, acc_noise=0.0)).iloc[0]
    assert exact["gap"] == pytest.approx(excess, abs=1e-12) and paper["gap"] == pytest.approx(excess, abs=0.006)
    assert (exact["acc_low"], exact["acc_high"]) == pytest.approx((0.62, 0.72))


@pytest.mark.slow
def test_a_tie_is_called_a_tie_about_95_percent_of_the_time():
    """No true difference: over 60 simulated 3-seed audits the verdict names a defence in
    about 5 % of them (the interval's error rate), never in most."""
    named = sum(verdicts(table(0.0, noise=0.004, seed=i)).iloc[0]["verdict"] != VERDICT_TIE for i in range(60))
    assert named <= 8


@pytest.mark.slow
def test_the_verdicts_of_a_group_hold_family_wise_on_data_without_a_difference():
    """No true difference, 300 simulated 3-seed audits: the share in which any of the group's
    verdicts names a defence is not above 5 % (its Clopper–Pearson interval reaches below
    5 %), and never more than the rows read one by one name."""
    named = row_named = 0
    for i in range(300):
        v = verdicts(table(0.0, noise=0.004, seed=1000 + i))
        named += bool(v["verdict"].isin([VERDICT_MG, VERDICT_DP]).any())
        row_named += bool(v["row_verdict"].isin([VERDICT_MG, VERDICT_DP]).any())
    lo = stats.beta.ppf(0.025, named, 300 - named + 1) if named else 0.0
    assert lo < 0.05 and named <= row_named, (named, row_named)


def test_a_row_significant_alone_is_no_verdict_after_holm():
    """Three comparisons over 3 seeds; one's own interval just excludes 0 (two-sided p = 0.03),
    the others hold it: Holm multiplies the smallest p by 3, so the group names no defence,
    the row keeps its own reading, and the p-values are Student's t (2 degrees of freedom)."""
    from privaudit.reporting.summary import _familywise

    q = stats.t.ppf(0.975, 2)
    se = 0.01 / stats.t.isf(0.015, 2)                          # gap 0.01 with two-sided p = 0.03
    rows = [{"gap": 0.01, "gap_lo": 0.01 - q * se, "gap_hi": 0.01 + q * se, "n_seeds": 3, "interval": "t over 3 seeds",
             "verdict": VERDICT_MG},
            *({"gap": g, "gap_lo": g - 0.05, "gap_hi": g + 0.05, "n_seeds": 3, "interval": "t over 3 seeds",
               "verdict": VERDICT_TIE} for g in (0.002, -0.003))]
    _familywise(rows, 0.95)
    assert rows[0]["p_value"] == pytest.approx(0.03) and rows[0]["p_adjusted"] == pytest.approx(0.09)
    assert rows[0]["verdict"] == VERDICT_TIE and rows[0]["row_verdict"] == VERDICT_MG
    assert all(r["comparisons"] == 3 and "Holm" in r["correction"] for r in rows)
    p1 = 2 * stats.t.sf(0.002 / (0.05 / q), 2)
    assert rows[1]["p_value"] == pytest.approx(p1)
    # a strong difference survives the correction
    rows = [dict(rows[1], gap=0.05, gap_lo=0.04, gap_hi=0.06, verdict=VERDICT_MG), rows[2]]
    _familywise(rows, 0.95)
    assert rows[0]["verdict"] == VERDICT_MG and rows[0]["p_adjusted"] < 0.05


def test_a_small_difference_inside_the_noise_is_no_verdict():
    """A true DP − MG of +0.005 with seed-to-seed noise of ±0.02: the interval holds 0."""
    v = verdicts(table(0.005, noise=0.02, acc_noise=0.01, seed=4))
    assert (v["verdict"] == VERDICT_TIE).all(), v[["metric", "gap", "gap_lo", "gap_hi"]]


@pytest.mark.parametrize("ci, expected", [(0.004, VERDICT_MG), (0.2, VERDICT_TIE)])
def test_one_seed_uses_the_per_model_intervals(ci, expected):
    """One seed: the bootstrap over each point's sampling decides a large gap when the
    per-model intervals are tight, and says "no significant difference" when they are wide."""
    v = verdicts(table(0.04, seeds=(0,), noise=0.0, acc_noise=0.0, ci=ci))
    paper = v[v["comparison"] == "paper's attack"].iloc[0]
    assert paper["interval"] == "sampling (1 seed)" and paper["verdict"] == expected
    mu = v[v["metric"] == "gdp_mu"].iloc[0]          # no per-model interval of μ, and no pool
    assert mu["verdict"] == "no interval: cannot decide" and "--seeds" in mu["reason"]


@pytest.mark.slow
def test_coverage_of_the_interval_over_seeds():
    """Over 200 simulated audits of 3 seeds, the 95 % t interval of DP − MG covers the true
    gap (the DP excess) in about 95 % of them."""
    hits = 0
    for i in range(200):
        c = compare(table(0.02, noise=0.01, acc_noise=0.0, seed=i, attacks=("shadow",)), "auc")
        hits += c["gap_lo"] <= 0.02 <= c["gap_hi"]
    assert 0.90 <= hits / 200 <= 0.99


def test_no_overlap_says_so_and_points_to_match_accuracy():
    t = table(0.04)
    t.loc[t["dp"], "test_accuracy"] -= 0.3                      # DP-SGD far below every MG setting
    t = t[~((t["kappa"] == 0) & ~t["dp"])]                      # and no baseline to join the curves
    paper = verdicts(t).iloc[0]
    assert paper["verdict"] == "not compared" and "--match-accuracy" in paper["reason"]
    assert read_verdict(math.nan, 1.0) == "no interval: cannot decide"


# -- verdicts: only where both defences have defended settings ----------------------------
# The compared accuracy range is the overlap of each defence's own settings' accuracies; the
# baseline is a point of both curves but never an end of the range (summary module docstring).

def _f(acc):
    """The AUC both defences share at a test accuracy (:func:`_auc_of` without excess)."""
    return 0.5 + (np.asarray(acc, float) - 0.5) * 0.8


def test_iso_gap_ends_its_range_only_at_the_points_allowed():
    """MG at 0.6, 0.7 and DP at 0.55, 0.65 (DP 0.03 above), the baseline at 0.8 on both curves
    with no excess: allowed to end the range only at the defended points, the range is
    0.6–0.65 and the gap the excess itself; with the baseline as an end (every point, the
    default) the range runs to 0.8 and the gap is diluted towards the baseline's 0."""
    ma, da = np.array([0.6, 0.7, 0.8]), np.array([0.55, 0.65, 0.8])
    mv, dv = _f(ma), _f(da) + np.array([0.03, 0.03, 0.0])
    ends = np.array([True, True, False])
    gap, lo, hi = iso_gap(ma, mv, da, dv, mg_ends=ends, dp_ends=ends)
    assert (gap, lo, hi) == pytest.approx((0.03, 0.6, 0.65), abs=1e-12)
    assert iso_gap(ma, mv, da, dv)[1:] == pytest.approx((0.6, 0.8)) and iso_gap(ma, mv, da, dv)[0] < 0.025
    # a baseline inside the range (not an end) stays a point of both curves: DP − MG is 0.05 at
    # 0.6 and 0.8 and 0 at the baseline's 0.7, a triangle whose mean over the 25-point grid is
    # 0.05 · (2 · (1 + … + 12) / 12) / 25 = 0.026
    acc, mid = np.array([0.6, 0.7, 0.8]), np.array([True, False, True])
    assert iso_gap(acc, np.array([0.6, 0.7, 0.6]), acc, np.array([0.65, 0.7, 0.65]), mg_ends=mid,
                   dp_ends=mid)[0] == pytest.approx(0.026, abs=1e-12)
    # no defended point on a side, or defended ranges that do not meet: no gap
    assert math.isnan(iso_gap(ma, mv, da, dv, mg_ends=ends, dp_ends=np.zeros(3, bool))[0])
    assert math.isnan(iso_gap(ma, mv, da - 0.2, dv, mg_ends=ends, dp_ends=ends)[0])


def test_iso_gaps_with_ends_is_iso_gap_row_by_row():
    """The bootstrap's vectorised gaps with the last column (the baseline) barred from ending
    the range, against the one-pair reference, on random curves."""
    rng = np.random.default_rng(12)
    for n_mg, n_dp in ((3, 3), (4, 3), (5, 4)):
        ma, da = rng.uniform(0.3, 0.8, (400, n_mg)), rng.uniform(0.3, 0.8, (400, n_dp))
        ma[:, -1] = da[:, -1] = 0.85                             # the shared baseline, most accurate
        mv, dv = rng.uniform(0.5, 0.9, (400, n_mg)), rng.uniform(0.5, 0.9, (400, n_dp))
        ma[:40, 1] = ma[:40, 0]                                  # equal accuracies: the reference's path
        me, de = np.arange(n_mg) < n_mg - 1, np.arange(n_dp) < n_dp - 1
        fast = iso_gaps(ma, mv, da, dv, mg_ends=me, dp_ends=de)
        slow = np.array([iso_gap(ma[d], mv[d], da[d], dv[d], mg_ends=me, dp_ends=de)[0] for d in range(400)])
        assert np.array_equal(np.isnan(fast), np.isnan(slow)) and 100 < np.isfinite(fast).sum() < 400
        np.testing.assert_allclose(fast[np.isfinite(fast)], slow[np.isfinite(slow)], rtol=1e-12, atol=1e-12)


#: the CIFAR-10 tutorial at --part-size 1000 --epochs 5: every DP-SGD setting less accurate
#: than every MG-noise setting, the baseline above both
DP_SHORT = [("base", 0.0, math.nan, 0.335), ("k05", 0.5, math.nan, 0.321), ("k1", 1.0, math.nan, 0.315),
            ("k2", 2.0, math.nan, 0.308), ("s05", 0.0, 0.5, 0.292), ("s1", 0.0, 1.0, 0.270), ("s2", 0.0, 2.0, 0.240)]
#: the mirror: every MG-noise setting less accurate than every DP-SGD setting
MG_SHORT = [("base", 0.0, math.nan, 0.80), ("k1", 1.0, math.nan, 0.55), ("k2", 2.0, math.nan, 0.50),
            ("s1", 0.0, 1.0, 0.72), ("s2", 0.0, 2.0, 0.62)]


@pytest.mark.parametrize("grid, says", [
    (DP_SHORT, ["no DP-SGD setting is as accurate as any MG-noise setting (MG noise 0.308–0.321; best DP-SGD 0.292 at "
                "σ=0.5)",
                "add a smaller σ (--sigmas)"]),
    (MG_SHORT, ["no MG-noise setting is as accurate as any DP-SGD setting (DP-SGD 0.620–0.720; best MG noise 0.550 at "
                "κ=1)",
                "add a smaller κ (--kappas"]),
])
def test_no_verdict_where_one_defence_has_no_setting_as_accurate(grid, says):
    """One defence's settings all less accurate than the other's: the old rule compared along
    the straight line from its best setting to the baseline; now there is no verdict, and the
    summary, its JSON, the terminal's verdict table and the page say why and what to add."""
    from rich.console import Console

    from privaudit.cli.summary import verdict_table
    from privaudit.reporting.page_first_screen import first_screen

    s = summarise(table(0.04, acc_noise=0.0, grid=grid))
    v = s.verdicts
    assert len(v) == 3 and (v["verdict"] == "not compared").all() and v["gap"].isna().all()
    assert v["acc_low"].isna().all() and (v["n_seeds"] == 0).all()
    assert all(all(part in r for part in says) for r in v["reason"]), list(v["reason"])
    assert summary_module.STATUS_NO_OVERLAP == "no overlap" and (v["status"] == "no overlap").all()
    measured = s.comparisons[s.comparisons["metric"].isin(["auc", "tpr_at_0p1pct_fpr", "eps_lower_bound"])]
    assert len(measured) == 6 and (measured["status"] == "no overlap").all()  # every attack alike
    doc = s.to_dict()
    assert all(r["status"] == "no overlap" and r["verdict"] == "not compared" and r["gap"] is None
               and all(part in r["reason"] for part in says) for r in doc["verdicts"])
    console = Console(width=400, record=True)
    console.print(verdict_table(s))
    text = console.export_text()
    assert text.count(says[0]) == 3 and says[1] in text
    page = first_screen(s, [])
    assert page.count(says[0]) == 3 and says[1] in page


def test_the_verdict_is_computed_over_the_overlap_only():
    """MG noise at 0.60 and 0.70, DP-SGD at 0.55, 0.65 and 0.75 with an excess 0.2 · (acc − 0.55)
    (0, 0.02, 0.04), the baseline at 0.80 (no excess) on both curves: the range is the overlap
    0.60–0.70, over which the excess is linear, so the gap is its value at 0.65, 0.02. (Ending
    the range at the baseline gave 0.60–0.80 and about 0.024.)"""
    grid = [("base", 0.0, math.nan, 0.80), ("k1", 1.0, math.nan, 0.70), ("k2", 2.0, math.nan, 0.60),
            ("s05", 0.0, 0.5, 0.75), ("s1", 0.0, 1.0, 0.65), ("s2", 0.0, 2.0, 0.55)]
    excess = lambda acc: 0.2 * (acc - 0.55)                     # noqa: E731
    one = compare(table(excess, seeds=(0,), noise=0.0, acc_noise=0.0, grid=grid, attacks=("shadow",)), "auc")
    assert (one["gap"], one["acc_low"], one["acc_high"]) == pytest.approx((0.02, 0.60, 0.70), abs=1e-12)
    assert one["gap_lo"] < 0.02 < one["gap_hi"] and one["status"] == "compared"
    seeds = verdicts(table(excess, noise=0.002, acc_noise=0.0, grid=grid)).iloc[0]
    assert (seeds["acc_low"], seeds["acc_high"]) == pytest.approx((0.60, 0.70), abs=1e-12)
    assert seeds["gap"] == pytest.approx(0.02, abs=0.003) and seeds["verdict"] == VERDICT_MG


def test_one_setting_inside_the_other_defences_range_is_compared_at_its_accuracy():
    """One DP-SGD setting (0.65, 0.03 above) inside MG noise's 0.60–0.70: the range is that one
    accuracy and the gap the excess there (ending at the baseline gave 0.65–0.80, about 0.015)."""
    grid = [("base", 0.0, math.nan, 0.80), ("k1", 1.0, math.nan, 0.70), ("k2", 2.0, math.nan, 0.60),
            ("s1", 0.0, 1.0, 0.65)]
    c = compare(table(0.03, seeds=(0,), noise=0.0, acc_noise=0.0, grid=grid, attacks=("shadow",)), "auc")
    assert (c["gap"], c["acc_low"], c["acc_high"]) == pytest.approx((0.03, 0.65, 0.65), abs=1e-12)


# -- settings -----------------------------------------------------------------------------

def test_settings_rows_have_means_and_intervals():
    t = table(0.04)
    st = settings(t)
    assert len(st) == len(SETTINGS) * 2                        # one row per (setting, attack)
    assert list(st.drop_duplicates("setting")["setting"]) == ["baseline", "κ=1", "κ=2", "κ=4", "σ=1", "σ=2"]
    row = st[(st["setting"] == "σ=1") & (st["attack"] == "shadow")].iloc[0]
    vals = t[(t["target_run"].str.startswith("s1-")) & (t["attack"] == "shadow")]["auc"]
    mean, lo, hi, _ = t_interval(vals)
    assert row["n_seeds"] == 3 and row["auc"] == pytest.approx(mean) and row["auc_lo"] == pytest.approx(lo)
    one = settings(table(0.04, seeds=(0,)))
    r = one[(one["setting"] == "baseline") & (one["attack"] == "shadow")].iloc[0]
    assert r["interval"] == "sampling (1 seed)" and r["auc_hi"] - r["auc_lo"] == pytest.approx(0.02)
    assert (r["test_accuracy_lo"], r["test_accuracy_hi"]) == pytest.approx(binomial_interval(r["test_accuracy"], 10520))


def test_overview_has_one_row_per_setting_with_its_strongest_attack():
    t = table(0.04)
    t.loc[(t["target_run"] == "k2-1") & (t["attack"] == "shadow"), "eps_lower_bound"] = 9.0
    t["one_run_eps_lower_bound"] = np.where(t["kappa"] == 2, 0.4, np.nan)
    st = settings(t)
    ov = overview(st)
    assert list(ov["setting"]) == ["baseline", "κ=1", "κ=2", "κ=4", "σ=1", "σ=2"]
    assert (ov["strongest"] == "lira").all() and (ov["n_seeds"] == 3).all()
    k2 = ov[ov["setting"] == "κ=2"].iloc[0]
    shadow_eps = st[(st["setting"] == "κ=2") & (st["attack"] == "shadow")]["eps_lower_bound"].iloc[0]
    lira_eps = st[(st["setting"] == "κ=2") & (st["attack"] == "lira")]["eps_lower_bound"].iloc[0]
    # one rule: a setting's ε bound is the strongest attack's, never the largest over attacks
    assert k2["eps_attack"] == "lira" and k2["eps_strongest"] == pytest.approx(lira_eps) and shadow_eps > 3 > lira_eps
    assert k2["one_run_eps_lower_bound"] == pytest.approx(0.4) and math.isnan(ov.iloc[0]["one_run_eps_lower_bound"])
    assert k2["runs"] == ["k2-0", "k2-1", "k2-2"]
    acc = st[st["setting"] == "κ=2"]["test_accuracy"].iloc[0]
    assert k2["test_accuracy"] == acc == pytest.approx(t[t["target_run"].str.startswith("k2")]
                                                      .drop_duplicates("target_run")["test_accuracy"].mean())


def test_one_strongest_attack_per_group_names_every_view():
    """The group's strongest attack (the means over all its targets) is the one the verdicts,
    every overview row and the JSON name, even where one setting's own strongest differs."""
    from privaudit.reporting.summary import group_strongest, summarise

    t = table(0.04)
    k4 = t["target_run"].str.startswith("k4")
    lira_k4 = t.loc[k4 & (t["attack"] == "lira"), "tpr_at_0p1pct_fpr"].to_numpy()
    t.loc[k4 & (t["attack"] == "shadow"), "tpr_at_0p1pct_fpr"] = lira_k4 + 0.02  # κ=4's own strongest: shadow
    assert group_strongest(t) == {("mlp", "cifar10"): "lira"}
    s = summarise(t)
    assert (s.overview["strongest"] == "lira").all()
    assert s.overview.set_index("setting").loc["κ=4", "row_strongest"] == "shadow"
    assert set(s.verdicts.loc[s.verdicts["comparison"] == "strongest attack", "attack"]) == {"lira"}
    assert {r["strongest"] for r in s.to_dict()["overview"]} == {"lira"}


def test_verdicts_are_the_comparisons_that_answer_the_question():
    t = table(0.04, seeds=(0,))
    comp = comparisons(t)
    assert len(comp) == 2 * 6                                  # two attacks x six measures
    v = verdicts(t, compared=comp)
    for _, r in v.iterrows():
        c = comp[(comp["attack"] == r["attack"]) & (comp["metric"] == r["metric"])].iloc[0]
        np.testing.assert_equal((r["gap"], r["gap_lo"], r["row_verdict"]), (c["gap"], c["gap_lo"], c["verdict"]))
    # a comparison does not depend on which others were computed (its own seeded bootstrap)
    alone = comparisons(t[t["attack"] == "shadow"])
    pd.testing.assert_frame_equal(alone.reset_index(drop=True),
                                  comp[comp["attack"] == "shadow"].reset_index(drop=True))
    assert v.equals(verdicts(t))                               # and the same seed, the same numbers


@pytest.mark.parametrize("keep, reason", [
    (lambda t: (t["kappa"] == 0) & ~t["dp"], "only the undefended baseline"),
    (lambda t: ~t["dp"], "no DP-SGD runs"),
    (lambda t: t["dp"], "no MG-noise runs"),
    (lambda t: t["dp"] | t["target_run"].str.startswith("k1"), "MG-noise curve has fewer than two"),
])
def test_why_no_comparison_was_made(keep, reason):
    t = table(0.04, seeds=(0,))
    v = verdicts(t[keep(t)])
    assert v.iloc[0]["verdict"] == "not compared" and reason in v.iloc[0]["reason"], v.iloc[0]["reason"]


def test_summary_json_has_no_nan():
    import json

    doc = summarise(table(0.0, seeds=(0,))).to_dict()
    text = json.dumps(doc, allow_nan=False)                    # raises on NaN
    assert '"verdicts"' in text and len(doc["settings"]) == 12
    assert len(doc["overview"]) == 6 and len(doc["comparisons"]) == 12  # 2 attacks x 6 measures
