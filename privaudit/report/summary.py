"""The summary layer: every derived number the report, the terminal and ``--json`` show
(docs/methods.md E).

Pure pandas/NumPy/SciPy over the tidy trade-off table of :mod:`privaudit.report.build` (one
row per target, defence setting, seed and attack). It computes, once:

* **settings**: one row per (model, dataset, recipe, defence setting, attack) with the mean
  over seeds and a 95 % interval of test accuracy, AUC, TPR at 1 % and 0.1 % FPR and the
  empirical ε lower bound. With two or more seeds the interval is Student's t over seeds
  (it covers training randomness and the draw of the audited records, since every seed
  re-draws both); with one seed it is the per-model sampling interval: DeLong for AUC,
  Clopper–Pearson for accuracy and TPR at low FPR, and none for the ε lower bound, which is
  already a one-sided 95 % bound;
* **strongest attack** of each (model, dataset): the attack with the highest mean TPR at
  0.1 % FPR over its settings, then the highest mean AUC (the one rule of every view);
* **verdicts**: at equal test accuracy, DP-SGD − MG noise for the paper's attack (shadow
  AUC) and the strongest attack (TPR at 0.1 % FPR and the ε lower bound), each with a 95 %
  interval, read as "MG noise leaks less" (interval above 0), "DP-SGD leaks less" (below 0)
  or "no significant difference at 95 %" (it contains 0).

The iso-accuracy gap of one seed follows :mod:`privaudit.report.iso`: the MG curve (baseline
and MG-noise settings) and the DP curve (baseline and DP-SGD settings) are interpolated
linearly on 25 accuracies spanning the overlap of their accuracy ranges, and the gap is the
mean of DP − MG over that grid. Over seeds the gaps get a t-interval; with one seed the
interval is a parametric bootstrap over the sampling of each point (accuracy binomial, the
metric normal with the spread of its interval), the baseline drawn once for both curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm, t as student_t

from privaudit.empirical import clopper_pearson
from privaudit.formatting import number as _num
from privaudit.formatting import sig3
from privaudit.metrics import STRONGEST_KEY
from privaudit.metrics import strongest_attack as strongest_of
from privaudit.report.iso import as_bool

CONFIDENCE = 0.95
PAPER_ATTACK = "shadow"
SUMMARISED = ("test_accuracy", "auc", "precision", "recall", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr",
              "eps_lower_bound")
#: the columns that make a setting: the recipe and the defence (the seed replicates it)
SETTING_KEYS = ("model", "dataset", "width", "part_size", "epochs", "defence", "kappa", "dp", "noise_multiplier")
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
    """Two-sided Clopper–Pearson interval (:func:`privaudit.empirical.clopper_pearson`) of a
    proportion ``p`` observed on ``n`` trials; NaNs when either is missing."""
    if not (np.isfinite(p) and np.isfinite(n) and n >= 1):
        return math.nan, math.nan
    return clopper_pearson(round(p * n), round(n), confidence)


# -- settings -----------------------------------------------------------------------------

def setting_label(dp: Any, kappa: Any, sigma: Any, epsilon: Any = math.nan) -> str:
    """How a defence setting is named everywhere: ``baseline``, ``κ=0.5``, ``σ=1``,
    ``κ=0.5, σ=1``; with a finite ``epsilon`` (DP rows) ``σ=1 (ε=21.0)``."""
    k, s = _num(kappa), _num(sigma)
    mg = f"κ={k:g}" if math.isfinite(k) and k > 0 else ""
    if not as_bool([dp]).iloc[0]:
        return mg or "baseline"
    sig = f"σ={s:.3g}" if math.isfinite(s) else "σ=?"
    eps = f" (ε={sig3(epsilon)})" if math.isfinite(_num(epsilon)) else ""
    return (f"{mg}, {sig}" if mg else sig) + eps


def prepare(table: pd.DataFrame | None) -> pd.DataFrame:
    """The table with the setting columns present and typed, plus ``setting`` (its label)
    and ``family`` (baseline, MG noise, DP-SGD, MG + DP-SGD)."""
    df = pd.DataFrame() if table is None else table.copy().reset_index(drop=True)
    for c in (*SETTING_KEYS, "seed", "attack", "n_nonmembers", "epsilon", "auc_lo", "auc_hi",
              "tpr_at_1pct_fpr_lo", "tpr_at_1pct_fpr_hi", "tpr_at_0p1pct_fpr_lo", "tpr_at_0p1pct_fpr_hi",
              *SUMMARISED):
        if c not in df.columns:
            df[c] = np.nan
    df["dp"] = as_bool(df["dp"]).to_numpy()
    for c in ("kappa", "noise_multiplier", "seed", "n_nonmembers", "epsilon", *SUMMARISED, "auc_lo", "auc_hi",
              "tpr_at_1pct_fpr_lo", "tpr_at_1pct_fpr_hi", "tpr_at_0p1pct_fpr_lo", "tpr_at_0p1pct_fpr_hi"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["kappa"] = df["kappa"].fillna(0.0)
    for c in ("model", "dataset", "attack", "defence"):
        df[c] = df[c].astype(object).where(df[c].notna(), "?").astype(str)
    df["setting"] = [setting_label(d, k, s) for d, k, s in zip(df["dp"], df["kappa"], df["noise_multiplier"])]
    df["family"] = np.where(df["dp"], np.where(df["kappa"] > 0, "MG + DP-SGD", "DP-SGD"),
                            np.where(df["kappa"] > 0, "MG noise", "baseline"))
    return df


def _key_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The setting keys with NaN made groupable (σ of non-DP rows, widths of old tables)."""
    keys = df[list(SETTING_KEYS)].copy()
    for c in keys.columns:
        keys[c] = keys[c].astype(object).where(keys[c].notna(), "—")
    return keys


def settings(table: pd.DataFrame | None, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """One row per (setting, attack): ``n_seeds``, ``seeds`` and, per summarised metric M,
    ``M`` (mean over seeds), ``M_lo``, ``M_hi`` and ``interval`` (``t over n seeds`` or
    ``sampling (1 seed)``), plus the accountant ε (mean) and the setting's label and family."""
    df = prepare(table)
    if df.empty:
        return pd.DataFrame(columns=["model", "dataset", "setting", "family", "attack", "n_seeds"])
    keyed = pd.concat([_key_frame(df).add_prefix("_k_"), df], axis=1)
    rows = []
    for _, g in keyed.groupby([f"_k_{k}" for k in SETTING_KEYS] + ["attack"], sort=False, dropna=False):
        first = g.iloc[0]
        row = {k: first[k] for k in SETTING_KEYS}
        row.update(attack=first["attack"], setting=first["setting"], family=first["family"],
                   n_seeds=int(g["seed"].nunique()), seeds=",".join(str(int(s)) for s in sorted(g["seed"].dropna().unique())),
                   epsilon=float(g["epsilon"].mean()) if g["epsilon"].notna().any() else math.nan)
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
        rows.append(row)
    out = pd.DataFrame(rows)
    order = {"baseline": 0, "MG noise": 1, "DP-SGD": 2, "MG + DP-SGD": 3}
    out["_o"] = out["family"].map(order)
    return (out.sort_values(["model", "dataset", "_o", "kappa", "noise_multiplier", "attack"], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def _sampling_interval(r: pd.Series, metric: str, confidence: float) -> tuple[float, float]:
    """The one-model interval of ``metric`` (see the module docstring)."""
    if metric == "test_accuracy":
        return binomial_interval(r["test_accuracy"], r["n_nonmembers"], confidence)
    if metric in ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr"):
        return r[f"{metric}_lo"], r[f"{metric}_hi"]
    return math.nan, math.nan


# -- the strongest attack -----------------------------------------------------------------

def strongest_attack(group: pd.DataFrame) -> str | None:
    """The strongest attack of a (model, dataset) group by :func:`privaudit.metrics.strongest_attack`
    on each attack's means over its rows; None when the group has no attack values."""
    if group.empty or group["tpr_at_0p1pct_fpr"].isna().all():
        return None
    means = group.groupby("attack", sort=True)[list(STRONGEST_KEY)].mean()
    return strongest_of(means.to_dict("index"))


# -- verdicts -----------------------------------------------------------------------------

def iso_gap(mg_acc: np.ndarray, mg_val: np.ndarray, dp_acc: np.ndarray, dp_val: np.ndarray,
            grid_points: int = GRID_POINTS) -> tuple[float, float, float]:
    """(mean of DP − MG over the common accuracy grid, grid low, grid high) of two curves,
    each a set of (accuracy, value) points (equal accuracies averaged); NaNs when a curve has
    fewer than two distinct accuracies or the ranges do not overlap."""
    curves = []
    for acc, val in ((mg_acc, mg_val), (dp_acc, dp_val)):
        ok = np.isfinite(acc) & np.isfinite(val)
        a, v = np.asarray(acc, float)[ok], np.asarray(val, float)[ok]
        ua, inv = np.unique(a, return_inverse=True)
        if len(ua) < 2:
            return math.nan, math.nan, math.nan
        curves.append((ua, np.bincount(inv, weights=v) / np.bincount(inv)))
    (ma, mv), (da, dv) = curves
    lo, hi = max(ma[0], da[0]), min(ma[-1], da[-1])
    if not hi > lo:
        return math.nan, math.nan, math.nan
    grid = np.linspace(lo, hi, grid_points)
    return float(np.mean(np.interp(grid, da, dv) - np.interp(grid, ma, mv))), float(lo), float(hi)


def _curve_masks(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which rows make the MG curve (not DP: baseline and MG noise) and which the DP curve
    (DP-SGD without MG, and the baseline)."""
    dp, plain = rows["dp"].to_numpy(bool), (rows["kappa"] == 0).to_numpy()
    return ~dp, plain


def _curves(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    mg, dp = _curve_masks(rows)
    return rows[mg], rows[dp]


def _gap_of(rows: pd.DataFrame, metric: str) -> tuple[float, float, float]:
    mg, dp = _curves(rows)
    return iso_gap(mg["test_accuracy"].to_numpy(float), mg[metric].to_numpy(float),
                   dp["test_accuracy"].to_numpy(float), dp[metric].to_numpy(float))


def _bootstrap_gap(rows: pd.DataFrame, metric: str, confidence: float, draws: int,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the one-seed gap under the sampling noise of every point."""
    rows = rows.reset_index(drop=True)
    if f"{metric}_lo" not in rows.columns:
        return math.nan, math.nan
    acc, n = rows["test_accuracy"].to_numpy(float), rows["n_nonmembers"].to_numpy(float)
    val, lo, hi = (rows[c].to_numpy(float) for c in (metric, f"{metric}_lo", f"{metric}_hi"))
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(n >= 1)):
        return math.nan, math.nan
    z = 2 * float(norm.ppf(0.5 + confidence / 2))
    sd_v = (hi - lo) / z
    sd_a = np.sqrt(np.clip(acc * (1 - acc), 0, None) / n)
    mg_rows, dp_rows = _curve_masks(rows)
    gaps = []
    for _ in range(draws):
        a = acc + sd_a * rng.standard_normal(len(acc))
        v = val + sd_v * rng.standard_normal(len(val))
        g, _, _ = iso_gap(a[mg_rows], v[mg_rows], a[dp_rows], v[dp_rows])
        if np.isfinite(g):
            gaps.append(g)
    if len(gaps) < draws / 2:  # the ranges overlap in too few draws to say anything
        return math.nan, math.nan
    q = (1 - confidence) / 2
    return float(np.quantile(gaps, q)), float(np.quantile(gaps, 1 - q))


def read_verdict(lo: float, hi: float) -> str:
    """The verdict of a 95 % interval of DP − MG (higher = more leakage)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no interval: cannot decide"
    if lo > 0:
        return VERDICT_MG
    if hi < 0:
        return VERDICT_DP
    return VERDICT_TIE


def verdicts(table: pd.DataFrame | None, confidence: float = CONFIDENCE, draws: int = 1000,
             seed: int = 0) -> pd.DataFrame:
    """One row per (model, dataset, comparison): the paper's attack by AUC, the strongest
    attack by TPR at 0.1 % FPR and by ε lower bound. Columns: model, dataset, comparison,
    attack, metric, n_seeds (seeds whose curves overlap), acc_low, acc_high (mean compared
    accuracy range), gap (mean DP − MG), gap_lo, gap_hi, interval, verdict, reason (why no
    verdict, when there is none). Only rows of the MG-noise and DP-SGD families (and the
    baseline) enter; the bootstrap is seeded with ``seed``."""
    df = prepare(table)
    cols = ["model", "dataset", "comparison", "attack", "metric", "n_seeds", "acc_low", "acc_high", "gap",
            "gap_lo", "gap_hi", "interval", "verdict", "reason"]
    out = []
    rng = np.random.default_rng(seed)
    for (model, dataset), g in df.groupby(["model", "dataset"], sort=True):
        if (g["defence"] == "noisycgd").any():
            continue  # NoisyCGD is compared with DP-SGD at equal ε elsewhere (report.defences)
        strongest = strongest_attack(g)
        asks = [("paper's attack", PAPER_ATTACK, "auc")]
        if strongest is not None:
            asks += [("strongest attack", strongest, "tpr_at_0p1pct_fpr"), ("strongest attack", strongest,
                                                                            "eps_lower_bound")]
        for comparison, attack, metric in asks:
            rows = g[(g["attack"] == attack) & (g["family"] != "MG + DP-SGD")]
            out.append({"model": model, "dataset": dataset, "comparison": comparison, "attack": attack,
                        "metric": metric, **_verdict_of(rows, metric, confidence, draws, rng)})
    return pd.DataFrame(out, columns=cols)


def compare(rows: pd.DataFrame, metric: str, confidence: float = CONFIDENCE, draws: int = 1000,
            seed: int = 0) -> dict:
    """The verdict fields of :func:`verdicts` (n_seeds … reason) for the rows of one attack of
    one (model, dataset) group, on any leakage ``metric`` of the table."""
    df = prepare(rows)
    return _verdict_of(df[df["family"] != "MG + DP-SGD"], metric, confidence, draws, np.random.default_rng(seed))


def _verdict_of(rows: pd.DataFrame, metric: str, confidence: float, draws: int,
                rng: np.random.Generator) -> dict:
    none = {"n_seeds": 0, "acc_low": math.nan, "acc_high": math.nan, "gap": math.nan, "gap_lo": math.nan,
            "gap_hi": math.nan, "interval": "", "verdict": "not compared"}
    if rows.empty:
        return {**none, "reason": "the attack did not run on these targets"}
    if not (rows["family"] == "DP-SGD").any() or not (rows["family"] == "MG noise").any():
        return {**none, "reason": "needs both MG-noise and DP-SGD settings"}
    per_seed = []
    for s, rs in rows.groupby("seed", sort=True):
        gap, lo, hi = _gap_of(rs, metric)
        if np.isfinite(gap):
            per_seed.append((s, gap, lo, hi, rs))
    if not per_seed:
        mg, dp = _curves(rows)
        return {**none, "reason": (f"the accuracy ranges do not overlap (MG noise {mg['test_accuracy'].min():.3f}–"
                                   f"{mg['test_accuracy'].max():.3f}, DP-SGD {dp['test_accuracy'].min():.3f}–"
                                   f"{dp['test_accuracy'].max():.3f}): try --match-accuracy")}
    gaps = [p[1] for p in per_seed]
    res = {"n_seeds": len(per_seed), "acc_low": float(np.mean([p[2] for p in per_seed])),
           "acc_high": float(np.mean([p[3] for p in per_seed])), "reason": ""}
    if len(per_seed) >= 2:
        mean, lo, hi, n = t_interval(gaps, confidence)
        res.update(gap=mean, gap_lo=lo, gap_hi=hi, interval=f"t over {n} seeds")
    else:
        lo, hi = _bootstrap_gap(per_seed[0][4], metric, confidence, draws, rng)
        res.update(gap=gaps[0], gap_lo=lo, gap_hi=hi, interval="sampling (1 seed)")
        if not np.isfinite(lo):
            res["reason"] = ("one seed and no per-model interval for this metric: replicate with --seeds"
                             if metric == "eps_lower_bound" else "one seed and too little overlap to bootstrap")
    res["verdict"] = read_verdict(res["gap_lo"], res["gap_hi"])
    return res


# -- everything at once -------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """What every view reads: the per-setting table and the verdicts."""

    settings: pd.DataFrame
    verdicts: pd.DataFrame

    def to_json(self) -> dict:
        """Plain JSON-able lists (NaN → None)."""
        def records(frame: pd.DataFrame) -> list[dict]:
            return [{k: (None if isinstance(v, float) and not math.isfinite(v) else
                         (v.item() if isinstance(v, np.generic) else v)) for k, v in r.items()}
                    for r in frame.to_dict("records")]
        return {"settings": records(self.settings), "verdicts": records(self.verdicts)}


def summarise(table: pd.DataFrame | None, confidence: float = CONFIDENCE) -> Summary:
    """:func:`settings` and :func:`verdicts` of one table."""
    return Summary(settings(table, confidence), verdicts(table, confidence))
