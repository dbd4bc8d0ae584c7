"""The "Strongest attacks and empirical ε" part of a (model, dataset) section
(templates/strongest.html.j2): one row per defence setting with every attack a column, the
empirical-ε figures (the bound against accuracy, the accountant's ε against the empirical one,
the log-log ROC of every attack) and the exposure of classes and samples."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privaudit.core.formatting import slug
from privaudit.reporting.curves import EXACT_FPR
from privaudit.reporting.page_data import (
    FAMILY_CSS,
    OTHER_CSS,
    attack_key,
    attack_rows,
    extras_of,
    figure,
    fpr_floor,
    has_empirical,
    setting_name,
)
from privaudit.reporting.page_numbers import (
    DASH,
    f3,
    finite,
    integer,
    interval,
    lb,
    num,
    pct,
    plain,
    short,
    sig3,
    upper_sig3,
)
from privaudit.reporting.page_tables import eps_tip
from privaudit.reporting.plots import line_plot

_CLASS_NAMES = {
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                "ship", "truck"),
    "digits": tuple(str(i) for i in range(10)),
    "mnist": tuple(str(i) for i in range(10)),
    "svhn": tuple(str(i) for i in range(10)),
    "fashionmnist": ("T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                     "ankle boot"),
}


def _one_run_tip(info: Mapping) -> str:
    if not info:
        return "one-run canary audit (Steinke, Nasr & Jagielski 2023)"
    conf = num(info.get("confidence"))
    return (f"one-run canary audit: {integer(info.get('num_correct'))} of "
            f"{integer(info.get('num_guesses'))} guesses correct, "
            f"{integer(info.get('num_canaries'))} canaries ({integer(info.get('num_included'))} "
            f"included), score {plain(info.get('score'))}, δ={short(info.get('delta'))}, "
            f"{pct(conf, 0) if math.isfinite(conf) else '?'} confidence; canary model "
            f"{plain(info.get('canary_run'))}")


def _attack_tip(name: str, r: pd.Series) -> str:
    parts = [f"{name}: AUC {f3(r['auc'])}",
             f"TPR @ 0.1% FPR {pct(r['tpr_at_0p1pct_fpr'])}"]
    if finite(r["tpr_at_0p1pct_fpr_lo"]) and finite(r["tpr_at_0p1pct_fpr_hi"]):
        parts[-1] += (f" (95% CI {pct(r['tpr_at_0p1pct_fpr_lo'])}–"
                      f"{pct(r['tpr_at_0p1pct_fpr_hi'])})")
    parts.append(f"TPR @ 1% FPR {pct(r['tpr_at_1pct_fpr'])}")
    if finite(r["tpr_at_1pct_fpr_lo"]) and finite(r["tpr_at_1pct_fpr_hi"]):
        parts[-1] += (f" (95% CI {pct(r['tpr_at_1pct_fpr_lo'])}–"
                      f"{pct(r['tpr_at_1pct_fpr_hi'])})")
    parts.append(f"empirical ε ≥ {lb(r['eps_lower_bound'])}")
    if finite(r["loo_auc_mean"]):
        parts.append(f"leave-one-out AUC {f3(r['loo_auc_mean'])} ± {f3(r['loo_auc_std'])} "
                     f"over {integer(r['loo_n_targets'])} pool models")
    return "; ".join(parts)


def _class_name(dataset: str, c: Any) -> str:
    names = _CLASS_NAMES.get(re.sub(r"[^a-z0-9]", "", str(dataset).lower()))
    try:
        i = int(c)
    except (TypeError, ValueError):
        return str(c)
    if names and 0 <= i < len(names):
        return names[i]
    return str(i)


def _empirical_rows(st: pd.DataFrame, ov: pd.DataFrame, attacks: list[str], extras: Any) -> list[dict]:
    """The rows of the strongest-attacks table (templates/strongest.html.j2), one per setting."""
    missing = {"cls": "num missing", "text": DASH}
    out = []
    for _, o in ov.iterrows():
        att = attack_rows(st, o)
        info = next((ex for run in o["runs"] if (ex := extras_of(extras, run, "one_run"))), {})
        cells: list[dict[str, Any]] = [{"cls": "num", "text": f3(o["test_accuracy"]),
                                        "sub": interval(o["test_accuracy_lo"], o["test_accuracy_hi"], f3)}]
        if o["dp"] and finite(o["epsilon"]):
            cells.append({"cls": "num", "text": upper_sig3(o["epsilon"]), "title": f"accountant upper bound at "
                                                                                f"δ={short(o['delta'])}"})
        elif o["dp"]:
            cells.append(missing)
        else:
            cells.append({"cls": "num missing", "text": DASH, "title": "no formal ε", "sub": "no formal ε",
                          "space": True})
        if o["eps_attack"]:
            cells.append({"cls": "num eps", "strong": True, "text": lb(o["eps_strongest"]),
                          "title": eps_tip(att.loc[o["eps_attack"]]), "space": True,
                          "sub": o["eps_attack"] if o["eps_strongest"] > 0 else ""})
        else:
            cells.append(missing)
        one = o["one_run_eps_lower_bound"]
        cells.append({"cls": "num" if finite(one) else "num missing", "text": lb(one), "title": _one_run_tip(info)})
        strong = o["strongest"]
        if strong and finite(att.loc[strong, "loo_auc_mean"]):
            r = att.loc[strong]
            cells.append({"cls": "num", "text": f3(r["loo_auc_mean"]), "sub": f"± {f3(r['loo_auc_std'])}",
                          "title": f"{strong}: each of the {integer(r['loo_n_targets'])} reference-pool models in "
                                   f"turn as the target, the others as references"})
        else:
            cells.append({**missing, "title": f"{strong} uses no reference pool" if strong else "no attack results"})
        for a in attacks:
            if a not in att.index or not (finite(att.loc[a, "auc"]) or finite(att.loc[a, "tpr_at_0p1pct_fpr"])):
                cells.append(missing)
                continue
            r = att.loc[a]
            auc = num(r["auc"])
            cells.append({"cls": "num att best" if a == o["row_strongest"] else "num att", "title": _attack_tip(a, r),
                          "pair": (f"{auc:.2f}" if math.isfinite(auc) else DASH, pct(r["tpr_at_0p1pct_fpr"]))})
        out.append({"css": FAMILY_CSS.get(o["family"], OTHER_CSS), "name": setting_name(o),
                    "runs": ", ".join(o["runs"]), "n_runs": len(o["runs"]), "cells": cells})
    return out


def _empirical_plots(st: pd.DataFrame, ov: pd.DataFrame, g: pd.DataFrame, rocs: Mapping[str, Any]
                     ) -> tuple[list[dict], str]:
    """The figures of the empirical-ε part, and the names of the DP settings whose lower bound
    exceeds the accountant's ε ("" when none does)."""
    # the bound of every view: the group's strongest attack's (summary.overview), named where it is drawn
    named = next((f" ({a})" for a in ov["strongest"] if isinstance(a, str)), "")
    figs = [_eps_vs_accuracy(ov, named)]
    check = ""
    dp_ov = _dp_settings(ov)
    if len(dp_ov):
        figs.append(_accountant_vs_empirical(dp_ov, named))
        check = _above_accountant(dp_ov)
    roc = _roc_of_every_attack(st, ov, g, rocs)
    if roc:
        figs.append(roc)
    return figs, check


def _eps_curve(rows: pd.DataFrame) -> dict:
    """The (test accuracy, strongest attack's ε lower bound) points of ``rows``, by accuracy."""
    rows = rows[rows["test_accuracy"].notna() & rows["eps_strongest"].notna()].sort_values("test_accuracy")
    return {"x": rows["test_accuracy"].to_numpy(float), "y": rows["eps_strongest"].to_numpy(float)}


def _eps_vs_accuracy(ov: pd.DataFrame, named: str) -> dict:
    """The figure of the empirical ε lower bound against test accuracy: a curve for MG noise
    and one for DP-SGD, each ending at the baseline (the baseline alone when neither ran)."""
    fam = ov["family"]
    has_mg, has_dp = bool((fam == "MG noise").any()), bool(ov["dp"].any())
    series = [{"label": "MG noise (κ)", **_eps_curve(ov[fam.isin(["baseline", "MG noise"])] if has_mg else ov[:0])},
              {"label": "DP-SGD (σ)", **_eps_curve(ov[ov["dp"] | (fam == "baseline")] if has_dp else ov[:0])}]
    if not has_mg and not has_dp:  # the baseline alone
        series = [{"label": "baseline", **_eps_curve(ov)}]
    ys = [v for sr in series for v in sr["y"] if math.isfinite(v)]
    flat = (0.0, 1.0) if ys and max(ys) <= 0 else None  # all zero: no negative ε axis
    return figure(line_plot(
        series, title="Empirical ε lower bound vs test accuracy", xlabel="target test accuracy",
        ylabel=f"empirical ε ≥{named}", y_range=flat),
        f"The empirical ε lower bound of the strongest attack{named} per setting, as in the table (95% confidence); "
        "higher = more leakage proven. Both curves end at the undefended baseline. Another attack's bound can be "
        "larger (hover its cell; ε lb in tradeoff.csv): each is read at its own threshold, and the largest of "
        "several 95% bounds is not itself a 95% bound.")


def _dp_settings(ov: pd.DataFrame) -> pd.DataFrame:
    """The DP settings with a noise multiplier (DP-SGD's alone when there are any), by σ."""
    dp_ov = ov[ov["dp"] & ov["noise_multiplier"].notna()]
    if (dp_ov["family"] == "DP-SGD").any():
        dp_ov = dp_ov[dp_ov["family"] == "DP-SGD"]
    if len(dp_ov):
        dp_ov = dp_ov.sort_values("noise_multiplier", kind="stable")
    return dp_ov


def _accountant_vs_empirical(dp_ov: pd.DataFrame, named: str) -> dict:
    """The figure of the accountant's ε (an upper bound) against σ beside every lower bound
    and estimate the DP settings have; a log y axis when the values span 30× or more."""
    sig = dp_ov["noise_multiplier"].to_numpy(float)
    series = [{"label": "accountant ε (upper bound)", "x": sig, "y": dp_ov["epsilon"].to_numpy(float)},
              {"label": "empirical ε (lower bound)", "x": sig, "y": dp_ov["eps_strongest"].to_numpy(float)}]
    for column, label in (("gdp_eps_strongest", "Gaussian-DP ε (estimate, Gaussian curve)"),
                          ("one_run_eps_lower_bound", "one-run ε (lower bound)"),
                          ("one_run_fdp_eps_lower_bound", "f-DP one-run ε (lower bound)")):
        y = dp_ov[column].to_numpy(float)
        if np.isfinite(y).any():
            series.append({"label": label, "x": sig, "y": y})
    pos = [v for sr in series for v in sr["y"] if math.isfinite(v) and v > 0]
    log_y = bool(pos) and max(pos) / min(pos) >= 30
    caption = (f"The accountant's ε is a proven upper bound. The Clopper–Pearson ε at one threshold is a 95% "
               f"lower bound, as are, with canaries, the one-run bounds of Steinke et al. and the f-DP one of "
               f"Mahloujifar et al.; the Gaussian-DP ε read off the trade-off curve is an estimate, a lower "
               f"bound only if the curve is Gaussian (both of the strongest attack{named}, thresholds chosen "
               f"on other models; docs/methods/d-attacks.md D.6). The true ε of the training run lies "
               f"between the accountant's and the largest lower bound.")
    if log_y:
        zero = any(math.isfinite(v) and v <= 0 for sr in series for v in sr["y"])
        # a series of zero bounds only cannot be drawn on a log axis: leave it out
        series = [sr for sr in series if any(math.isfinite(v) and v > 0 for v in sr["y"])
                  or not any(math.isfinite(v) for v in sr["y"])]
        if zero:
            caption += " Lower bounds of 0 (nothing proven) cannot be drawn on the log axis."
    return figure(line_plot(series, title="DP-SGD: accountant ε vs empirical ε", xlabel="σ (noise multiplier)",
                            ylabel="ε" + (" (log scale)" if log_y else ""), log_y=log_y), caption)


def _above_accountant(dp_ov: pd.DataFrame) -> str:
    """The names of the DP settings one of whose lower bounds (or estimate) exceeds the
    accountant's ε, which should not happen ("" when none does)."""
    eps = dp_ov["epsilon"]
    above = (eps.notna() & ((dp_ov["eps_strongest"] > eps) | (dp_ov["one_run_eps_lower_bound"] > eps)
                            | (dp_ov["gdp_eps_strongest"] > eps) | (dp_ov["one_run_fdp_eps_lower_bound"] > eps)))
    return ", ".join(setting_name(o) for _, o in dp_ov[above].iterrows())


def _roc_of_every_attack(st: pd.DataFrame, ov: pd.DataFrame, g: pd.DataFrame, rocs: Mapping[str, Any]
                         ) -> dict | None:
    """The log-log ROC of every attack on the baseline (else the least-defended target with
    curves saved); None when no target has any."""
    chosen = next(((o, run, rocs[run]) for _, o in ov.sort_values("family", key=lambda f: f != "baseline",
                                                                   kind="stable").iterrows()
                   for run in o["runs"] if isinstance(rocs.get(run), Mapping) and rocs[run]), None)
    if not chosen:
        return None
    o, run, per_run = chosen
    att = attack_rows(st, o)
    series = []
    for a in sorted((k for k in per_run if isinstance(k, str)), key=attack_key):
        try:
            fpr, tpr = per_run[a][0], per_run[a][1]
        except (TypeError, IndexError, KeyError):
            continue
        auc = num(att.loc[a, "auc"]) if a in att.index else math.nan
        series.append({"label": f"{a} (AUC {auc:.2f})" if math.isfinite(auc) else a,
                       "x": np.asarray(fpr, dtype=float), "y": np.asarray(tpr, dtype=float), "markers": False,
                       "exact_below": EXACT_FPR})
    fpr_lo = fpr_floor(g.loc[g["target_run"] == run, "n_nonmembers"])
    name = setting_name(o)
    which = "the undefended baseline" if o["family"] == "baseline" else name
    return figure(line_plot(
        series, title=f"ROC of every attack, {name} (log-log)", xlabel="false-positive rate",
        ylabel="true-positive rate", log_x=True, log_y=True, x_range=(fpr_lo, 1), y_range=(fpr_lo, 1),
        diagonal=True),
        f"All attacks on {which} ({run}), log-log axes from FPR {fpr_lo:.2g} (1 / non-members): the higher a "
        "curve at low FPR, the more members it identifies confidently; dashed: chance.")


#: the most class columns the exposure table shows (the most exposed ones; the rest are in
#: each attack folder's exposure.json)
EXPOSURE_CLASSES = 20
#: the AUCs from which a class's cell is shaded darker (one step per 0.1)
EXPOSURE_SHADES = (0.6, 0.7, 0.8, 0.9)
#: the most exposed members named in a row (the tooltip lists every one saved, with its score)
EXPOSURE_MEMBERS = 5


def _exposure(ov: pd.DataFrame, extras: Any, dataset: str) -> dict:
    """One row per setting run with exposure details (the baseline first): its attack's AUC
    on each class (a column per class, shaded by the AUC above chance, the setting's most
    exposed class marked) and its most exposed members. Empty when no run has details."""
    items = [(o, run, ex) for _, o in ov.sort_values("family", key=lambda f: f != "baseline", kind="stable").iterrows()
             for run in o["runs"] if (ex := extras_of(extras, run, "exposure"))]
    if not items:
        return {}
    counts: dict[str, int] = {}
    for o, _, _ in items:
        counts[setting_name(o)] = counts.get(setting_name(o), 0) + 1

    def order(c: Any) -> tuple:
        try:
            return (0, int(c), "")
        except (TypeError, ValueError):
            return (1, 0, str(c))

    per_run = []
    for _, _, ex in items:
        per_class = ex.get("per_class_auc")
        per_run.append({str(c): num(a) for c, a in per_class.items()} if isinstance(per_class, Mapping) else {})
    columns = sorted({c for aucs in per_run for c in aucs}, key=order)
    hidden = 0
    if len(columns) > EXPOSURE_CLASSES:  # the most exposed classes (highest AUC of any setting), in class order
        peak = {c: max((a for aucs in per_run if math.isfinite(a := aucs.get(c, math.nan))), default=-math.inf)
                for c in columns}
        kept = set(sorted(columns, key=lambda c: -peak[c])[:EXPOSURE_CLASSES])
        hidden, columns = len(columns) - len(kept), [c for c in columns if c in kept]
    rows = []
    for (o, run, ex), aucs in zip(items, per_run):
        finite = [a for a in aucs.values() if math.isfinite(a)]
        top = max(finite) if finite else math.nan
        cells = []
        for c in columns:
            a = aucs.get(c, math.nan)
            shade = sum(a >= t for t in EXPOSURE_SHADES) if math.isfinite(a) else 0
            cells.append({"auc": f3(a), "shade": shade, "top": math.isfinite(a) and a == top,
                          "missing": not math.isfinite(a)})
        samples = ex.get("top_samples")
        samples = [s for s in (samples if isinstance(samples, (list, tuple)) else []) if isinstance(s, Mapping)]
        named = [f"{integer(s.get('index'))} ({_class_name(dataset, s.get('class'))})" for s in samples]
        tip = "; ".join(f"{n}: score {sig3(s.get('score'))}" for n, s in zip(named, samples))
        name = setting_name(o)
        trace = ex["loss_trace"] if isinstance(ex.get("loss_trace"), Mapping) else {}
        lt = (pct(trace.get("precision"), 0) if trace.get("available") else DASH)
        lt_tip = (f"of its top {pct(trace.get('fraction'), 0)} members by LT-IQR (the spread of their training loss "
                  f"over {integer(trace.get('epochs'))} epochs), the share among the attack's top "
                  f"{pct(trace.get('fraction'), 0)} (chance {pct(trace.get('fraction'), 0)}); top by LT-IQR: "
                  + ", ".join(str(i) for i in trace.get("top") or []) if trace.get("available")
                  else plain(trace.get("reason")) if trace else "no loss trace saved with this attack")
        stable = extras_of(extras, run, "stability")
        rows.append({"lt": lt, "lt_tip": lt_tip,
                     "stable": f"{f3(stable.get('jaccard'))}" if stable else DASH,
                     "stable_tip": (f"mean pairwise Jaccard index of the top {pct(stable.get('fraction'), 0)} of each "
                                    f"seed's members by {plain(stable.get('attack'))} over "
                                    f"{integer(stable.get('seeds'))} seeds; two random sets of those sizes give "
                                    f"{f3(stable.get('chance'))}")
                     if stable else "one seed: nothing to compare",
                     "label": name if counts[name] == 1 else f"{name} [{run}]", "attack": plain(ex.get("attack")),
                     "cells": cells, "members": named[:EXPOSURE_MEMBERS], "more": len(named) > EXPOSURE_MEMBERS,
                     "members_tip": tip})
    empty = not columns and not any(r["members"] for r in rows)  # details saved, none of them usable
    return {"classes": [_class_name(dataset, c) for c in columns], "rows": rows, "hidden": hidden, "empty": empty}


def empirical_section(model: str, dataset: str, g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame,
                       rocs: Mapping[str, Any], extras: Any) -> str:
    if not has_empirical(g, extras) or ov.empty:
        return ""
    from privaudit.reporting.templates import render

    attacks = sorted(set(g["attack"]), key=attack_key)
    sizes = sorted({integer(loo.get("pool_size")) for _, o in ov.iterrows() for run in o["runs"]
                    if (loo := extras_of(extras, run, "loo"))})
    pool_text = (f' Pool attacks use {", ".join(sizes)} reference models per target trained like the target (half '
                 'of them on each sample).' if sizes else "")
    figs, check = _empirical_plots(st, ov, g, rocs)
    return render("strongest.html.j2", e={
        "slug": slug("e", model, dataset), "pool_text": pool_text, "attacks": [a.split("-") for a in attacks],
        "rows": _empirical_rows(st, ov, attacks, extras), "check": check, "figures": figs,
        "exposure": _exposure(ov, extras, dataset)})
