"""The report page's first screen (templates/first_screen.html.j2): per (model, dataset), the
verdicts of the summary's comparisons, the verdict figure (:mod:`privaudit.reporting.figures`,
inline SVG) and one row per defence setting."""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from privaudit.core.formatting import difference, slug
from privaudit.reporting.page_data import FAMILY_CSS, OTHER_CSS, VERDICT_CSS
from privaudit.reporting.page_numbers import DASH, f3, finite, interval, lb, num, pct, upper_sig3
from privaudit.reporting.summary import Summary

MEASURES = {"auc": "AUC", "tpr_at_0p1pct_fpr": "TPR at 0.1% FPR", "eps_lower_bound": "empirical ε lower bound"}
_METHOD_NOTE = (
    "Intervals are 95 %. With two or more seeds (--seeds), every number is the mean over seeds with "
    "Student's t interval over seeds; each seed re-draws the data split and all training randomness. "
    "With one seed, a number's interval covers only the sampling of the audited records: DeLong for AUC, "
    "Clopper–Pearson for test accuracy and TPR, none for the ε lower bound (itself a one-sided 95 % "
    "bound). The verdict compares DP-SGD with MG noise at equal test accuracy: both curves interpolated "
    "over the accuracies where both defences have settings of their own on either side (the overlap of "
    "the ranges of their κ and σ settings; the undefended baseline is a point of both curves but never "
    "ends the range, so neither defence is stood in for by a line towards no defence; no verdict where "
    "the ranges do not meet), DP − MG averaged over it (per seed, then a t interval "
    "over seeds; with one seed, a bootstrap over the sampling of every point). It names a defence "
    "only when the difference is significant at 5 % family-wise, Holm–Bonferroni over the group's comparisons "
    "(each two-sided p-value read back from its interval); the intervals shown are each row's own 95 % interval. "
    "Higher = more leakage, so DP − MG > 0 means MG noise leaks less.")


def _familywise_note(r: pd.Series) -> str:
    """The row's adjusted p-value in words, and, where the row's own interval named a defence that
    the family-wise test does not, that it did ("" without a test)."""
    from privaudit.analysis.familywise import p_text

    adj = r.get("p_adjusted")
    if adj is None or not finite(adj):
        return ""
    text = f"Holm over {int(r['comparisons'])}: {p_text(adj, 'adjusted p')}" if r["comparisons"] > 1 else p_text(adj)
    if r.get("row_verdict") != r["verdict"]:
        text += f"; its own interval alone: {r['row_verdict']}"
    return text


def first_screen(summary: Summary, figures: list) -> str:
    """The verdict, its figure and one row per setting, for every (model, dataset)."""
    from markupsafe import Markup

    from privaudit.reporting.templates import render

    svgs = {f.stem: f for f in figures}

    groups = []
    st, vd = summary.settings, summary.verdicts
    for (model, dataset), g in st.groupby(["model", "dataset"], sort=True):
        v = vd[(vd["model"] == model) & (vd["dataset"] == dataset)] if len(vd) else vd
        strongest = next((a for a in v["attack"][v["comparison"] == "strongest attack"]), None) if len(v) else None
        verdicts = []
        for _, r in v.iterrows():
            gap, ci = difference(r["metric"], r["gap"], r["gap_lo"], r["gap_hi"])
            verdicts.append({
                "comparison": r["comparison"], "attack": r["attack"], "measure": MEASURES.get(r["metric"], r["metric"]),
                "accuracy": f"{f3(r['acc_low'])}–{f3(r['acc_high'])}" if finite(r["acc_low"]) else DASH,
                "gap": gap, "interval": f"{ci} {r['interval']}" if ci else r["interval"],
                "verdict": r["verdict"], "css": VERDICT_CSS.get(r["verdict"], "none"), "reason": r["reason"],
                "familywise": _familywise_note(r)})
        rows = []
        paper = g[g["attack"] == "shadow"].set_index("setting")
        best = g[g["attack"] == strongest].set_index("setting") if strongest else g.iloc[0:0].set_index("setting")
        per_setting = g.drop_duplicates("setting").set_index("setting")  # accuracy: one value per setting
        for name, s in per_setting.iterrows():
            def cell(frame: pd.DataFrame, metric: str, fmt: Callable[[Any], str] = f3, name: Any = name) -> dict:
                if name not in frame.index:
                    return {"value": DASH, "ci": ""}
                r = frame.loc[name]
                ci_fmt = (lambda x: f"{num(x):.2f}") if metric == "eps_lower_bound" else fmt
                return {"value": fmt(r[metric]), "ci": interval(r[f"{metric}_lo"], r[f"{metric}_hi"], ci_fmt)}
            rows.append({"name": name, "css": FAMILY_CSS.get(s["family"], OTHER_CSS), "seeds": int(s["n_seeds"]),
                         "cells": [cell(per_setting, "test_accuracy"), cell(paper, "auc"),
                                   cell(best, "tpr_at_0p1pct_fpr", lambda x: pct(x, 2)), cell(best, "eps_lower_bound", lb)],
                         "epsilon": upper_sig3(s["epsilon"])})
        fig = svgs.get(slug("verdict", model, dataset))
        groups.append({"model": model, "dataset": dataset, "slug": slug("v", model, dataset), "verdicts": verdicts,
                       "figure": Markup(fig.svg) if fig else None,  # matplotlib's own SVG: no script, no link
                       "figure_files": f"reports/figures/{fig.stem}.pdf and .png" if fig else "",
                       "no_verdict": "No comparison: only one defence family was audited.",
                       "strongest": strongest or DASH, "settings": rows})
    return render("first_screen.html.j2", groups=groups, method=_METHOD_NOTE)
