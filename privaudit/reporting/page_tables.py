"""The report page's tables of rows: the long trade-off table, a row per target and attack with
a tooltip where a cell has more to say (templates/tradeoff_table.html.j2), and the NoisyCGD
comparison (templates/defences.html.j2, from :mod:`privaudit.reporting.defences`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from privaudit.attacks.registry import REPORT_ORDER
from privaudit.core.config import DP_NAMES
from privaudit.core.formatting import slug
from privaudit.defences import FIELD_DEFENCES
from privaudit.reporting.defences import noisycgd_comparison
from privaudit.reporting.page_data import UNRANKED
from privaudit.reporting.page_numbers import DASH, f3, finite, integer, lb, lb3, pct, plain, short, upper_sig3

#: the defences whose knobs the table shows in columns of their own (κ, σ)
OWN_COLUMNS = tuple(dict.fromkeys(FIELD_DEFENCES + DP_NAMES))

Column = tuple[str, str, Callable[[Any], str], str]

#: the long table's columns a reader compares, shown by default: (header, column, formatter, css class)
_COMPARED: list[Column] = [
    ("setting", "_setting", plain, "txt"),
    ("seed", "seed", integer, "num"),
    ("ε", "epsilon", upper_sig3, "num"),
    ("test acc", "test_accuracy", f3, "num"),
    ("attack", "attack", plain, "txt"),
    ("AUC", "auc", f3, "num"),
    ("TPR @ 1% FPR", "tpr_at_1pct_fpr", f3, "num"),
    ("TPR @ 0.1% FPR", "tpr_at_0p1pct_fpr", f3, "num"),
    ("PPV @ 10% prior", "ppv_at_10pct_prior", f3, "num"),
    ("ε lb", "eps_lower_bound", lb, "num"),
    ("μ (GDP)", "gdp_mu", lb3, "num"),
    ("ε (GDP)", "gdp_epsilon", lb, "num"),
]
#: the columns shown on demand ("show all columns"), after the compared ones
_DETAILS: list[Column] = [
    ("target run", "target_run", plain, "txt"),
    ("source", "_source", plain, "txt"),
    ("defence", "defence", plain, "txt"),
    ("κ", "kappa", short, "num"),
    ("σ", "noise_multiplier", short, "num"),
    ("epochs", "epochs", integer, "num"),
    ("train acc", "train_accuracy", f3, "num"),
    ("attack acc", "accuracy", f3, "num"),
    ("precision", "precision", f3, "num"),
    ("recall", "recall", f3, "num"),
    ("threshold", "threshold", f3, "num"),
    ("advantage", "advantage", f3, "num"),
    ("members", "n_members", integer, "num"),
    ("non-members", "n_nonmembers", integer, "num"),
]
#: what a header of the long table says on hover: each measure in a sentence
_HEAD_TIPS = {
    "_setting": "the defence setting; hover a row's setting for its target run",
    "epsilon": "the accountant's ε (an upper bound) at δ, DP rows only",
    "auc": "area under the ROC curve, 0.5 = chance",
    "tpr_at_1pct_fpr": "share of members flagged at 1% false positives",
    "tpr_at_0p1pct_fpr": "share of members flagged at 0.1% false positives",
    "ppv_at_10pct_prior": "positive predictive value: the share of flagged records that are members if 10% of "
                          "the queried records were members (at the 1% FPR threshold other models set)",
    "eps_lower_bound": "empirical ε lower bound (Clopper–Pearson, 95%): what this attack proves",
    "gdp_mu": "Gaussian-DP μ lower bound (95%): a summary of the attack's whole trade-off curve",
    "gdp_epsilon": "the ε of that μ at δ: an estimate that holds only if the trade-off curve is Gaussian",
}


def _ci_text(lo: Any, hi: Any) -> str:
    """ "95% CI 0.001–0.016" (Clopper–Pearson) or "" when a side is missing."""
    if not (finite(lo) and finite(hi)):
        return ""
    return f"95% CI {f3(lo)}–{f3(hi)} (Clopper–Pearson)"


def eps_tip(r: Mapping[str, Any]) -> str:
    """The tooltip of an empirical ε lower bound: its δ, confidence and leave-one-out spread."""
    delta = f"δ={short(r['delta'])}" if finite(r["delta"]) else "the run's δ"
    tip = (f"empirical ε lower bound at {delta}, 95% confidence, threshold chosen on other "
           f"models than this target")
    if finite(r["loo_eps_lower_bound_mean"]):
        tip += (f"; leave-one-out over {integer(r['loo_n_targets'])} pool models: "
                f"{lb(r['loo_eps_lower_bound_mean'])} ± {f3(r['loo_eps_lower_bound_std'])}")
    return tip


def calibrated_tip(r: Mapping[str, Any]) -> str:
    """The operating points whose thresholds other models set (docs/methods/d-attacks.md D.9): the TPR at
    each FPR and the FPR it reached on this target, or why the data cannot state it."""
    from privaudit.analysis.operating import min_non_members

    parts = []
    if not finite(r.get("tpr_at_1pct_fpr_cal")):  # none computed (an attack without calibration data)
        return ""
    for level, key, rate in (("1%", "1pct", 0.01), ("0.1%", "0p1pct", 0.001), ("0.01%", "0p01pct", 0.0001)):
        tpr, fpr = r.get(f"tpr_at_{key}_fpr_cal"), r.get(f"fpr_at_{key}_cal")
        if finite(tpr):
            parts.append(f"{level}: TPR {f3(tpr)} (FPR reached {pct(fpr, 2)})")
        elif finite(r.get("n_nonmembers")) and r["n_nonmembers"] < min_non_members(rate):
            parts.append(f"{level}: too few non-members ({integer(r['n_nonmembers'])}, "
                         f"{integer(min_non_members(rate))} needed)")
    return ("thresholds set on other models: " + ", ".join(parts)) if parts else ""


def _cell_tip(r: pd.Series, col: str) -> str:
    """The tooltip of one cell of the long table (empty: none)."""
    if col == "epsilon" and finite(r["epsilon"]):
        return f"δ={short(r['delta'])}, accountant: {plain(r['accountant'])}"
    if col == "_setting":
        return f"{plain(r['target_run'])}: " + _cell_tip(r, "target_run")
    if col == "target_run":
        return f"part size {integer(r['part_size'])}, {plain(r['defence']) if r['dp'] else 'no DP'}"
    if col == "auc" and finite(r["auc_lo"]) and finite(r["auc_hi"]):
        return f"95% CI {f3(r['auc_lo'])}–{f3(r['auc_hi'])} (DeLong)"
    if col in ("tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr"):
        return "; ".join(t for t in (_ci_text(r[f"{col}_lo"], r[f"{col}_hi"]), calibrated_tip(r)) if t)
    if col == "ppv_at_10pct_prior" and finite(r.get("ppv_at_10pct_prior")):
        return (f"positive predictive value if 10% of the queried records were members, at the 1% FPR threshold "
                f"other models set: {f3(r['ppv_at_10pct_prior'])} (95% CI {f3(r.get('ppv_at_10pct_prior_lo'))}–"
                f"{f3(r.get('ppv_at_10pct_prior_hi'))}); at a 1% prior {f3(r.get('ppv_at_1pct_prior'))}")
    if col == "eps_lower_bound" and finite(r["eps_lower_bound"]):
        return eps_tip(r) + (f"; the threshold reached FPR {f3(r['eps_fpr'])} on this target"
                             if finite(r.get("eps_fpr")) else "")
    if col in ("gdp_mu", "gdp_epsilon") and finite(r.get("gdp_mu")):
        delta = f"δ={short(r['delta'])}" if finite(r["delta"]) else "the run's δ"
        return (f"Gaussian-DP lower bound on μ, 95% confidence (Clopper–Pearson on FPR and FNR), threshold "
                f"chosen on other models, FPR {f3(r['gdp_fpr'])} reached on this target; its ε at {delta} "
                "assumes a Gaussian trade-off curve (docs/methods/d-attacks.md D.6)")
    return ""


#: columns the long table shows only when some row has a value: the planted canaries' TPRs
#: (after the population's), and another defence's knob (on demand, after "defence")
_CANARY: list[Column] = [("canary TPR @ 1% FPR", "canary_tpr_at_1pct_fpr", f3, "num"),
                         ("canary TPR @ 0.1% FPR", "canary_tpr_at_0p1pct_fpr", f3, "num")]
_KNOB: Column = ("knob", "knob", short, "num")


def _spec(groups: list[tuple[str, str, pd.DataFrame]]) -> tuple[list[Column], list[Column]]:
    """The long table's (compared, on-demand) columns for these rows (:data:`_COMPARED`,
    :data:`_DETAILS`, plus the optional ones)."""
    def any_value(col: str, rows: Callable[[pd.DataFrame], pd.DataFrame] = lambda g: g) -> bool:
        return any(col in g and pd.to_numeric(rows(g)[col], errors="coerce").notna().any() for _, _, g in groups)

    def others(g: pd.DataFrame) -> pd.DataFrame:  # MG noise and DP show their knob in their own columns
        return g[~g["defence"].astype(str).isin(OWN_COLUMNS)] if "defence" in g else g

    compared, details = list(_COMPARED), list(_DETAILS)
    if any_value("canary_tpr_at_0p1pct_fpr"):
        at = [c for _, c, _, _ in compared].index("tpr_at_0p1pct_fpr") + 1
        compared[at:at] = _CANARY
    if any_value("knob", others):
        details.insert([c for _, c, _, _ in details].index("defence") + 1, _KNOB)
    return compared, details


#: the most rows the long table shows on the page; a larger audit's page shows the rows a
#: reader compares (:func:`condensed`), and the CSV beside the page holds every row
PAGE_ROWS = 300


def condensed(g: pd.DataFrame) -> pd.DataFrame:
    """The rows of one (model, dataset) group a reader compares: per target run, the paper's
    attack, the group's strongest attack (the one every view names,
    :func:`privaudit.reporting.summary.strongest_attack`) and the target's own strongest
    (an output-side defence's may be a label-only attack)."""
    from privaudit.analysis.metrics import STRONGEST_KEY
    from privaudit.analysis.metrics import strongest_attack as strongest_of
    from privaudit.reporting.summary import PAPER_ATTACK, strongest_attack

    group_best = strongest_attack(g)
    keep = pd.Series(False, index=g.index)
    for _, rows in g.groupby("_run", sort=False):
        own = strongest_of(rows.set_index("attack")[list(STRONGEST_KEY)].to_dict("index"))
        keep[rows.index] = rows["attack"].isin({PAPER_ATTACK, group_best, own})
    return g[keep]


def _with_setting(g: pd.DataFrame) -> pd.DataFrame:
    """``g`` with each row's setting named as everywhere on the page (the ε has its own column)."""
    from privaudit.reporting.summary import setting_label

    names = [setting_label(r.dp, r.kappa, r.noise_multiplier, defence=r.defence, knob=r.knob)
             for r in g[["dp", "kappa", "noise_multiplier", "defence", "knob"]].itertuples()]
    return g.assign(_setting=names)


def _table_rows(g: pd.DataFrame, columns: list[tuple[Column, bool]]) -> list[dict]:
    """One group's rows of the long table, the rows of one target striped alike; the first cell
    of the on-demand columns is of class ``more`` (report.css hides it and the cells after it)."""
    rows, prev_run, alt = [], None, True
    for _, r in g.iterrows():
        first = r["_run"] != prev_run
        if first:
            alt, prev_run = not alt, r["_run"]
        cells = []
        for (_, col, fmt, ccls), more in columns:
            text = fmt(r[col])
            cls = " ".join(c for c in (ccls, "missing" if text == DASH else "", "more" if more else "") if c)
            cells.append({"text": text, "cls": cls, "title": _cell_tip(r, col)})
        rows.append({"cls": " ".join(c for c in ("alt" if alt else "", "first" if first else "") if c),
                     "cells": cells})
    return rows


def tradeoff_table(groups: list[tuple[str, str, pd.DataFrame]], n_rows: int, n_targets: int,
                   limit: int = PAGE_ROWS) -> str:
    """The "Trade-off table" section, the long table: the columns a reader compares, the
    others (run names, knobs, counts, threshold metrics) behind a "show all columns" switch
    that needs no script. Past ``limit`` rows, each group shows its :func:`condensed` rows and
    the page says so."""
    from privaudit.reporting.templates import render

    if n_rows > limit:
        groups = [(m, d, condensed(g)) for m, d, g in groups]
    shown = sum(len(g) for _, _, g in groups)
    compared, details = _spec(groups)
    columns = [(c, False) for c in compared] + [(c, i == 0) for i, c in enumerate(details)]
    out = [{"slug": slug("g", model, dataset), "model": model, "dataset": dataset,
            "rows": _table_rows(_with_setting(g), columns)} for model, dataset, g in groups]
    head = [{"text": h, "cls": f"{cls} more" if more else cls, "title": _HEAD_TIPS.get(col, "")}
            for (h, col, _, cls), more in columns]
    return render("tradeoff_table.html.j2", head=head, groups=out, n_rows=n_rows, n_targets=n_targets, dash=DASH,
                  shown=shown, n_compared=len(compared), details=[h for h, _, _, _ in details])


def defences_section(table: pd.DataFrame) -> str:
    """NoisyCGD (convex-relu) beside DP-SGD (mlp) at equal ε and MG noise at equal accuracy."""
    comp = noisycgd_comparison(table)
    if comp.empty:
        return ""
    from privaudit.reporting.templates import render

    head = ["dataset", "attack", "P", "mlp width", "NoisyCGD σ", "ε", "NoisyCGD test acc", "DP-SGD test acc",
            "NoisyCGD AUC", "DP-SGD AUC", "MG AUC", "NoisyCGD TPR@0.1%", "DP-SGD TPR@0.1%", "MG TPR@0.1%"]
    comp = comp.assign(_rank=comp["attack"].map(REPORT_ORDER).fillna(UNRANKED)).sort_values(
        ["dataset", "_rank", "attack", "noise_multiplier"], kind="stable")
    rows = [[plain(r["dataset"]), plain(r["attack"]), integer(r["width"]), plain(r["mlp_width"]),
             short(r["noise_multiplier"]), upper_sig3(r["epsilon"]), f3(r["ncgd_test_accuracy"]),
             f3(r["dpsgd_test_accuracy"]), f3(r["ncgd_auc"]), f3(r["dpsgd_auc"]), f3(r["mg_auc"]),
             pct(r["ncgd_tpr_at_0p1pct_fpr"]), pct(r["dpsgd_tpr_at_0p1pct_fpr"]), pct(r["mg_tpr_at_0p1pct_fpr"])]
            for _, r in comp.iterrows()]
    return render("defences.html.j2", head=head, rows=rows, dash=DASH)
