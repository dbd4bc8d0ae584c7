"""The summary layer: every derived number the report, the terminal and ``--json`` show
(docs/methods/e-replicates.md E).

Pure pandas/NumPy/SciPy over the tidy trade-off table of :mod:`privaudit.reporting.build` (one
row per target, defence setting, seed and attack). It computes, once:

* **settings**: one row per (model, dataset, recipe, defence setting, attack) with the mean
  over seeds and a 95 % interval of test accuracy, AUC, TPR at 1 % and 0.1 % FPR and the
  empirical ε lower bound. With two or more seeds the interval is Student's t over seeds
  (it covers training randomness and the draw of the audited records, since every seed
  re-draws both); with one seed it is the per-model sampling interval: DeLong for AUC,
  Clopper–Pearson for accuracy and TPR at low FPR, and none for the ε lower bound, which is
  already a one-sided 95 % bound;
* **overview**: one row per setting (all attacks together): accuracy with its interval, the
  accountant's and the one-run ε, the strongest attack and its empirical ε lower bound on
  the setting (the bound of one attack chosen before looking at the bounds, so it keeps its
  95 % level; the largest over attacks would not);
* **strongest attack** of each (model, dataset): the attack with the highest mean TPR at
  0.1 % FPR over its settings, then the highest mean AUC (the one rule of every view);
* **comparisons**: for every attack and leakage measure (AUC, precision, recall, TPR at
  0.1 % FPR, ε lower bound), DP-SGD − MG noise at equal test accuracy with a 95 % interval,
  read as "MG noise leaks less" (interval above 0), "DP-SGD leaks less" (below 0) or "no
  significant difference at 95 %" (it contains 0), or the reason no comparison was made;
* **verdicts**: the comparisons that answer the question: the paper's attack (shadow AUC)
  and the strongest attack (TPR at 0.1 % FPR and the ε lower bound), read family-wise:
  a defence is named only where Holm–Bonferroni over the group's comparisons still finds
  the difference significant at 5 % (the intervals stay per-row 95 % intervals);
* **the strongest attack's claim**, per (model, dataset): the key findings name the strongest
  attack and its numbers on the baseline (or the group's first setting); whether its AUC
  there lies above 0.5 is tested family-wise, Holm–Bonferroni over the one-sided p-values
  of every attack on that setting (the attacks the strongest is picked from), each read
  back from its row's interval (:func:`strongest_claims`).

The iso-accuracy gap of one seed follows the linear interpolation of both curves on a common accuracy grid
(tests/reference_iso.py holds the slow reference): the MG curve (baseline and MG-noise settings) and the DP curve
(baseline and DP-SGD settings) are interpolated linearly on 25 accuracies spanning the compared range, and the gap is
the mean of DP − MG over that grid. The compared range is where *both defences have defended settings on either
side*: the overlap [max(a_MG, a_DP), min(b_MG, b_DP)] of [a_MG, b_MG], the test accuracies of
that seed's MG-noise settings (κ > 0), and [a_DP, b_DP], its DP-SGD settings'. The baseline
stays a point of both curves (where it lies inside a range, the curves pass through it) but
never ends the range: otherwise a defence whose settings are all less accurate than the
other's would be compared along the straight line from its most accurate setting to the
undefended model, an interpolation towards no defence. A seed whose ranges do not meet
gives no gap; where no seed gives one there is no verdict (status ``no overlap``), and the
reason names the defence that falls short, its best setting, and the knob to add. The range
may be a single accuracy (a defence with one setting, inside the other's range).
Over seeds the gaps get a t-interval; with one seed the interval is a parametric bootstrap
over the sampling of each point (accuracy binomial, the metric normal with the spread of its
interval), the baseline drawn once for both curves, the range recomputed in every draw.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t

from privaudit.analysis.empirical import clopper_pearson
from privaudit.analysis.familywise import (
    ALPHA,
    HOLM,
    detectable_difference,
    excess_pvalue,
    holm,
    interval_se,
    two_sided_pvalue,
)
from privaudit.analysis.metrics import STRONGEST_KEY
from privaudit.analysis.metrics import strongest_attack as strongest_of
from privaudit.core.formatting import number as _num
from privaudit.core.formatting import upper_sig3
from privaudit.reporting.table import POOL_COLUMNS, POOL_MEASURES, as_bool

CONFIDENCE = 0.95
PAPER_ATTACK = "shadow"
#: the papers' attack with every pool model as a shadow (docs/methods/d-attacks.md D.1)
POOL_SHADOW_ATTACK = "shadow-pool"
SUMMARISED = ("test_accuracy", "train_accuracy", "auc", "precision", "recall", "tpr_at_1pct_fpr",
              "tpr_at_0p1pct_fpr", "eps_lower_bound", "gdp_mu", "gdp_epsilon", "canary_tpr_at_1pct_fpr",
              "canary_tpr_at_0p1pct_fpr")
#: averaged over seeds without an interval: the setting's δ, the one-run bound (itself a 95 %
#: bound) and the leave-one-out statistics of the reference pool (already a spread over models)
AVERAGED = ("delta", "one_run_eps_lower_bound", "one_run_fdp_eps_lower_bound", "loo_n_targets", "loo_auc_mean",
            "loo_auc_std", "loo_eps_lower_bound_mean", "loo_eps_lower_bound_std")
#: the leakage measures compared at equal accuracy (higher = more leakage)
COMPARED = ("auc", "precision", "recall", "tpr_at_0p1pct_fpr", "eps_lower_bound", "gdp_mu")
#: the columns that make a setting: the recipe and the defence (the seed replicates it)
SETTING_KEYS = ("model", "dataset", "width", "part_size", "epochs", "defence", "knob", "kappa", "dp",
                "noise_multiplier", "canaries")
GRID_POINTS = 25
VERDICT_MG, VERDICT_DP, VERDICT_TIE = "MG noise leaks less", "DP-SGD leaks less", "no significant difference at 95 %"


# -- intervals ----------------------------------------------------------------------------

def t_interval(values: Any, confidence: float = CONFIDENCE) -> tuple[float, float, float, int]:
    """(mean, lower, upper, n) of the finite ``values``: Student's t interval of the mean,
    mean ± t_{(1+c)/2, n−1} · s/√n. With n = 1 the bounds are NaN (no spread to go on)."""
    v = np.asarray(pd.to_numeric(pd.Series(values, dtype=object), errors="coerce"), dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(v.mean())
    if n == 1:
        return mean, math.nan, math.nan, 1
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half, n


def binomial_interval(p: float, n: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval (:func:`privaudit.analysis.empirical.clopper_pearson`) of a
    proportion ``p`` observed on ``n`` trials; NaNs when either is missing."""
    if not (np.isfinite(p) and np.isfinite(n) and n >= 1):
        return math.nan, math.nan
    return clopper_pearson(round(p * n), round(n), confidence)


# -- settings -----------------------------------------------------------------------------

def setting_label(dp: Any, kappa: Any, sigma: Any, epsilon: Any = math.nan, defence: Any = None,
                  knob: Any = math.nan) -> str:
    """How a defence setting is named everywhere: ``baseline``, ``κ=0.5``, ``σ=1``,
    ``κ=0.5, σ=1``; with a finite ``epsilon`` (DP rows) ``σ=1 (ε=21.0)``; any other defence
    of :mod:`privaudit.defences` by its title and knob, ``label smoothing α=0.1``."""
    other = other_defence(defence)
    if other is not None:
        return other.setting(_num(knob))
    k, s = _num(kappa), _num(sigma)
    mg = f"κ={k:g}" if math.isfinite(k) and k > 0 else ""
    if not as_bool([dp]).iloc[0]:
        return mg or "baseline"
    sig = f"σ={s:.3g}" if math.isfinite(s) else "σ=?"
    eps = f" (ε={upper_sig3(epsilon)})" if math.isfinite(_num(epsilon)) else ""
    return (f"{mg}, {sig}" if mg else sig) + eps


def with_every_knob(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every row's knob: a table written before every row carried its knob
    (schema 1) gets MG noise's κ and DP's σ as trained in ``knob``, where the row has none."""
    if not {"knob", "defence", "kappa", "dp", "noise_multiplier"} <= set(table.columns):
        return table
    out = table.copy()
    dp = as_bool(out["dp"]).to_numpy()
    kappa, sigma = (pd.to_numeric(out[c], errors="coerce") for c in ("kappa", "noise_multiplier"))
    paper = np.where(dp, sigma, np.where(out["defence"].astype(str) == "mg", kappa, np.nan))
    out["knob"] = pd.to_numeric(out["knob"], errors="coerce").where(out["knob"].notna(), paper)
    return out


def prepare(table: pd.DataFrame | None) -> pd.DataFrame:
    """The table with the setting columns present and typed, plus ``setting`` (its label)
    and ``family`` (baseline, MG noise, DP-SGD, MG + DP-SGD)."""
    df = pd.DataFrame() if table is None else table.copy().reset_index(drop=True)
    numeric = ("kappa", "knob", "noise_multiplier", "seed", "n_members", "n_nonmembers", "epsilon", *SUMMARISED,
               *AVERAGED, "auc_lo", "auc_hi", "tpr_at_1pct_fpr_lo", "tpr_at_1pct_fpr_hi", "tpr_at_0p1pct_fpr_lo",
               "tpr_at_0p1pct_fpr_hi", "canary_tpr_at_1pct_fpr_lo", "canary_tpr_at_1pct_fpr_hi",
               "canary_tpr_at_0p1pct_fpr_lo", "canary_tpr_at_0p1pct_fpr_hi", *POOL_COLUMNS)
    for c in (*SETTING_KEYS, "attack", "target_run", *numeric):
        if c not in df.columns:
            df[c] = np.nan
    df["dp"] = as_bool(df["dp"]).to_numpy()
    for c in numeric:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["kappa"] = df["kappa"].fillna(0.0)
    df = with_every_knob(df)
    for c in ("model", "dataset", "attack", "defence"):
        df[c] = df[c].astype(object).where(df[c].notna(), "?").astype(str)
    df["setting"] = [setting_label(d, k, s, defence=n, knob=v)
                     for d, k, s, n, v in zip(df["dp"], df["kappa"], df["noise_multiplier"], df["defence"], df["knob"])]
    df["family"] = np.where(df["dp"], np.where(df["kappa"] > 0, "MG + DP-SGD", "DP-SGD"),
                            np.where(df["kappa"] > 0, "MG noise", "baseline"))
    other = df["defence"].map(other_defence)
    df["other_defence"] = other.notna().to_numpy(bool)
    if df["other_defence"].any():
        df.loc[df["other_defence"], "family"] = [d.title for d in other[df["other_defence"]]]
    return df


def other_defence(name: Any):
    """The :mod:`privaudit.defences` defence a table row's ``defence`` names when it is neither
    the baseline, MG noise nor DP (those have their own columns), else None."""
    from privaudit.defences import other

    return other(name)


def _key_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The setting keys with NaN made groupable (σ of non-DP rows, widths of old tables)."""
    keys = df[list(SETTING_KEYS)].copy()
    for c in keys.columns:
        keys[c] = keys[c].astype(object).where(keys[c].notna(), "—")
    return keys


def settings(table: pd.DataFrame | None, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """One row per (setting, attack): ``n_seeds``, ``seeds`` and, per summarised metric M,
    ``M`` (mean over seeds), ``M_lo``, ``M_hi`` and ``interval`` (``t over n seeds`` or
    ``sampling (1 seed)``); the means of :data:`AVERAGED`; the accountant ε (mean), the
    setting's label and family, ``setting_id`` (the same number on every attack's row of one
    setting) and ``runs``, the target runs it averages (in table order)."""
    df = prepare(table)
    if df.empty:
        return pd.DataFrame(columns=["model", "dataset", "setting", "family", "attack", "n_seeds"])
    keyed = pd.concat([_key_frame(df).add_prefix("_k_"), df], axis=1)
    rows = []
    ids: dict[tuple, int] = {}
    for key, g in keyed.groupby([f"_k_{k}" for k in SETTING_KEYS] + ["attack"], sort=False, dropna=False):
        first = g.iloc[0]
        row = {k: first[k] for k in SETTING_KEYS}
        row["setting_id"] = ids.setdefault(key[:-1], len(ids))
        row.update(attack=first["attack"], setting=first["setting"], family=first["family"],
                   other_defence=bool(first["other_defence"]),
                   n_seeds=int(g["seed"].nunique()),
                   seeds=",".join(str(int(s)) for s in sorted(g["seed"].dropna().unique())),
                   epsilon=float(g["epsilon"].mean()) if g["epsilon"].notna().any() else math.nan,
                   runs=list(dict.fromkeys(r for r in g["target_run"] if isinstance(r, str))))
        for m in AVERAGED:
            row[m] = float(g[m].mean()) if g[m].notna().any() else math.nan
        one = len(g) == 1
        row["interval"] = "sampling (1 seed)" if one else f"t over {len(g)} seeds"
        for m in SUMMARISED:
            if one:
                r = g.iloc[0]
                row[m] = r[m]
                row[f"{m}_lo"], row[f"{m}_hi"] = _sampling_interval(r, m, confidence)
            else:  # clipped to what the metric can be: [0, 1], and ε ≥ 0
                row[m], lo, hi, _ = t_interval(g[m], confidence)
                top = math.inf if m == "eps_lower_bound" else 1.0
                row[f"{m}_lo"], row[f"{m}_hi"] = (max(lo, 0.0), min(hi, top)) if math.isfinite(lo) else (lo, hi)
        row.update(_pool_summary(g, confidence))
        rows.append(row)
    out = pd.DataFrame(rows)
    from privaudit.defences import DEFENCES

    order = {"baseline": 0, "MG noise": 1, "DP-SGD": 2, "MG + DP-SGD": 3,
             **{d.title: 4 + i for i, d in enumerate(DEFENCES.values())}}
    out["_o"] = out["family"].map(order)
    return (out.sort_values(["model", "dataset", "_o", "kappa", "knob", "noise_multiplier", "attack"], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def _pool_summary(g: pd.DataFrame, confidence: float) -> dict[str, float]:
    """One (setting, attack)'s pool replicates over its seeds' rows ``g``: ``pool_n`` (models
    in all), and per measure of :data:`POOL_MEASURES` ``pool_<m>`` with ``pool_<m>_lo`` and
    ``pool_<m>_hi``: with one seed the mean over the pool's models ± t on pairs − 1 degrees
    of freedom times its jackknife standard error; over seeds (models nested in seeds) the
    mean of the seeds' means with Student's t over seeds. ``pool_mu_epsilon`` (with ``_lo``,
    ``_hi``) is the ε at the setting's δ of μ and of its interval's ends: an estimate that
    holds for a Gaussian trade-off curve (docs/methods/d-attacks.md D.6)."""
    from privaudit.analysis.gdp import gdp_epsilon

    n = pd.to_numeric(g["pool_n"], errors="coerce").to_numpy(float)
    out: dict[str, float] = {"pool_n": float(np.nansum(n)) if np.isfinite(n).any() else math.nan}
    for m in POOL_MEASURES:
        mean, se = (pd.to_numeric(g[c], errors="coerce").to_numpy(float) for c in (f"pool_{m}", f"pool_{m}_se"))
        if len(g) == 1 and np.isfinite(mean[0]) and np.isfinite(se[0]) and n[0] >= 6:
            half = float(student_t.ppf(0.5 + confidence / 2, n[0] // 2 - 1) * se[0])
            lo, hi = mean[0] - half, mean[0] + half
            value = mean[0]
        else:
            value, lo, hi, _ = t_interval(mean, confidence)
        top = 1.0 if m in ("test_accuracy", "auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr") else math.inf
        out[f"pool_{m}"] = value
        out[f"pool_{m}_lo"], out[f"pool_{m}_hi"] = ((max(lo, 0.0), min(hi, top)) if math.isfinite(lo) else (lo, hi))
    delta = float(g["pool_delta"].mean()) if g["pool_delta"].notna().any() else math.nan
    for end in ("", "_lo", "_hi"):
        mu = out[f"pool_gdp_mu{end}"]
        ok = math.isfinite(mu) and 0.0 < delta < 1.0
        out[f"pool_mu_epsilon{end}"] = float(gdp_epsilon(max(mu, 0.0), delta)) if ok else math.nan
    return out


def _sampling_interval(r: pd.Series, metric: str, confidence: float) -> tuple[float, float]:
    """The one-model interval of ``metric`` (see the module docstring)."""
    if metric == "test_accuracy":
        return binomial_interval(r["test_accuracy"], r["n_nonmembers"], confidence)
    if metric == "train_accuracy":
        return binomial_interval(r["train_accuracy"], r["n_members"], confidence)
    if metric in ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "canary_tpr_at_1pct_fpr", "canary_tpr_at_0p1pct_fpr"):
        return r.get(f"{metric}_lo", math.nan), r.get(f"{metric}_hi", math.nan)
    return math.nan, math.nan


# -- the strongest attack, one row per setting ---------------------------------------------

def strongest_attack(group: pd.DataFrame) -> str | None:
    """The strongest attack of a (model, dataset) group by :func:`privaudit.analysis.metrics.strongest_attack`
    on each attack's means over its rows; None when the group has no attack values."""
    if group.empty:
        return None
    means = group.groupby("attack", sort=True)[list(STRONGEST_KEY)].mean()
    return strongest_of(means.to_dict("index"))


def group_strongest(table: pd.DataFrame | None) -> dict[tuple[str, str], str | None]:
    """The strongest attack of each (model, dataset) group of a trade-off table, the one every
    view names (verdicts, key findings, the tables, the terminal, ``--json``):
    :func:`strongest_attack` on the attacks' means over the group's targets."""
    df = prepare(table)
    if df.empty:
        return {}
    return {(str(m), str(d)): strongest_attack(g) for (m, d), g in df.groupby(["model", "dataset"], sort=True)}


#: the overview's pool columns (each from the strongest attack's settings column): its μ over
#: the setting's pool models with its interval, μ's ε (an estimate for a Gaussian trade-off
#: curve) with its interval, and the number of models
OVERVIEW_POOL = {"pool_mu_strongest": "pool_gdp_mu", "pool_mu_strongest_lo": "pool_gdp_mu_lo",
                 "pool_mu_strongest_hi": "pool_gdp_mu_hi", "pool_mu_epsilon_strongest": "pool_mu_epsilon",
                 "pool_mu_epsilon_strongest_lo": "pool_mu_epsilon_lo",
                 "pool_mu_epsilon_strongest_hi": "pool_mu_epsilon_hi", "pool_n_strongest": "pool_n"}


def overview(setting_rows: pd.DataFrame, strongest: Mapping[tuple[str, str], str | None] | None = None) -> pd.DataFrame:
    """One row per setting of :func:`settings` (its rows of every attack together), in its
    order: the setting keys, ``setting``, ``family``, ``n_seeds``, ``runs``, ``epsilon``,
    ``delta``, test and train accuracy with their intervals (``interval``), the one-run bound
    ``one_run_eps_lower_bound``, ``strongest`` (the group's strongest attack,
    :func:`group_strongest`; without ``strongest``, the setting's own by
    :func:`privaudit.analysis.metrics.strongest_attack`), ``row_strongest`` (the setting's own
    strongest attack, which the page highlights in its row), ``eps_strongest`` (the strongest
    attack's mean empirical ε lower bound in this setting, the one ε bound every view gives
    for a setting; NaN without one), ``eps_attack`` (that attack, None without a bound), the
    same attack's mean Gaussian-DP μ and its ε (``gdp_mu_strongest``, ``gdp_eps_strongest``),
    the same attack's μ over the setting's pool models with its interval, μ's ε and the
    number of models (:data:`OVERVIEW_POOL`; NaN without pools), and the canary audit's
    f-DP one-run bound (``one_run_fdp_eps_lower_bound``)."""
    cols = [*SETTING_KEYS, "setting_id", "setting", "family", "other_defence", "n_seeds", "runs", "epsilon", "delta",
            "test_accuracy", "test_accuracy_lo", "test_accuracy_hi", "train_accuracy", "train_accuracy_lo",
            "train_accuracy_hi", "interval", "one_run_eps_lower_bound", "one_run_fdp_eps_lower_bound", "strongest",
            "row_strongest", "eps_strongest", "eps_attack", "gdp_mu_strongest", "gdp_eps_strongest", *OVERVIEW_POOL]
    if setting_rows.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for _, g in setting_rows.groupby("setting_id", sort=False):
        first = g.loc[g["n_seeds"].idxmax()]  # accuracy: the attack rows of the most seeds
        row = {c: first[c] for c in cols if c in first.index}
        row["n_seeds"] = int(g["n_seeds"].max())
        row["runs"] = list(dict.fromkeys(r for runs in g["runs"] for r in runs))
        one_run = g["one_run_eps_lower_bound"].dropna()
        row["one_run_eps_lower_bound"] = float(one_run.iloc[0]) if len(one_run) else math.nan
        fdp = g["one_run_fdp_eps_lower_bound"].dropna() if "one_run_fdp_eps_lower_bound" in g else None
        row["one_run_fdp_eps_lower_bound"] = float(fdp.iloc[0]) if fdp is not None and len(fdp) else math.nan
        by_attack = g.set_index("attack")
        row["row_strongest"] = strongest_of(by_attack[list(STRONGEST_KEY)].to_dict("index"))
        row["strongest"] = (strongest.get((str(first["model"]), str(first["dataset"])))
                            if strongest is not None else row["row_strongest"])
        s = row["strongest"]
        eps = (float(by_attack.loc[s, "eps_lower_bound"]) if s is not None and s in by_attack.index
               else math.nan)
        row["eps_strongest"] = eps
        row["eps_attack"] = s if math.isfinite(eps) else None
        for key, col in (("gdp_mu_strongest", "gdp_mu"), ("gdp_eps_strongest", "gdp_epsilon"), *OVERVIEW_POOL.items()):
            row[key] = (_num(by_attack.loc[s, col]) if s is not None and s in by_attack.index and col in by_attack
                        else math.nan)
        out.append(row)
    return pd.DataFrame(out, columns=cols)


# -- the strongest attack's claim, family-wise -------------------------------------------------

STRONGEST_CLAIM_COLUMNS = ["model", "dataset", "setting", "setting_id", "attack", "auc", "auc_lo", "auc_hi", "n_seeds",
                           "p_value", "p_adjusted", "comparisons", "attacks", "level", "correction", "verdict"]
ABOVE, NOT_ABOVE, NO_TEST = "above chance family-wise", "not above chance family-wise", "no interval: cannot decide"


def reference_setting(group_overview: pd.DataFrame) -> pd.Series | None:
    """The setting a group's key finding reports its strongest attack on: the undefended
    baseline, else the group's first setting (None without settings)."""
    if group_overview.empty:
        return None
    base = group_overview[group_overview["family"] == "baseline"]
    return (base if len(base) else group_overview).iloc[0]


def strongest_claims(setting_rows: pd.DataFrame, view: pd.DataFrame, confidence: float = CONFIDENCE,
                     alpha: float = ALPHA) -> pd.DataFrame:
    """One row per (model, dataset) (:data:`STRONGEST_CLAIM_COLUMNS`): the group's strongest
    attack on its reference setting (:func:`reference_setting`), its AUC with its interval, and
    whether that AUC lies above 0.5 family-wise: ``p_value`` is its one-sided p-value (H0:
    AUC ≤ 0.5; Student's t over seeds, or DeLong's normal z with one seed, read back from the
    row's interval by :func:`privaudit.analysis.familywise.interval_se`), ``p_adjusted`` the
    Holm–Bonferroni p-value over the ``comparisons`` attacks evaluated on that setting
    (``attacks``), ``verdict`` :data:`ABOVE` when it is at most ``alpha``."""
    out = []
    if view.empty:
        return pd.DataFrame(columns=STRONGEST_CLAIM_COLUMNS)
    for (model, dataset), ov in view.groupby(["model", "dataset"], sort=True):
        ref = reference_setting(ov)
        attack = ref["strongest"] if ref is not None else None
        if not attack:
            continue
        assert ref is not None  # attack is None without a reference setting
        rows = setting_rows[setting_rows["setting_id"] == ref["setting_id"]]
        rows = rows[np.isfinite(pd.to_numeric(rows["auc"], errors="coerce").to_numpy(float))]
        p = {}
        for _, r in rows.iterrows():
            n = r["n_seeds"]
            df = float(n - 1) if n >= 2 else math.inf
            p[r["attack"]] = excess_pvalue(float(r["auc"]), interval_se(r["auc"], r["auc_lo"], r["auc_hi"],
                                                                        confidence=confidence, df=df), 0.5, df)
        adjusted = dict(zip(p, holm(p.values())))
        mine = rows[rows["attack"] == attack]
        if mine.empty:
            continue
        r = mine.iloc[0]
        raw = p.get(attack, math.nan)
        adj = adjusted.get(attack, math.nan) if math.isfinite(raw) else math.nan
        out.append({"model": model, "dataset": dataset, "setting": ref["setting"], "setting_id": ref["setting_id"],
                    "attack": attack, "auc": r["auc"], "auc_lo": r["auc_lo"], "auc_hi": r["auc_hi"],
                    "n_seeds": int(r["n_seeds"]), "p_value": raw, "p_adjusted": adj, "comparisons": len(p),
                    "attacks": ", ".join(p), "level": alpha,
                    "correction": f"{HOLM} over the {len(p)} attacks on {ref['setting']}",
                    "verdict": NO_TEST if not math.isfinite(adj) else ABOVE if adj <= alpha else NOT_ABOVE})
    return pd.DataFrame(out, columns=STRONGEST_CLAIM_COLUMNS)


# -- iso-accuracy gaps ----------------------------------------------------------------------

def iso_gap(mg_acc: np.ndarray, mg_val: np.ndarray, dp_acc: np.ndarray, dp_val: np.ndarray,
            grid_points: int = GRID_POINTS, mg_ends: np.ndarray | None = None,
            dp_ends: np.ndarray | None = None) -> tuple[float, float, float]:
    """(mean of DP − MG over the common accuracy grid, grid low, grid high) of two curves,
    each a set of (accuracy, value) points (equal accuracies averaged); NaNs when a curve has
    fewer than two distinct accuracies or the compared range is empty.

    The compared range is [max(a_MG, a_DP), min(b_MG, b_DP)], where [a, b] spans the
    accuracies of the curve's points that may end it: those where ``mg_ends`` / ``dp_ends``
    (boolean, one per point) are true, every point without them. The verdicts pass the
    defended settings only, so that the undefended baseline, a point of both curves, never
    bounds the range (:func:`_gap_of`). The range may be one accuracy (a defence with one
    setting inside the other's range): the gap is then the difference there."""
    curves, spans = [], []
    for acc, val, ends in ((mg_acc, mg_val, mg_ends), (dp_acc, dp_val, dp_ends)):
        acc, val = np.asarray(acc, float), np.asarray(val, float)
        ok = np.isfinite(acc) & np.isfinite(val)
        a, v = acc[ok], val[ok]
        ua, inv = np.unique(a, return_inverse=True)
        end = a if ends is None else acc[ok & np.asarray(ends, bool)]
        if len(ua) < 2 or not len(end):
            return math.nan, math.nan, math.nan
        curves.append((ua, np.bincount(inv, weights=v) / np.bincount(inv)))
        spans.append((end.min(), end.max()))
    (ma, mv), (da, dv) = curves
    lo, hi = max(spans[0][0], spans[1][0]), min(spans[0][1], spans[1][1])
    if not hi >= lo:
        return math.nan, math.nan, math.nan
    grid = np.linspace(lo, hi, grid_points)
    return float(np.mean(np.interp(grid, da, dv) - np.interp(grid, ma, mv))), float(lo), float(hi)


def _interp_rows(q: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise ``np.interp(q[d], x[d], y[d])`` for ``x`` sorted strictly ascending in each row
    and ``q`` inside each row's range. Shapes: q (D, G), x and y (D, n) with n ≥ 2."""
    idx = np.clip((x[:, None, :] <= q[:, :, None]).sum(-1), 1, x.shape[1] - 1)
    x0, x1 = np.take_along_axis(x, idx - 1, 1), np.take_along_axis(x, idx, 1)
    y0, y1 = np.take_along_axis(y, idx - 1, 1), np.take_along_axis(y, idx, 1)
    return y0 + (q - x0) / (x1 - x0) * (y1 - y0)


def iso_gaps(mg_acc: np.ndarray, mg_val: np.ndarray, dp_acc: np.ndarray, dp_val: np.ndarray,
             grid_points: int = GRID_POINTS, mg_ends: np.ndarray | None = None,
             dp_ends: np.ndarray | None = None) -> np.ndarray:
    """:func:`iso_gap`'s gap for many pairs of curves at once: row d of the (D, n_mg) MG arrays
    and the (D, n_dp) DP arrays is one pair; returns (D,). ``mg_ends`` (n_mg,) and ``dp_ends``
    (n_dp,): which columns may end the compared range, as in :func:`iso_gap`. Rows whose
    points are all finite and distinct (the bootstrap's draws) are interpolated together; any
    other row goes through :func:`iso_gap` itself."""
    curves, spans, orders = [], [], []
    for acc, val, ends in ((mg_acc, mg_val, mg_ends), (dp_acc, dp_val, dp_ends)):
        a, v = np.atleast_2d(np.asarray(acc, float)), np.atleast_2d(np.asarray(val, float))
        e = np.ones(a.shape[1], bool) if ends is None else np.asarray(ends, bool)
        order = np.argsort(a, axis=1, kind="stable")
        curves.append((np.take_along_axis(a, order, 1), np.take_along_axis(v, order, 1)))
        orders.append((order, e))
        spans.append((np.where(e, a, np.inf).min(1, initial=np.inf), np.where(e, a, -np.inf).max(1, initial=-np.inf)))
    (ma, mv), (da, dv) = curves
    out = np.full(len(ma), math.nan)
    if ma.shape[1] < 2 or da.shape[1] < 2:
        return out
    simple = np.ones(len(ma), bool)
    for a, v in curves:
        simple &= np.isfinite(a).all(1) & np.isfinite(v).all(1) & (np.diff(a, axis=1) > 0).all(1)
    lo, hi = np.maximum(spans[0][0], spans[1][0]), np.minimum(spans[0][1], spans[1][1])
    ok = simple & np.isfinite(lo) & np.isfinite(hi) & (hi >= lo)
    if ok.any():
        grid = lo[ok, None] + (hi - lo)[ok, None] * np.linspace(0.0, 1.0, grid_points)[None, :]
        gap = _interp_rows(grid, da[ok], dv[ok]) - _interp_rows(grid, ma[ok], mv[ok])
        out[ok] = gap.mean(1)
    (om, em), (od, ed) = orders
    for d in np.flatnonzero(~simple):
        out[d] = iso_gap(ma[d], mv[d], da[d], dv[d], grid_points, mg_ends=em[om[d]], dp_ends=ed[od[d]])[0]
    return out


def _curve_masks(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which rows make the MG curve (not DP: baseline and MG noise) and which the DP curve
    (DP-SGD without MG, and the baseline)."""
    dp, plain = rows["dp"].to_numpy(bool), (rows["kappa"] == 0).to_numpy()
    other = rows["other_defence"].to_numpy(bool) if "other_defence" in rows else np.zeros(len(rows), bool)
    return ~dp & ~other, plain & ~other


def _defended(rows: pd.DataFrame) -> np.ndarray:
    """Which rows are defended settings: on either curve, every point but the baseline. Only
    they may end the compared accuracy range (:func:`iso_gap`)."""
    return rows["family"].to_numpy() != "baseline"


def _curves(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    mg, dp = _curve_masks(rows)
    return rows[mg], rows[dp]


def _gap_of(rows: pd.DataFrame, metric: str) -> tuple[float, float, float]:
    """One seed's :func:`iso_gap`: the baseline is a point of both curves, but the compared
    range spans only accuracies where both defences have defended settings on either side."""
    mg, dp = _curves(rows)
    return iso_gap(mg["test_accuracy"].to_numpy(float), mg[metric].to_numpy(float),
                   dp["test_accuracy"].to_numpy(float), dp[metric].to_numpy(float),
                   mg_ends=_defended(mg), dp_ends=_defended(dp))


def _has_interval(rows: pd.DataFrame, metric: str) -> bool:
    """Whether every row has a per-model interval of ``metric`` and a sample count."""
    cols = [f"{metric}_lo", f"{metric}_hi", "n_nonmembers"]
    return all(c in rows.columns for c in cols) and bool(np.isfinite(rows[cols].to_numpy(float)).all())


def _bootstrap_gap(rows: pd.DataFrame, metric: str, confidence: float, draws: int,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the one-seed gap under the sampling noise of every point: each
    of ``draws`` draws moves every accuracy by its binomial standard error and every value by
    the standard error its interval implies ((hi − lo) / 2z), all at once (:func:`iso_gaps`)."""
    rows = rows.reset_index(drop=True)
    if not _has_interval(rows, metric) or not (rows["n_nonmembers"] >= 1).all():
        return math.nan, math.nan
    acc, n = rows["test_accuracy"].to_numpy(float), rows["n_nonmembers"].to_numpy(float)
    val, lo, hi = (rows[c].to_numpy(float) for c in (metric, f"{metric}_lo", f"{metric}_hi"))
    z = 2 * float(norm.ppf(0.5 + confidence / 2))
    sd_v = (hi - lo) / z
    sd_a = np.sqrt(np.clip(acc * (1 - acc), 0, None) / n)
    a = acc + sd_a * rng.standard_normal((draws, len(acc)))
    v = val + sd_v * rng.standard_normal((draws, len(val)))
    return _gap_quantiles(rows, a, v, confidence)


def _pooled(rows: pd.DataFrame, metric: str) -> pd.DataFrame | None:
    """``rows`` read through their pools (docs/methods/e-replicates.md E): ``test_accuracy`` and ``metric``
    replaced by their means over the setting's pool models (``pool_*``), with their jackknife
    standard errors (``_se_acc``, ``_se_val``) and degrees of freedom (``_df``, pairs − 1);
    None when a row has no pool replicates of ``metric`` (or too few to leave a pair out)."""
    cols = ["pool_n", "pool_test_accuracy", f"pool_{metric}", "pool_test_accuracy_se", f"pool_{metric}_se"]
    if rows.empty or not all(c in rows.columns for c in cols):
        return None
    values = rows[cols].to_numpy(float)
    if not np.isfinite(values).all() or (values[:, 0] < 6).any():
        return None
    out = rows.copy()
    out["test_accuracy"], out[metric] = rows["pool_test_accuracy"], rows[f"pool_{metric}"]
    out["_se_acc"], out["_se_val"] = rows["pool_test_accuracy_se"], rows[f"pool_{metric}_se"]
    out["_df"] = rows["pool_n"] // 2 - 1
    return out


def _bootstrap_pool_gap(rows: pd.DataFrame, metric: str, confidence: float, draws: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the one-seed gap read through the pools (:func:`_pooled` rows):
    each draw moves every setting's mean accuracy and mean ``metric`` by its jackknife
    standard error times a Student-t variate on the pool's pairs − 1 degrees of freedom, the
    settings independently (each has its own pool), all draws at once (:func:`iso_gaps`)."""
    rows = rows.reset_index(drop=True)
    df = rows["_df"].to_numpy(float)
    a = rows["test_accuracy"].to_numpy(float) + rows["_se_acc"].to_numpy(float) * rng.standard_t(df, (draws, len(df)))
    v = rows[metric].to_numpy(float) + rows["_se_val"].to_numpy(float) * rng.standard_t(df, (draws, len(df)))
    return _gap_quantiles(rows, a, v, confidence)


def _gap_quantiles(rows: pd.DataFrame, a: np.ndarray, v: np.ndarray, confidence: float) -> tuple[float, float]:
    """The (1 ± confidence)/2 quantiles of the gaps of the drawn curves ``a`` (accuracies) and
    ``v`` (values), (draws, len(rows)) each; NaNs when fewer than half the draws have a
    compared range."""
    mg_rows, dp_rows = _curve_masks(rows)
    defended = _defended(rows)
    gaps = iso_gaps(a[:, mg_rows], v[:, mg_rows], a[:, dp_rows], v[:, dp_rows],
                    mg_ends=defended[mg_rows], dp_ends=defended[dp_rows])
    draws = len(a)
    gaps = gaps[np.isfinite(gaps)]
    if len(gaps) < draws / 2:  # the ranges overlap in too few draws to say anything
        return math.nan, math.nan
    q = (1 - confidence) / 2
    return float(np.quantile(gaps, q)), float(np.quantile(gaps, 1 - q))


# -- comparisons and verdicts ---------------------------------------------------------------

def read_verdict(lo: float, hi: float) -> str:
    """The verdict of a 95 % interval of DP − MG (higher = more leakage)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no interval: cannot decide"
    if lo > 0:
        return VERDICT_MG
    if hi < 0:
        return VERDICT_DP
    return VERDICT_TIE


#: what became of a comparison (its ``status``): a gap with an interval (``verdict`` reads it),
#: a gap without one, no gap because the two defences' own settings share no test accuracy
#: (``reason`` names the defence that falls short and the setting to add), no gap otherwise
STATUS_COMPARED, STATUS_NO_INTERVAL, STATUS_NO_OVERLAP, STATUS_NOT_COMPARED = (
    "compared", "no interval", "no overlap", "not compared")
COMPARISON_COLUMNS = ["model", "dataset", "attack", "metric", "n_seeds", "n_models", "acc_low", "acc_high", "gap",
                      "gap_lo", "gap_hi", "interval", "detectable", "verdict", "reason", "status"]
#: the power at which ``detectable`` is stated (docs/methods/e-replicates.md E)
POWER = 0.8


def comparisons(table: pd.DataFrame | None, confidence: float = CONFIDENCE, draws: int = 1000,
                seed: int = 0) -> pd.DataFrame:
    """One row per (model, dataset, attack, measure of :data:`COMPARED`): DP-SGD − MG noise
    at equal test accuracy, with the columns of :func:`compare` (n_seeds, acc_low, acc_high,
    gap, gap_lo, gap_hi, interval, verdict, reason, status). Only rows of the MG-noise and DP-SGD
    families and the baseline enter; groups trained with NoisyCGD are left out (compared with
    DP-SGD at equal ε in :mod:`privaudit.reporting.defences`). Each comparison's bootstrap has its
    own generator seeded with ``seed``, so a row does not depend on which others were asked."""
    df = prepare(table)
    out = []
    for (model, dataset), g in df.groupby(["model", "dataset"], sort=True):
        if (g["defence"] == "noisycgd").any():
            continue
        for attack, rows in g[g["family"] != "MG + DP-SGD"].groupby("attack", sort=True):
            for metric in COMPARED:
                out.append({"model": model, "dataset": dataset, "attack": attack, "metric": metric,
                            **_verdict_of(rows, metric, confidence, draws, np.random.default_rng(seed))})
    return pd.DataFrame(out, columns=COMPARISON_COLUMNS)


def verdicts(table: pd.DataFrame | None, confidence: float = CONFIDENCE, draws: int = 1000, seed: int = 0,
             compared: pd.DataFrame | None = None,
             strongest: Mapping[tuple[str, str], str | None] | None = None) -> pd.DataFrame:
    """The comparisons that answer the question, one row per (model, dataset, comparison):
    the paper's attack by AUC, the strongest attack by TPR at 0.1 % FPR and by ε lower bound.
    Columns: model, dataset, comparison, attack, metric, n_seeds (seeds whose curves overlap),
    acc_low, acc_high (mean compared accuracy range), gap (mean DP − MG), gap_lo, gap_hi,
    interval, verdict, reason (why no verdict, when there is none), status (one of
    :data:`STATUS_COMPARED` …, :data:`STATUS_NO_OVERLAP` where the defences' own settings share
    no test accuracy). ``compared``: the
    :func:`comparisons` of the same table, when already computed; ``strongest``: its
    :func:`group_strongest`, likewise.

    The verdicts of one group are family-wise (:func:`_familywise`): ``verdict`` names a
    defence only where the difference is significant at 5 % after Holm–Bonferroni over the
    group's comparisons (``p_value``, ``p_adjusted``, ``comparisons``, ``correction``);
    ``row_verdict`` is the reading of the row's own 95 % interval, which stays per-row."""
    df = prepare(table)
    compared = comparisons(df, confidence, draws, seed) if compared is None else compared
    cols = ["model", "dataset", "comparison", *COMPARISON_COLUMNS[2:], "row_verdict", "p_value", "p_adjusted",
            "comparisons", "correction"]
    out = []
    for (model, dataset), g in df.groupby(["model", "dataset"], sort=True):
        if (g["defence"] == "noisycgd").any():
            continue
        best = strongest.get((str(model), str(dataset))) if strongest is not None else strongest_attack(g)
        asks = [("paper's attack", _paper_attack(g), "auc")]
        if best is not None:
            asks += [("strongest attack", best, "gdp_mu"),
                     ("strongest attack", best, "tpr_at_0p1pct_fpr")]
        for comparison, attack, metric in asks:
            hit = compared[(compared["model"] == model) & (compared["dataset"] == dataset)
                           & (compared["attack"] == attack) & (compared["metric"] == metric)]
            found = (hit.iloc[0].to_dict() if len(hit) else
                     {"model": model, "dataset": dataset, "attack": attack, "metric": metric,
                      **_verdict_of(g.iloc[0:0], metric, confidence, draws, np.random.default_rng(seed))})
            out.append({"comparison": comparison, **found})
        _familywise(out[len(out) - len(asks):], confidence)
    return pd.DataFrame(out, columns=cols)


def _paper_attack(group: pd.DataFrame) -> str:
    """The attack a group's "paper's attack" verdict reads: the papers' shadow-model attack,
    which trains one shadow model per setting, or, where the settings' pools give it
    replicates, the same attack with the pool models as shadows (:data:`POOL_SHADOW_ATTACK`)."""
    pool = group[group["attack"] == POOL_SHADOW_ATTACK]
    return POOL_SHADOW_ATTACK if len(pool) and _pooled(pool, "auc") is not None else PAPER_ATTACK


def _familywise(rows: list[dict], confidence: float) -> None:
    """Make one group's verdicts family-wise, in place (:func:`verdicts`): each row's two-sided
    p-value of DP − MG = 0 is read back from its 95 % interval (Student's t over seeds with
    n − 1 degrees of freedom; a one-seed bootstrap interval as a normal standard error, an
    approximation), Holm–Bonferroni over the group's rows that have one; ``verdict`` names a
    defence only where the adjusted p is at most 1 − ``confidence``, and ``row_verdict`` keeps
    what the row's own interval says."""
    alpha = round(1.0 - confidence, 12)
    p = []
    dfs = []
    for r in rows:
        r["row_verdict"] = r["verdict"]
        n = r.get("n_seeds") or 0
        dfs.append(float(n - 1) if str(r.get("interval", "")).startswith("t over") and n >= 2 else math.inf)
        p.append(two_sided_pvalue(r["gap"], _gap_se(r, confidence, dfs[-1]), 0.0, dfs[-1]))
    tested = [i for i, v in enumerate(p) if math.isfinite(v)]
    for i in tested:
        rows[i]["detectable"] = _detectable(rows[i], confidence, dfs[i], tests=len(tested))
    adjusted = holm([p[i] for i in tested])
    correction = (f"{HOLM} over the {len(tested)} comparisons of this model and dataset, "
                  f"{100 * alpha:g} % family-wise")
    for i, r in enumerate(rows):
        r.update(p_value=p[i], p_adjusted=math.nan, comparisons=len(tested), correction="")
    for i, adj in zip(tested, adjusted):
        r = rows[i]
        r.update(p_adjusted=float(adj), correction=correction)
        if r["row_verdict"] in (VERDICT_MG, VERDICT_DP) and adj > alpha:
            r["verdict"] = VERDICT_TIE


def compare(rows: pd.DataFrame, metric: str, confidence: float = CONFIDENCE, draws: int = 1000,
            seed: int = 0) -> dict:
    """The verdict fields of :func:`comparisons` (n_seeds … reason) for the rows of one attack
    of one (model, dataset) group, on any leakage ``metric`` of the table."""
    df = prepare(rows)
    return _verdict_of(df[df["family"] != "MG + DP-SGD"], metric, confidence, draws, np.random.default_rng(seed))


def _no_comparison(rows: pd.DataFrame, metric: str) -> tuple[str, str]:
    """(status, reason): why the rows of one attack give no iso-accuracy gap in any seed."""
    has = {f: bool((rows["family"] == f).any()) for f in ("baseline", "MG noise", "DP-SGD")}
    if not has["MG noise"] and not has["DP-SGD"]:
        return STATUS_NOT_COMPARED, "only the undefended baseline has been audited"
    if not has["DP-SGD"]:
        return STATUS_NOT_COMPARED, "there are no DP-SGD runs to compare MG noise with"
    if not has["MG noise"]:
        return STATUS_NOT_COMPARED, "there are no MG-noise runs to compare DP-SGD with"
    if rows[metric].notna().sum() == 0:
        return STATUS_NOT_COMPARED, "the attack has no values of this measure"
    mg, dp = _curves(rows[rows[metric].notna()])
    for side, c in (("MG-noise", mg), ("DP-SGD", dp)):
        if all(s.nunique() < 2 for _, s in c.groupby("seed", dropna=False)["test_accuracy"]):
            return STATUS_NOT_COMPARED, f"the {side} curve has fewer than two distinct test accuracies"
    mg, dp = mg[mg["family"] == "MG noise"], dp[dp["family"] == "DP-SGD"]
    for side, c in (("MG-noise", mg), ("DP-SGD", dp)):
        if c.empty:
            return STATUS_NOT_COMPARED, f"no {side} setting has a value of this measure"
    return STATUS_NO_OVERLAP, _no_overlap(mg, dp)


def _no_overlap(mg: pd.DataFrame, dp: pd.DataFrame) -> str:
    """Why the defended settings of the two defences (``mg``, ``dp``: their rows, every seed)
    share no test accuracy in any seed, and which setting to add: read on each setting's mean
    accuracy over seeds, the defence whose settings all lie below the other's is the one
    that falls short (a smaller knob makes it more accurate)."""
    m = mg.groupby("setting", sort=False)["test_accuracy"].mean()
    d = dp.groupby("setting", sort=False)["test_accuracy"].mean()

    def span(acc: pd.Series) -> str:
        return f"{acc.min():.3f}–{acc.max():.3f}" if len(acc) > 1 else f"{acc.iloc[0]:.3f} at {acc.index[0]}"
    if d.max() < m.min():
        return (f"no DP-SGD setting is as accurate as any MG-noise setting (MG noise {span(m)}; best DP-SGD "
                f"{d.max():.3f} at {d.idxmax()}): add a smaller σ (--sigmas), or a larger κ (--kappas; "
                "--match-accuracy searches one)")
    if m.max() < d.min():
        return (f"no MG-noise setting is as accurate as any DP-SGD setting (DP-SGD {span(d)}; best MG noise "
                f"{m.max():.3f} at {m.idxmax()}): add a smaller κ (--kappas; --match-accuracy searches one), "
                "or a larger σ (--sigmas)")
    return (f"the two defences' settings share no test accuracy within any one seed (means over seeds: MG noise "
            f"{span(m)}, DP-SGD {span(d)}): add settings where they meet (--kappas, --sigmas) or try "
            "--match-accuracy")


def _verdict_of(rows: pd.DataFrame, metric: str, confidence: float, draws: int,
                rng: np.random.Generator) -> dict:
    """The verdict fields of one attack's rows (:func:`compare`): per seed the iso-accuracy
    gap (:func:`_gap_of`), read through the settings' pools where every row has them
    (:func:`_pooled`: every pool model a replicate), over the seeds that have one a t interval
    (one seed: the jackknife bootstrap over the pools, else the sampling bootstrap), its
    reading and the smallest difference it could detect; without any gap, the status and
    reason of :func:`_no_comparison`."""
    none = {"n_seeds": 0, "n_models": 0, "acc_low": math.nan, "acc_high": math.nan, "gap": math.nan,
            "gap_lo": math.nan, "gap_hi": math.nan, "interval": "", "detectable": math.nan, "verdict": "not compared"}
    if rows.empty:
        return {**none, "reason": "the attack did not run on these targets", "status": STATUS_NOT_COMPARED}
    pooled = _pooled(rows, metric)
    use = rows if pooled is None else pooled
    per_seed = []
    for s, rs in use.groupby("seed", sort=True, dropna=False):
        gap, lo, hi = _gap_of(rs, metric)
        if np.isfinite(gap):
            per_seed.append((s, gap, lo, hi, rs))
    if not per_seed or not (rows["family"] == "DP-SGD").any() or not (rows["family"] == "MG noise").any():
        status, reason = _no_comparison(rows, metric)
        return {**none, "reason": reason, "status": status}
    gaps = [p[1] for p in per_seed]
    models = 1 if pooled is None else int(min(rs["pool_n"].min() for *_, rs in per_seed))
    res: dict[str, Any] = {"n_seeds": len(per_seed), "n_models": models * len(per_seed),
                           "acc_low": float(np.mean([p[2] for p in per_seed])),
                           "acc_high": float(np.mean([p[3] for p in per_seed])), "reason": ""}
    each = "" if pooled is None else f", each the mean of {models} pool models"
    df = math.inf
    if len(per_seed) >= 2:
        mean, lo, hi, n = t_interval(gaps, confidence)
        res.update(gap=mean, gap_lo=lo, gap_hi=hi, interval=f"t over {n} seeds{each}")
        df = n - 1.0
    elif pooled is not None:
        lo, hi = _bootstrap_pool_gap(per_seed[0][4], metric, confidence, draws, rng)
        res.update(gap=gaps[0], gap_lo=lo, gap_hi=hi, interval=f"jackknife over {models // 2} pool pairs (1 seed)")
        if not np.isfinite(lo):
            res["reason"] = "too little overlap between the pools' curves to bootstrap"
    else:
        lo, hi = _bootstrap_gap(per_seed[0][4], metric, confidence, draws, rng)
        res.update(gap=gaps[0], gap_lo=lo, gap_hi=hi, interval="sampling (1 seed)")
        if not np.isfinite(lo):
            res["reason"] = ("one seed and no per-model interval for this measure: replicate with --seeds"
                             if not _has_interval(per_seed[0][4], metric)
                             else "one seed and too little overlap to bootstrap")
    res["detectable"] = _detectable(res, confidence, df, tests=1)
    res["verdict"] = read_verdict(res["gap_lo"], res["gap_hi"])
    res["status"] = STATUS_COMPARED if np.isfinite(res["gap_lo"]) and np.isfinite(res["gap_hi"]) else STATUS_NO_INTERVAL
    return res


def _gap_se(row: Mapping[str, Any], confidence: float, df: float) -> float:
    """The standard error behind a comparison's interval (:func:`interval_se`, unclipped)."""
    return interval_se(row["gap"], row["gap_lo"], row["gap_hi"], confidence=confidence, df=df,
                       bounds=(-math.inf, math.inf))


def _detectable(row: Mapping[str, Any], confidence: float, df: float, tests: int) -> float:
    """The smallest |DP − MG| the comparison detects with probability :data:`POWER` at level
    1 − ``confidence`` (the strictest Holm step over ``tests`` comparisons):
    :func:`privaudit.analysis.familywise.detectable_difference` of its standard error."""
    return detectable_difference(_gap_se(row, confidence, df), df, alpha=round(1.0 - confidence, 12), tests=tests,
                                 power=POWER)


# -- everything at once -------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """What every view reads: the per-(setting, attack) table, one row per setting, every
    iso-accuracy comparison and the verdicts among them."""

    settings: pd.DataFrame
    verdicts: pd.DataFrame
    comparisons: pd.DataFrame
    overview: pd.DataFrame
    #: which defence at each target accuracy (:mod:`privaudit.reporting.at_accuracy`; empty
    #: without ``audit --target-accuracies``)
    at_accuracy: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: the strongest attack's claim of each (model, dataset), family-wise (:func:`strongest_claims`)
    strongest_claim: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STRONGEST_CLAIM_COLUMNS))

    def to_dict(self) -> dict:
        """Plain JSON-able lists (NaN → None)."""
        def plain(v: Any) -> Any:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            return v.item() if isinstance(v, np.generic) else v

        def records(frame: pd.DataFrame) -> list[dict]:
            return [{k: plain(v) for k, v in r.items()} for r in frame.to_dict("records")]
        return {"settings": records(self.settings), "overview": records(self.overview),
                "verdicts": records(self.verdicts), "comparisons": records(self.comparisons),
                "at_accuracy": records(self.at_accuracy), "strongest_claim": records(self.strongest_claim)}

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text."""
        from privaudit.files.atomic import plain_json

        return json.dumps(plain_json(self.to_dict()), indent=indent)


def summarise(table: pd.DataFrame | None, confidence: float = CONFIDENCE,
              accuracy_targets: Sequence[dict] = ()) -> Summary:
    """Every derived number of one table, each computed once: among them the strongest attack
    of each (model, dataset) group (:func:`group_strongest`), which the verdicts and the
    overview name alike, and whether its AUC lies above chance family-wise
    (:func:`strongest_claims`); with ``accuracy_targets`` (the entries of
    ``reports/accuracy_targets.json``) the defences at each target accuracy, their verdicts
    family-wise over the pairs of defences at each target."""
    from privaudit.reporting.at_accuracy import at_accuracy

    per_setting = settings(table, confidence)
    compared = comparisons(table, confidence)
    strongest = group_strongest(table)
    view = overview(per_setting, strongest)
    targets = at_accuracy(per_setting, view, accuracy_targets) if accuracy_targets else pd.DataFrame()
    return Summary(per_setting, verdicts(table, confidence, compared=compared, strongest=strongest), compared,
                   view, targets, strongest_claims(per_setting, view, confidence, alpha=round(1.0 - confidence, 12)))
