"""A slow, direct reference of the iso-accuracy comparison, for the tests of
:func:`privaudit.reporting.summary.iso_gap` (the vectorised one the reports use).

Both defences trade test accuracy for privacy. To compare them fairly we compare their
leakage *at equal test accuracy*: each defence gives a curve of (test accuracy, leakage
metric) points -- MG noise over kappa, DP-SGD over sigma -- and both curves are linearly
interpolated on a common grid of accuracies spanning the overlap of their accuracy ranges.

Curves, per (model, dataset, attack):

* MG noise: every row with ``dp == False`` (this includes the undefended baseline,
  kappa = 0);
* DP-SGD: every row with ``dp == True`` plus the undefended baseline row(s)
  (``kappa == 0`` -- a missing kappa counts as 0 -- and not dp) as the zero-noise
  limit of DP-SGD.

Points with the same accuracy are averaged before interpolating.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.reporting.table import as_bool

GROUP_KEYS = ["model", "dataset", "attack"]
ISO_COLUMNS = ["model", "dataset", "attack", "metric", "test_accuracy", "mg", "dp",
               "dp_minus_mg"]
SUMMARY_COLUMNS = ["model", "dataset", "attack", "metric", "acc_low", "acc_high",
                   "mean_dp_minus_mg", "leaks_less"]


def _points(acc: pd.Series, val: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique accuracies and the metric averaged per accuracy (NaNs dropped)."""
    df = pd.DataFrame({"acc": pd.to_numeric(acc, errors="coerce"),
                       "val": pd.to_numeric(val, errors="coerce")}).dropna()
    if df.empty:
        return np.empty(0), np.empty(0)
    g = df.groupby("acc", sort=True)["val"].mean()
    return g.index.to_numpy(dtype=float), g.to_numpy(dtype=float)


def split_curves(group: pd.DataFrame, metric: str
                 ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The MG and the DP curve of one group as ``((acc, val), (acc, val))``, each sorted
    by accuracy with duplicate accuracies averaged."""
    if metric not in group.columns or "test_accuracy" not in group.columns or group.empty:
        empty = (np.empty(0), np.empty(0))
        return empty, empty
    dp = as_bool(group["dp"]).to_numpy() if "dp" in group.columns else np.zeros(len(group), bool)
    kappa = (pd.to_numeric(group["kappa"], errors="coerce").to_numpy()
             if "kappa" in group.columns else np.full(len(group), np.nan))
    mg_rows = group[~dp]
    dp_rows = group[dp | ((~dp) & (np.nan_to_num(kappa) == 0))]
    return (_points(mg_rows["test_accuracy"], mg_rows[metric]),
            _points(dp_rows["test_accuracy"], dp_rows[metric]))


def iso_accuracy(table: pd.DataFrame, metric: str, grid_points: int = 25) -> pd.DataFrame:
    """Both defences' ``metric`` interpolated at equal test accuracy.

    For each (model, dataset, attack) group the MG and the DP curve (see the module
    docstring) are interpolated with ``np.interp`` on ``grid_points`` evenly spaced
    accuracies spanning the overlap of the two curves' accuracy ranges.

    Returns a tidy DataFrame with columns model, dataset, attack, metric, test_accuracy
    (the grid value), mg, dp and dp_minus_mg (= dp - mg). For leakage metrics (auc,
    accuracy, precision, recall, advantage, tpr_at_1pct_fpr, ...) a positive dp_minus_mg
    means DP-SGD leaks more than MG noise at that test accuracy.

    Groups whose accuracy ranges do not overlap, or with fewer than 2 distinct
    accuracies on a side, contribute no rows.
    """
    rows: list[pd.DataFrame] = []
    if table is None or table.empty or metric not in table.columns:
        return pd.DataFrame(columns=ISO_COLUMNS)
    grid_points = max(2, int(grid_points))
    keyed = table.copy()
    for k in GROUP_KEYS:
        if k not in keyed.columns:
            keyed[k] = "?"
        keyed[k] = keyed[k].astype(object).where(keyed[k].notna(), "?")
    for (model, dataset, attack), g in keyed.groupby(GROUP_KEYS, sort=True):
        (mg_acc, mg_val), (dp_acc, dp_val) = split_curves(g, metric)
        if len(mg_acc) < 2 or len(dp_acc) < 2:
            continue
        lo = max(mg_acc[0], dp_acc[0])
        hi = min(mg_acc[-1], dp_acc[-1])
        if not hi > lo:
            continue
        grid = np.linspace(lo, hi, grid_points)
        mg = np.interp(grid, mg_acc, mg_val)
        dpv = np.interp(grid, dp_acc, dp_val)
        rows.append(pd.DataFrame({
            "model": model, "dataset": dataset, "attack": attack, "metric": metric,
            "test_accuracy": grid, "mg": mg, "dp": dpv, "dp_minus_mg": dpv - mg,
        }))
    if not rows:
        return pd.DataFrame(columns=ISO_COLUMNS)
    return pd.concat(rows, ignore_index=True)[ISO_COLUMNS]


def iso_summary(iso_df: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, dataset, attack, metric) of an :func:`iso_accuracy` result
    (several metrics may be concatenated).

    Columns: acc_low and acc_high (the compared accuracy range), mean_dp_minus_mg (the
    mean of DP - MG over the evenly spaced grid, i.e. the average gap over the range) and
    leaks_less. A positive mean_dp_minus_mg means DP-SGD leaks more at equal accuracy, so
    leaks_less is "MG noise" when it is > 0, "DP-SGD" when it is < 0 (and "tie" when it is
    exactly 0). This reading assumes a metric where higher = more leakage (auc, accuracy,
    precision, recall, advantage, tpr_at_1pct_fpr, tpr_at_0p1pct_fpr).
    """
    if iso_df is None or iso_df.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    keys = GROUP_KEYS + ["metric"]
    out = (iso_df.groupby(keys, sort=True)
           .agg(acc_low=("test_accuracy", "min"), acc_high=("test_accuracy", "max"),
                mean_dp_minus_mg=("dp_minus_mg", "mean"))
           .reset_index())
    out["leaks_less"] = np.where(out["mean_dp_minus_mg"] > 0, "MG noise",
                                 np.where(out["mean_dp_minus_mg"] < 0, "DP-SGD", "tie"))
    return out[SUMMARY_COLUMNS]
