"""One (model, dataset) section of the report page (templates/group.html.j2): its sentences
(:mod:`privaudit.reporting.page_findings`), the strongest-attacks part
(:mod:`privaudit.reporting.page_empirical`), the trade-off plots and their points, the
iso-accuracy comparison per attack and the ROC curves."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from privaudit.core.formatting import slug
from privaudit.reporting.curves import EXACT_FPR
from privaudit.reporting.page_data import VERDICT_CSS, attack_key, figure, fpr_floor, primary_attack
from privaudit.reporting.page_empirical import empirical_section
from privaudit.reporting.page_numbers import f3, finite, interval, upper_sig3
from privaudit.reporting.plots import line_plot
from privaudit.reporting.summary import setting_label

_ISO_METRICS = ("auc", "precision", "recall")
_METRIC_NAMES = {"auc": "AUC", "precision": "precision", "recall": "recall",
                 "accuracy": "attack accuracy", "advantage": "advantage"}


def _band(rows: pd.DataFrame, x: str, y: str, label: str) -> dict:
    """A line-plot series of summary rows with their 95 % intervals as error bars."""
    rows = rows.sort_values(x, kind="stable")
    return {"label": label, "x": rows[x], "y": rows[y], "y_lo": rows[f"{y}_lo"], "y_hi": rows[f"{y}_hi"]}


def _roc_series(g: pd.DataFrame, attack: str, rocs: Mapping[str, Any]) -> list[dict]:
    labels: list[tuple[str, str, Any]] = []
    for _, r in g[g["attack"] == attack].drop_duplicates("_run").iterrows():
        run = r["target_run"]
        per_run = rocs.get(run) if isinstance(run, str) else None
        if not isinstance(per_run, Mapping) or attack not in per_run:
            continue
        try:  # (fpr, tpr) -- a longer tuple such as sklearn's (fpr, tpr, thresholds) works too
            fpr, tpr = per_run[attack][0], per_run[attack][1]
        except (TypeError, IndexError, KeyError):
            continue
        label = setting_label(bool(r["dp"]), r["kappa"], r["noise_multiplier"], r["epsilon"], defence=r["defence"],
                              knob=r["knob"])
        labels.append((label, run, (fpr, tpr)))
    counts: dict[str, int] = {}
    for label, _, _ in labels:
        counts[label] = counts.get(label, 0) + 1
    return [{"label": label if counts[label] == 1 else f"{label} [{run}]", "x": np.asarray(fpr, dtype=float),
             "y": np.asarray(tpr, dtype=float), "markers": False} for label, run, (fpr, tpr) in labels]


def _tradeoff_figures(g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame, attack: str) -> list[dict]:
    """Accuracy and AUC over κ, and precision, recall and AUC against test accuracy for the MG
    and DP curves, every point a setting's mean with its 95 % interval."""
    mg_ov = ov[ov["family"].isin(["baseline", "MG noise"])] if len(ov) else ov
    figs = [figure(line_plot(
        [_band(mg_ov, "kappa", "test_accuracy", "test accuracy"), _band(mg_ov, "kappa", "train_accuracy",
                                                                          "train accuracy")],
        title="Accuracy vs MG noise κ", xlabel="κ (MG noise std)", ylabel="accuracy"),
        "Target accuracy over κ (runs without DP-SGD; κ = 0 is the baseline); bars: 95 % intervals.")]
    mg_st = st[st["family"].isin(["baseline", "MG noise"])] if len(st) else st
    by_attack = [_band(mg_st[mg_st["attack"] == a], "kappa", "auc", f"{a} attack")
                 for a in sorted(set(g["attack"]), key=attack_key)]
    figs.append(figure(line_plot(by_attack, title="Attack AUC vs MG noise κ", xlabel="κ (MG noise std)",
                                 ylabel="attack AUC"),
                       "Leakage over κ, one curve per attack (0.5 = chance); bars: 95 % intervals."))
    mg_pts, dp_pts = _curve_rows(st[st["attack"] == attack] if len(st) else st)
    for metric, name in (("precision", "precision"), ("recall", "recall"), ("auc", "AUC")):
        figs.append(figure(line_plot(
            [_band(mg_pts, "test_accuracy", metric, "MG noise (κ)"),
             _band(dp_pts, "test_accuracy", metric, "DP-SGD (σ)")],
            title=f"Attack {name} vs test accuracy", xlabel="target test accuracy", ylabel=f"{attack} attack {name}"),
            f"Privacy-utility trade-off ({attack} attack); both curves end at the undefended baseline when it has "
            f"been audited; bars: 95 % intervals (over seeds; with one seed, AUC's DeLong interval). Points are "
            f"listed below."))
    return figs


def _curve_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The MG curve (baseline and MG noise) and the DP curve (baseline and DP-SGD) of one
    attack's summary rows, each sorted by accuracy; a curve holding only the baseline is empty."""
    if rows.empty:
        return rows, rows
    fam = rows["family"]
    mg = rows[fam.isin(["baseline", "MG noise"])] if (fam == "MG noise").any() else rows.iloc[0:0]
    dp = rows[fam.isin(["baseline", "DP-SGD"])] if (fam == "DP-SGD").any() else rows.iloc[0:0]
    return (mg.sort_values("test_accuracy", kind="stable"), dp.sort_values("test_accuracy", kind="stable"))


def _points(st: pd.DataFrame, attack: str) -> list[dict]:
    """The rows of the "Points of the trade-off curves" table."""
    out = []
    mg, dp = _curve_rows(st[st["attack"] == attack] if len(st) else st)
    for curve, rows in (("MG noise", mg), ("DP-SGD", dp)):
        for _, p in rows.iterrows():
            def cell(m: str, fmt: Callable[[Any], str] = f3, p: pd.Series = p) -> dict:
                lo, hi = p.get(f"{m}_lo", math.nan), p.get(f"{m}_hi", math.nan)
                return {"value": fmt(p[m]), "ci": interval(lo, hi, fmt)}
            out.append({"curve": curve, "setting": p["setting"],
                        "cells": [{"value": upper_sig3(p["epsilon"]), "ci": ""}, cell("test_accuracy"),
                                  cell("precision"), cell("recall"), cell("auc")]})
    return out


def _iso_view(g: pd.DataFrame, comps: pd.DataFrame, verdict: dict) -> dict:
    """The per-attack iso-accuracy table: one row per attack, one cell per measure, read from
    the summary's comparisons."""
    shown = comps[comps["metric"].isin(_ISO_METRICS) & comps["gap"].notna()] if len(comps) else comps
    if shown.empty:
        text = verdict.get("text", "No iso-accuracy comparison: the attacks have no values to compare.")
        return {"rows": [], "none": text.removeprefix("No iso-accuracy comparison: "), "metrics": []}
    metrics = [m for m in _ISO_METRICS if (shown["metric"] == m).any()]
    rows = []
    for attack in sorted(set(shown["attack"]), key=lambda a: attack_key(str(a))):
        ca = comps[comps["attack"] == attack].set_index("metric")
        first = shown[shown["attack"] == attack].iloc[0]
        cells = []
        for m in metrics:
            c = ca.loc[m] if m in ca.index else None
            if c is None or not finite(c["gap"]):
                cells.append({"gap": "", "tip": c["reason"] if c is not None else ""})
                continue
            ci = f" [{c['gap_lo']:+.3f}, {c['gap_hi']:+.3f}]" if finite(c["gap_lo"]) else ""
            tip = (f"{_METRIC_NAMES.get(m, m)}: mean DP − MG {c['gap']:+.4f}{ci} ({c['interval']}) over test "
                   f"accuracy {c['acc_low']:.3f}–{c['acc_high']:.3f}" + (f"; {c['reason']}" if c["reason"] else ""))
            cells.append({"gap": f"{c['gap']:+.3f}", "ci": ci, "tip": tip, "verdict": c["verdict"],
                          "css": VERDICT_CSS.get(c["verdict"], "none")})
        rows.append({"attack": attack, "range": f"{first['acc_low']:.3f}–{first['acc_high']:.3f}", "cells": cells})
    return {"rows": rows, "metrics": [_METRIC_NAMES.get(m, m) for m in metrics], "none": ""}


def group_section(view: dict, rocs: Mapping[str, Any], extras: Any) -> str:
    """The section of one group, from its view (:func:`privaudit.reporting.page_findings.group_view`)."""
    from markupsafe import Markup

    from privaudit.reporting.templates import render

    model, dataset, g, st, ov = (view[k] for k in ("model", "dataset", "g", "st", "ov"))
    attack = primary_attack(g) or "shadow"
    roc = _roc_series(g, attack, rocs)
    fpr_lo = fpr_floor(g["n_nonmembers"])
    low_end = [{**s, "exact_below": EXACT_FPR} for s in roc]  # on log axes, the reported low FPRs drawn exactly
    roc_figs = [
        figure(line_plot(roc, title=f"ROC, {attack} attack", xlabel="false-positive rate",
                         ylabel="true-positive rate", x_range=(0, 1), y_range=(0, 1), diagonal=True),
               "Linear axes; dashed: chance."),
        figure(line_plot(low_end, title=f"ROC, {attack} attack (log-log)", xlabel="false-positive rate",
                         ylabel="true-positive rate", log_x=True, log_y=True, x_range=(fpr_lo, 1),
                         y_range=(fpr_lo, 1), diagonal=True),
               f"Log-log axes from FPR {fpr_lo:.2g}: the low-FPR regime where confident membership claims live; "
               "dashed: chance."),
    ]
    strongest = empirical_section(model, dataset, g, st, ov, rocs, extras)
    return render("group.html.j2", g={
        "slug": slug("g", model, dataset), "model": model, "dataset": dataset, "attack": attack,
        "verdict": view["verdict"], "baseline": view["baseline"], "empirical": view["empirical"],
        "strongest_part": Markup(strongest) if strongest else "",
        "figures": _tradeoff_figures(g, st, ov, attack), "points": _points(st, attack),
        "iso": _iso_view(g, view["comps"], view["verdict"]), "roc_figures": roc_figs})
