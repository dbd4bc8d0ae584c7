"""The page's "Which defence at your accuracy" section (templates/at_accuracy.html.j2): per
(model, dataset) and target accuracy a row per defence searched to it
(:mod:`privaudit.reporting.at_accuracy`), with the measure its verdicts compare (μ over the
settings' pool models, else TPR at 0.1 % FPR), and a Pareto plot of every defence setting the
audit holds: the strongest attack's TPR at 0.1 % FPR against test accuracy, with intervals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from privaudit.core.formatting import bounds, slug
from privaudit.reporting.at_accuracy import MEASURES, MU, other_defences_audited, pareto_series
from privaudit.reporting.page_data import figure
from privaudit.reporting.page_numbers import DASH, f3, finite, integer, interval, lb, pct
from privaudit.reporting.plots import line_plot

if TYPE_CHECKING:
    from privaudit.reporting.summary import Summary


def _pp(v) -> str:
    return f"{v:+.1f} pp" if finite(v) else DASH


def _with_interval(v, lo, hi, fmt) -> dict:
    """A value and its interval, the template's cell (the interval drawn under the value)."""
    return {"value": fmt(v), "ci": interval(lo, hi, fmt)}


def _mu_cell(r) -> dict:
    """A row's μ over its setting's pool models where its verdict compares μ: the mean rounded
    down, its 95 % interval over the models (ends rounded outwards) and over how many."""
    if r["measure"] != MEASURES[MU] or not finite(r["strong_mu"]):
        return {"value": DASH, "ci": ""}
    return {"value": lb(r["strong_mu"]), "ci": bounds(r["strong_mu_lo"], r["strong_mu_hi"]),
            "over": f"over {integer(r['n_models'])} models"}


def at_accuracy_section(summary: Summary) -> str:
    """The section's HTML, or "" when the audit has neither accuracy targets nor any defence
    beside the baseline, MG noise and DP."""
    from privaudit.reporting.templates import render

    at = summary.at_accuracy if summary.at_accuracy is not None else pd.DataFrame()
    ov = summary.overview
    if at.empty and not other_defences_audited(ov):
        return ""
    groups = []
    keys = sorted({(str(m), str(d)) for m, d in zip(ov["model"], ov["dataset"])}) if len(ov) else []
    for model, dataset in keys:
        targets = []
        rows = at[(at["model"] == model) & (at["dataset"] == dataset)] if len(at) else at
        for target, g in (rows.groupby("target_accuracy", sort=False) if len(rows) else []):
            body = []
            for _, r in g.iterrows():
                reached = finite(r["test_accuracy"])
                why = (r["status"] if not reached else "")
                if why.startswith("cannot reach") or why == "not reached":
                    lo, hi = r["accuracy_range_lo"], r["accuracy_range_hi"]
                    why = f"{why} (its accuracies {f3(lo)}–{f3(hi)} over the settings tried)"
                body.append({
                    "defence": r["defence"], "setting": r["setting"] if reached else why,
                    "acc": _with_interval(r["test_accuracy"], r["test_accuracy_lo"], r["test_accuracy_hi"], f3)
                    if reached else {"value": DASH, "ci": ""},
                    "strong01": _with_interval(r["strong_tpr_at_0p1pct_fpr"], r["strong_tpr_at_0p1pct_fpr_lo"],
                                               r["strong_tpr_at_0p1pct_fpr_hi"], pct),
                    "strong1": _with_interval(r["strong_tpr_at_1pct_fpr"], r["strong_tpr_at_1pct_fpr_lo"],
                                              r["strong_tpr_at_1pct_fpr_hi"], pct),
                    "weak01": _with_interval(r["weak_tpr_at_0p1pct_fpr"], r["weak_tpr_at_0p1pct_fpr_lo"],
                                             r["weak_tpr_at_0p1pct_fpr_hi"], pct),
                    "canary01": _with_interval(r["canary_tpr_at_0p1pct_fpr"], r["canary_tpr_at_0p1pct_fpr_lo"],
                                               r["canary_tpr_at_0p1pct_fpr_hi"], pct),
                    "mu": _mu_cell(r), "over": _pp(r["overstated_pp"]), "verdict": r["verdict"] or DASH,
                    "reached": reached})
            strong = next((a for a in g["strong_attack"] if isinstance(a, str) and a), "")
            canaries = bool(g["canary_tpr_at_0p1pct_fpr"].notna().any())
            correction = next((c for c in g["correction"] if isinstance(c, str) and c), "")
            measure = next((m for m in g["measure"] if isinstance(m, str) and m), "")
            targets.append({"target": f"{float(target):.3f}", "rows": body, "strong": strong, "canaries": canaries,
                            "correction": correction, "by_mu": measure == MEASURES[MU], "measure": measure})
        series = pareto_series(ov, summary.settings, model, dataset)
        plot = figure(line_plot(series, title="Leakage against accuracy, every defence setting",
                                xlabel="test accuracy", ylabel="TPR at 0.1 % FPR (%), strongest attack"),
                      "Each point a defence setting (mean over seeds), its bar the 95 % interval of the strongest "
                      "attack's TPR at 0.1 % FPR; one line per defence through its settings. Lower and to the "
                      "right is better: less leakage at more accuracy.") if series else None
        groups.append({"id": slug("acc", model, dataset), "model": model, "dataset": dataset, "targets": targets,
                       "plot": plot})
    return render("at_accuracy.html.j2", groups=groups)
