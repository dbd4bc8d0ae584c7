"""The report page's first screen (templates/first_screen.html.j2): per (model, dataset), the
verdicts of the summary's comparisons, the verdict figure (:mod:`privaudit.reporting.figures`,
inline SVG) and one row per defence setting."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from privaudit.core.formatting import bounds, detectable, difference, slug
from privaudit.reporting.page_data import FAMILY_CSS, OTHER_CSS, VERDICT_CSS
from privaudit.reporting.page_numbers import DASH, f3, finite, interval, lb, num, pct, upper_sig3
from privaudit.reporting.summary import PAPER_ATTACK, Summary

MEASURES = {"auc": "AUC", "tpr_at_0p1pct_fpr": "TPR at 0.1% FPR", "eps_lower_bound": "empirical ε lower bound",
            "gdp_mu": "Gaussian-DP μ"}
_METHOD_NOTE = (
    "Intervals are 95 %. With two or more seeds (--seeds), every number is the mean over seeds with "
    "Student's t interval over seeds; each seed re-draws the data split and all training randomness. "
    "With one seed, a number's interval covers only the sampling of the audited records: DeLong for AUC, "
    "Clopper–Pearson for test accuracy and TPR, none for the ε lower bound (itself a one-sided 95 % "
    "bound). μ's interval is over the setting's reference-pool models, each attacked with the others as "
    "references (a jackknife over the pool's pairs; with seeds, over seeds). The verdict compares DP-SGD "
    "with MG noise at equal test accuracy: both curves interpolated "
    "over the accuracies where both defences have settings of their own on either side (the overlap of "
    "the ranges of their κ and σ settings; the undefended baseline is a point of both curves but never "
    "ends the range, so neither defence is stood in for by a line towards no defence; no verdict where "
    "the ranges do not meet), DP − MG averaged over it (per seed, then a t interval "
    "over seeds; with one seed, a bootstrap over the pools' models, or without pools over the sampling of "
    "every point). It names a defence "
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


def _verdict_row(r: pd.Series) -> dict:
    """One verdict as the first screen shows it: the difference with its interval and the
    replicates behind it, the verdict, and how large a difference it could have detected."""
    gap, ci = difference(r["metric"], r["gap"], r["gap_lo"], r["gap_hi"])
    n = r.get("n_models")
    replicates = f"{int(n)} replicate{'s' if int(n) != 1 else ''} per defence" if finite(n) and int(n) > 0 else ""
    could = detectable(r["metric"], r.get("detectable"))
    return {"comparison": r["comparison"], "attack": r["attack"], "measure": MEASURES.get(r["metric"], r["metric"]),
            "accuracy": f"{f3(r['acc_low'])}–{f3(r['acc_high'])}" if finite(r["acc_low"]) else DASH,
            "gap": gap, "interval": f"{ci} {r['interval']}" if ci else r["interval"], "replicates": replicates,
            "verdict": r["verdict"], "css": VERDICT_CSS.get(r["verdict"], "none"), "reason": r["reason"],
            "detectable": f"(could detect {could})" if could else "",
            "familywise": _familywise_note(r)}


def mu_cells(o: Mapping[str, Any] | None, best: pd.Series | None) -> list[dict]:
    """A setting's μ of the strongest attack and its ε (GDP), each with its 95 % interval:
    over the setting's pool models (the overview's ``pool_*_strongest``) where it has them,
    else over its seeds (the strongest attack's settings row). μ (a mean of lower bounds)
    and the lower ends are rounded down, the upper ends up."""
    if o is not None and finite(o.get("pool_mu_strongest")):
        n = int(num(o["pool_n_strongest"]))
        over = f"over {n} model{'s' if n != 1 else ''}"
        mu, eps = (o["pool_mu_strongest"], o["pool_mu_strongest_lo"], o["pool_mu_strongest_hi"]), (
            o["pool_mu_epsilon_strongest"], o["pool_mu_epsilon_strongest_lo"], o["pool_mu_epsilon_strongest_hi"])
    elif best is not None and finite(best.get("gdp_mu")):
        seeds = int(num(best.get("n_seeds", 1)))
        over = f"over {seeds} seeds" if seeds > 1 else "one target"
        mu = (best["gdp_mu"], best.get("gdp_mu_lo"), best.get("gdp_mu_hi"))
        eps = (best["gdp_epsilon"], best.get("gdp_epsilon_lo"), best.get("gdp_epsilon_hi"))
    else:
        return [{"value": DASH, "ci": ""}, {"value": DASH, "ci": ""}]
    return [{"value": lb(mu[0]), "ci": " ".join(t for t in (bounds(mu[1], mu[2]), over) if t)},
            {"value": lb(eps[0]), "ci": bounds(eps[1], eps[2])}]


def first_screen(summary: Summary, figures: list) -> str:
    """The verdict, its figure and one row per setting, for every (model, dataset)."""
    from markupsafe import Markup

    from privaudit.reporting.templates import render

    svgs = {f.stem: f for f in figures}

    groups = []
    st, vd, ov = summary.settings, summary.verdicts, summary.overview
    for (model, dataset), g in st.groupby(["model", "dataset"], sort=True):
        v = vd[(vd["model"] == model) & (vd["dataset"] == dataset)] if len(vd) else vd
        strongest = next((a for a in v["attack"][v["comparison"] == "strongest attack"]), None) if len(v) else None
        paper_attack = (next((a for a in v["attack"][v["comparison"] == "paper's attack"]), PAPER_ATTACK) if len(v)
                        else PAPER_ATTACK)
        o = ov[(ov["model"] == model) & (ov["dataset"] == dataset)].drop_duplicates("setting").set_index("setting")
        strongest = strongest or next((a for a in o["strongest"] if isinstance(a, str)), None)
        rows = []
        paper = g[g["attack"] == paper_attack].set_index("setting")
        best = g[g["attack"] == strongest].set_index("setting") if strongest else g.iloc[0:0].set_index("setting")
        per_setting = g.drop_duplicates("setting").set_index("setting")  # accuracy: one value per setting
        for name, s in per_setting.iterrows():
            def cell(frame: pd.DataFrame, metric: str, fmt: Callable[[Any], str] = f3, name: Any = name) -> dict:
                if name not in frame.index:
                    return {"value": DASH, "ci": ""}
                r = frame.loc[name]
                ci = bounds(r[f"{metric}_lo"], r[f"{metric}_hi"]) if metric == "eps_lower_bound" else interval(
                    r[f"{metric}_lo"], r[f"{metric}_hi"], fmt)
                return {"value": fmt(r[metric]), "ci": ci}
            mu = mu_cells(o.loc[name] if name in o.index else None, best.loc[name] if name in best.index else None)
            rows.append({"name": name, "css": FAMILY_CSS.get(s["family"], OTHER_CSS), "seeds": int(s["n_seeds"]),
                         "cells": [*mu, cell(per_setting, "test_accuracy"), cell(paper, "auc"),
                                   cell(best, "tpr_at_0p1pct_fpr", lambda x: pct(x, 2)),
                                   cell(best, "eps_lower_bound", lb)],
                         "epsilon": upper_sig3(s["epsilon"])})
        fig = svgs.get(slug("verdict", model, dataset))
        groups.append({"model": model, "dataset": dataset, "slug": slug("v", model, dataset),
                       "verdicts": [_verdict_row(r) for _, r in v.iterrows()],
                       "figure": Markup(fig.svg) if fig else None,  # matplotlib's own SVG: no script, no link
                       "figure_files": f"reports/figures/{fig.stem}.pdf and .png" if fig else "",
                       "no_verdict": "No comparison: only one defence family was audited.",
                       "strongest": strongest or DASH, "paper": paper_attack, "settings": rows})
    return render("first_screen.html.j2", groups=groups, method=_METHOD_NOTE)
