"""NoisyCGD next to DP-SGD at equal ε, and next to MG noise at equal accuracy (pure pandas).

docs/methods/b-hidden-state.md B reports NoisyCGD on the convex two-layer ReLU approximation (``convex-relu``) on
par with DP-SGD on a two-layer ReLU network (``mlp``) at the same ε. The report puts both
on one line per NoisyCGD setting and attack, against the mlp rows whose width equals the
convex model's number of gate vectors P where such rows exist (else every mlp width,
named in ``mlp_width``):

* DP-SGD at equal ε: the ``mlp`` DP-SGD rows of the same dataset give points (ε, metric),
  interpolated linearly in log ε at the NoisyCGD setting's ε, only inside their ε range
  (no extrapolation: outside it the cells stay empty; within 2 % of an end of the range,
  that end's values);
* MG noise at equal accuracy: the ``mlp`` rows without DP (baseline and MG κ) give points
  (test accuracy, metric), interpolated at the NoisyCGD setting's test accuracy, inside
  their accuracy range only (within 0.005 of an end, that end's values).

Points with the same x are averaged first. Both sides use ε under replace-one adjacency,
the notion of the hidden-state bound: the ``epsilon_replace_one`` column (for DP-SGD the
exact replace-one ε of dp_accounting's PLD accountant; a table without it leaves the DP-SGD
cells empty rather than compare ε of different adjacencies).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.reporting.table import as_bool

METRICS = ("test_accuracy", "auc", "tpr_at_0p1pct_fpr")
COLUMNS = ["dataset", "attack", "width", "noise_multiplier", "epsilon", "mlp_width",
           "ncgd_test_accuracy", "ncgd_auc", "ncgd_tpr_at_0p1pct_fpr",
           "dpsgd_test_accuracy", "dpsgd_auc", "dpsgd_tpr_at_0p1pct_fpr",
           "mg_auc", "mg_tpr_at_0p1pct_fpr"]


# How far outside the other defence's audited range still counts as "the same": 2 % in ε
# (calibration stops just below a target ε), 0.005 in test accuracy.
EPS_TOLERANCE = np.log(1.02)
ACC_TOLERANCE = 0.005


def _interp(x: pd.Series, y: pd.Series, at: float, log: bool = False) -> float:
    df = pd.DataFrame({"x": pd.to_numeric(x, errors="coerce"), "y": pd.to_numeric(y, errors="coerce")}).dropna()
    if log:
        df = df[df["x"] > 0]
        df["x"] = np.log(df["x"])
        at = np.log(at) if at > 0 else np.nan
    if df.empty or not np.isfinite(at):
        return float("nan")
    pts = df.groupby("x", sort=True)["y"].mean()
    xs, ys = pts.index.to_numpy(dtype=float), pts.to_numpy(dtype=float)
    tol = EPS_TOLERANCE if log else ACC_TOLERANCE
    if at < xs[0] - tol or at > xs[-1] + tol:
        return float("nan")
    return float(np.interp(at, xs, ys))  # within the tolerance outside: the nearest end


def noisycgd_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, attack, NoisyCGD setting); see the module docstring."""
    if table is None or table.empty or "defence" not in table:
        return pd.DataFrame(columns=COLUMNS)
    t = table.copy()
    t["dp"] = as_bool(t["dp"]).to_numpy()
    if "width" not in t:
        t["width"] = np.nan
    ncgd = t[(t["model"] == "convex-relu") & (t["defence"].astype(str) == "noisycgd")]
    rows = []
    for (dataset, attack, width), g in ncgd.groupby(["dataset", "attack", "width"], sort=True, dropna=False):
        mlp = t[(t["model"] == "mlp") & (t["dataset"] == dataset) & (t["attack"] == attack)]
        matching = mlp[pd.to_numeric(mlp["width"], errors="coerce") == width]
        mlp = matching if not matching.empty else mlp  # the mlp of matching width where audited
        dpsgd = mlp[mlp["dp"] & (mlp["defence"].astype(str) == "dpsgd")]
        plain = mlp[~mlp["dp"]]
        settings = g.groupby("noise_multiplier", sort=True)[["epsilon", *METRICS]].mean()
        dp_eps = dpsgd["epsilon_replace_one"] if "epsilon_replace_one" in dpsgd else pd.Series(np.nan, dpsgd.index)
        for sigma, s in settings.iterrows():
            widths = sorted(pd.to_numeric(mlp["width"], errors="coerce").dropna().unique())
            row = {"dataset": dataset, "attack": attack, "width": width, "noise_multiplier": float(sigma),
                   "epsilon": float(s["epsilon"]), "mlp_width": ",".join(f"{w:g}" for w in widths)}
            for m in METRICS:
                row[f"ncgd_{m}"] = float(s[m])
                row[f"dpsgd_{m}"] = _interp(dp_eps, dpsgd[m], row["epsilon"], log=True)
            for m in ("auc", "tpr_at_0p1pct_fpr"):
                row[f"mg_{m}"] = _interp(plain["test_accuracy"], plain[m], row["ncgd_test_accuracy"])
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)
