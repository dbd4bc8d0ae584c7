"""The self-contained HTML report page.

:func:`render_report` turns the trade-off table (one row per target, defence setting and
attack), the attacks' ROC curves and the per-target extras into one HTML5 document that opens
from disk with no network. Every derived number (per-setting means and intervals, the
strongest attack, the iso-accuracy comparisons and verdicts) comes from the summary layer,
:mod:`privaudit.reporting.summary`, which the terminal and ``--json`` read too; this module only
picks, formats and lays out. The markup is Jinja2 templates with autoescaping
(``templates/``: the page, the first screen, the key findings and their sentences, each
group's section, the strongest-attacks part, the long table, the NoisyCGD comparison, "How to
read this"); the stylesheet ``templates/report.css`` is inlined; plots are inline SVG drawn by
matplotlib (:mod:`privaudit.reporting.plots`). There is no JavaScript, no font, no image and no
link to anything outside the page (only ``#`` anchors).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from privaudit.core.formatting import difference, lower_bound, sig3, slug
from privaudit.reporting.table import COLUMNS
from privaudit.reporting.defences import noisycgd_comparison
from privaudit.reporting.table import as_bool
from privaudit.reporting.plots import line_plot
from privaudit.reporting.summary import VERDICT_DP, VERDICT_MG, Summary, setting_label, summarise

__all__ = ["render_report", "TABLE_COLUMNS", "setting_label"]

#: The trade-off table's columns, in order (the CSV's, privaudit.reporting.build).
TABLE_COLUMNS = COLUMNS
_TEXT_COLUMNS = ["target_run", "shadow_run", "model", "dataset", "defence", "accountant", "attack",
                 "source"]
_NUMERIC_COLUMNS = [c for c in TABLE_COLUMNS if c not in _TEXT_COLUMNS and c != "dp"]
#: Attacks that need a reference pool (LiRA, RMIA, the many-shadow attack).
POOL_ATTACKS = ("shadow-pool", "lira-online", "lira-online-global", "lira-offline",
                "lira-offline-global", "rmia")
_ATTACK_ORDER = {"shadow": 0, "shadow-pool": 1, "lira-online": 2, "lira-online-global": 3,
                 "lira-offline": 4, "lira-offline-global": 5, "rmia": 6, "loss": 7,
                 "confidence": 8}
_CLASS_NAMES = {
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                "ship", "truck"),
    "digits": tuple(str(i) for i in range(10)),
    "mnist": tuple(str(i) for i in range(10)),
    "svhn": tuple(str(i) for i in range(10)),
    "fashionmnist": ("T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                     "ankle boot"),
}
_ISO_METRICS = ("auc", "precision", "recall")
_METRIC_NAMES = {"auc": "AUC", "precision": "precision", "recall": "recall",
                 "accuracy": "attack accuracy", "advantage": "advantage"}
_DASH = "—"


# ---------------------------------------------------------------------------------------
# small helpers


def _num(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f


def _fin(v: Any) -> bool:
    return math.isfinite(_num(v))


def _f3(v: Any) -> str:
    f = _num(v)
    return f"{f:.3f}" if math.isfinite(f) else _DASH


_sig3 = sig3


def _short(v: Any) -> str:
    """A defence parameter (kappa, sigma, delta) in its shortest form."""
    f = _num(v)
    return f"{f:g}" if math.isfinite(f) else _DASH


def _int(v: Any) -> str:
    f = _num(v)
    return str(int(round(f))) if math.isfinite(f) else _DASH


_lb = lower_bound  # one rounding rule with the terminal (privaudit.core.formatting)


def _pct(v: Any, digits: int = 1) -> str:
    f = _num(v)
    return f"{100 * f:.{digits}f}%" if math.isfinite(f) else _DASH


def _text(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return _DASH
    try:
        if pd.isna(v):
            return _DASH
    except (TypeError, ValueError):
        pass
    s = str(v)
    return s if s else _DASH


_slug = slug


def _prepare(table: pd.DataFrame | None) -> pd.DataFrame:
    """A copy of the table with every expected column, typed, plus helper columns."""
    df = pd.DataFrame(columns=TABLE_COLUMNS) if table is None else table.copy()
    df = df.reset_index(drop=True)
    for c in TABLE_COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    for c in _NUMERIC_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["dp"] = as_bool(df["dp"]).to_numpy() if len(df) else pd.Series([], dtype=bool)
    for c in ("model", "dataset", "attack"):
        df[c] = df[c].astype(object).where(df[c].notna(), "?").astype(str)
    kappa = df["kappa"].fillna(0.0)
    # defence rank: 0 baseline, 1 MG, 2 DP-SGD, 3 both
    df["_rank"] = np.where(df["dp"], np.where(kappa > 0, 3, 2), np.where(kappa > 0, 1, 0))
    df["_attack_rank"] = df["attack"].map(_ATTACK_ORDER).fillna(9)
    df["_run"] = df["target_run"].map(_text)
    src = df["source"].where(df["source"].notna(), df["shadow_run"])
    df["_source"] = src.map(_text)
    df = df.sort_values(["model", "dataset", "_rank", "kappa", "noise_multiplier", "_run",
                         "_attack_rank", "attack"], kind="stable", na_position="first")
    return df.reset_index(drop=True)


# "DP-SGD" with a non-breaking hyphen: looks the same, and _name_dp leaves it alone where a
# NoisyCGD group's text means DP-SGD itself.
_DPSGD_KEPT = "DP\u2011SGD"


def _dp_family(g: pd.DataFrame) -> str:
    """The DP mechanism of a (model, dataset) group: NoisyCGD for ``convex-relu`` (its only
    DP training), DP-SGD otherwise."""
    return "NoisyCGD" if (g["defence"].astype(str) == "noisycgd").any() else "DP-SGD"


def _name_dp(fragment: str, g: pd.DataFrame) -> str:
    """A group's HTML with its DP rows named by their mechanism (the sections are written
    for DP-SGD, the mechanism of every group but ``convex-relu``'s)."""
    family = _dp_family(g)
    return fragment if family == "DP-SGD" else fragment.replace("DP-SGD", family)


_MEASURES = {"auc": "AUC", "tpr_at_0p1pct_fpr": "TPR at 0.1% FPR", "eps_lower_bound": "empirical ε lower bound"}
_VERDICT_CSS = {"MG noise leaks less": "mg", "DP-SGD leaks less": "dp", "no significant difference at 95 %": "tie"}
_FAMILY_CSS = {"baseline": "fam0", "MG noise": "fam1", "DP-SGD": "fam2", "MG + DP-SGD": "fam3"}
_METHOD_NOTE = (
    "Intervals are 95 %. With two or more seeds (--seeds), every number is the mean over seeds with "
    "Student's t interval over seeds; each seed re-draws the data split and all training randomness. "
    "With one seed, a number's interval covers only the sampling of the audited records: DeLong for AUC, "
    "Clopper–Pearson for test accuracy and TPR, none for the ε lower bound (itself a one-sided 95 % "
    "bound). The verdict compares DP-SGD with MG noise at equal test accuracy: both curves interpolated "
    "on the overlap of their accuracy ranges, DP − MG averaged over it (per seed, then a t interval "
    "over seeds; with one seed, a bootstrap over the sampling of every point). It names a defence "
    "only when the interval excludes 0; higher = more leakage, so DP − MG > 0 means MG noise leaks less.")


def _ci(lo: Any, hi: Any, fmt: Callable[[Any], str]) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]" if _fin(lo) and _fin(hi) else ""


def _first_screen(summary: Summary, figures: list) -> str:
    """The verdict, its figure (:mod:`privaudit.reporting.figures`, inline SVG) and one row per
    setting (templates/first_screen.html.j2)."""
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
            gap, interval = difference(r["metric"], r["gap"], r["gap_lo"], r["gap_hi"])
            verdicts.append({
                "comparison": r["comparison"], "attack": r["attack"], "measure": _MEASURES.get(r["metric"], r["metric"]),
                "accuracy": f"{_f3(r['acc_low'])}–{_f3(r['acc_high'])}" if _fin(r["acc_low"]) else _DASH,
                "gap": gap, "interval": f"{interval} {r['interval']}" if interval else r["interval"],
                "verdict": r["verdict"], "css": _VERDICT_CSS.get(r["verdict"], "none"), "reason": r["reason"]})
        rows = []
        paper = g[g["attack"] == "shadow"].set_index("setting")
        best = g[g["attack"] == strongest].set_index("setting") if strongest else g.iloc[0:0].set_index("setting")
        per_setting = g.drop_duplicates("setting").set_index("setting")  # accuracy: one value per setting
        for name, s in per_setting.iterrows():
            def cell(frame: pd.DataFrame, metric: str, fmt: Callable[[Any], str] = _f3) -> dict:
                if name not in frame.index:
                    return {"value": _DASH, "ci": ""}
                r = frame.loc[name]
                ci_fmt = (lambda v: f"{_num(v):.2f}") if metric == "eps_lower_bound" else fmt
                return {"value": fmt(r[metric]), "ci": _ci(r[f"{metric}_lo"], r[f"{metric}_hi"], ci_fmt)}
            rows.append({"name": name, "css": _FAMILY_CSS.get(s["family"], "fam0"), "seeds": int(s["n_seeds"]),
                         "cells": [cell(per_setting, "test_accuracy"), cell(paper, "auc"),
                                   cell(best, "tpr_at_0p1pct_fpr", lambda x: _pct(x, 2)), cell(best, "eps_lower_bound", _lb)],
                         "epsilon": _sig3(s["epsilon"])})
        fig = svgs.get(_slug("verdict", model, dataset))
        groups.append({"model": model, "dataset": dataset, "slug": _slug("v", model, dataset), "verdicts": verdicts,
                       "figure": Markup(fig.svg) if fig else None,  # matplotlib's own SVG: no script, no link
                       "figure_files": f"reports/figures/{fig.stem}.pdf and .png" if fig else "",
                       "no_verdict": "No comparison: only one defence family was audited.",
                       "strongest": strongest or _DASH, "settings": rows})
    return render("first_screen.html.j2", groups=groups, method=_METHOD_NOTE)


_TABLE_SPEC: list[tuple[str, str, Callable[[Any], str], str]] = [
    # (header, column, formatter, css class)
    ("target run", "target_run", _text, "txt"),
    ("source", "_source", _text, "txt"),
    ("defence", "defence", _text, "txt"),
    ("κ", "kappa", _short, "num"),
    ("σ", "noise_multiplier", _short, "num"),
    ("ε", "epsilon", _sig3, "num"),
    ("seed", "seed", _int, "num"),
    ("epochs", "epochs", _int, "num"),
    ("train acc", "train_accuracy", _f3, "num"),
    ("test acc", "test_accuracy", _f3, "num"),
    ("attack", "attack", _text, "txt"),
    ("AUC", "auc", _f3, "num"),
    ("attack acc", "accuracy", _f3, "num"),
    ("precision", "precision", _f3, "num"),
    ("recall", "recall", _f3, "num"),
    ("threshold", "threshold", _f3, "num"),
    ("advantage", "advantage", _f3, "num"),
    ("TPR @ 1% FPR", "tpr_at_1pct_fpr", _f3, "num"),
    ("TPR @ 0.1% FPR", "tpr_at_0p1pct_fpr", _f3, "num"),
    ("ε lb", "eps_lower_bound", _lb, "num"),
    ("members", "n_members", _int, "num"),
    ("non-members", "n_nonmembers", _int, "num"),
]


def _ci_text(lo: Any, hi: Any) -> str:
    """ "95% CI 0.001–0.016" (Clopper–Pearson) or "" when a side is missing."""
    if not (_fin(lo) and _fin(hi)):
        return ""
    return f"95% CI {_f3(lo)}–{_f3(hi)} (Clopper–Pearson)"


def _eps_tip(r: Mapping[str, Any]) -> str:
    delta = f"δ={_short(r['delta'])}" if _fin(r["delta"]) else "the run's δ"
    tip = (f"empirical ε lower bound at {delta}, 95% confidence, threshold chosen on other "
           f"models than this target")
    if _fin(r["loo_eps_lower_bound_mean"]):
        tip += (f"; leave-one-out over {_int(r['loo_n_targets'])} pool models: "
                f"{_lb(r['loo_eps_lower_bound_mean'])} ± {_f3(r['loo_eps_lower_bound_std'])}")
    return tip


def _cell_tip(r: pd.Series, col: str) -> str:
    """The tooltip of one cell of the long table (empty: none)."""
    if col == "epsilon" and _fin(r["epsilon"]):
        return f"δ={_short(r['delta'])}, accountant: {_text(r['accountant'])}"
    if col == "target_run":
        return f"part size {_int(r['part_size'])}, {_text(r['defence']) if r['dp'] else 'no DP'}"
    if col == "auc" and _fin(r["auc_lo"]) and _fin(r["auc_hi"]):
        return f"95% CI {_f3(r['auc_lo'])}–{_f3(r['auc_hi'])} (DeLong)"
    if col in ("tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr"):
        return _ci_text(r[f"{col}_lo"], r[f"{col}_hi"])
    if col == "eps_lower_bound" and _fin(r["eps_lower_bound"]):
        return _eps_tip(r)
    return ""


def _tradeoff_table(groups: list[tuple[str, str, pd.DataFrame]], n_rows: int, n_targets: int) -> str:
    """The "Trade-off table" section, the long table (templates/tradeoff_table.html.j2): rows
    of one target striped alike."""
    from privaudit.reporting.templates import render

    out = []
    for model, dataset, g in groups:
        rows, prev_run, alt = [], None, True
        for _, r in g.iterrows():
            first = r["_run"] != prev_run
            if first:
                alt, prev_run = not alt, r["_run"]
            cells = []
            for _, col, fmt, ccls in _TABLE_SPEC:
                text = fmt(r[col])
                cells.append({"text": text, "cls": f"{ccls} missing" if text == _DASH else ccls,
                              "title": _cell_tip(r, col)})
            rows.append({"cls": " ".join(c for c in ("alt" if alt else "", "first" if first else "") if c),
                         "cells": cells})
        out.append({"slug": _slug("g", model, dataset), "model": model, "dataset": dataset, "rows": rows})
    head = [{"text": h, "cls": cls} for h, _, _, cls in _TABLE_SPEC]
    return render("tradeoff_table.html.j2", head=head, groups=out, n_rows=n_rows, n_targets=n_targets, dash=_DASH)


def _attack_key(a: str) -> tuple[int, str]:
    return _ATTACK_ORDER.get(a, 9), a


def _extras_of(extras: Any, run: Any, key: str) -> Mapping:
    """``extras[run][key]`` when it is a mapping, else an empty one."""
    if not isinstance(extras, Mapping) or not isinstance(run, str):
        return {}
    per_run = extras.get(run)
    if not isinstance(per_run, Mapping):
        return {}
    value = per_run.get(key)
    return value if isinstance(value, Mapping) else {}


def _has_empirical(g: pd.DataFrame, extras: Any) -> bool:
    """Whether a group has anything for the "strongest attacks and empirical ε" part."""
    if g["attack"].isin(POOL_ATTACKS).any():
        return True
    if g["eps_lower_bound"].notna().any() or g["one_run_eps_lower_bound"].notna().any():
        return True
    return any(_extras_of(extras, run, k) for run in g["target_run"].unique()
               for k in ("loo", "exposure", "one_run"))


def _one_run_tip(info: Mapping) -> str:
    if not info:
        return "one-run canary audit (Steinke, Nasr & Jagielski 2023)"
    conf = _num(info.get("confidence"))
    return (f"one-run canary audit: {_int(info.get('num_correct'))} of "
            f"{_int(info.get('num_guesses'))} guesses correct, "
            f"{_int(info.get('num_canaries'))} canaries ({_int(info.get('num_included'))} "
            f"included), score {_text(info.get('score'))}, δ={_short(info.get('delta'))}, "
            f"{_pct(conf, 0) if math.isfinite(conf) else '?'} confidence; canary model "
            f"{_text(info.get('canary_run'))}")


def _attack_tip(name: str, r: pd.Series) -> str:
    parts = [f"{name}: AUC {_f3(r['auc'])}",
             f"TPR @ 0.1% FPR {_pct(r['tpr_at_0p1pct_fpr'])}"]
    if _fin(r["tpr_at_0p1pct_fpr_lo"]) and _fin(r["tpr_at_0p1pct_fpr_hi"]):
        parts[-1] += (f" (95% CI {_pct(r['tpr_at_0p1pct_fpr_lo'])}–"
                      f"{_pct(r['tpr_at_0p1pct_fpr_hi'])})")
    parts.append(f"TPR @ 1% FPR {_pct(r['tpr_at_1pct_fpr'])}")
    if _fin(r["tpr_at_1pct_fpr_lo"]) and _fin(r["tpr_at_1pct_fpr_hi"]):
        parts[-1] += (f" (95% CI {_pct(r['tpr_at_1pct_fpr_lo'])}–"
                      f"{_pct(r['tpr_at_1pct_fpr_hi'])})")
    parts.append(f"empirical ε ≥ {_lb(r['eps_lower_bound'])}")
    if _fin(r["loo_auc_mean"]):
        parts.append(f"leave-one-out AUC {_f3(r['loo_auc_mean'])} ± {_f3(r['loo_auc_std'])} "
                     f"over {_int(r['loo_n_targets'])} pool models")
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


# ---------------------------------------------------------------------------------------
# what each group shows, read from the summary layer (privaudit.reporting.summary)


def _primary_attack(g: pd.DataFrame) -> str | None:
    """The attack a group's sentences and trade-off plots are about: the paper's (shadow)
    when it ran, else the first in the report's attack order."""
    attacks = list(dict.fromkeys(g.sort_values("_attack_rank", kind="stable")["attack"]))
    if not attacks:
        return None
    return "shadow" if "shadow" in attacks else attacks[0]


def _of(frame: pd.DataFrame, model: str, dataset: str) -> pd.DataFrame:
    """The rows of one (model, dataset) group of a summary frame."""
    if frame.empty:
        return frame
    return frame[(frame["model"] == model) & (frame["dataset"] == dataset)]


def _verdict(g: pd.DataFrame, comps: pd.DataFrame) -> dict:
    """The group's verdict sentence (templates/sentences.html.j2), from the summary's
    comparison of its primary attack by AUC."""
    if _dp_family(g) == "NoisyCGD":
        return {"kind": "noisycgd", "dpsgd": _DPSGD_KEPT}
    attack = _primary_attack(g)
    if attack is None:
        return {"kind": "text", "text": "No attack results."}
    hit = comps[(comps["attack"] == attack) & (comps["metric"] == "auc")] if len(comps) else comps
    if hit.empty:  # every row of the attack is MG + DP-SGD
        return {"kind": "text", "text": "No iso-accuracy comparison: the attack ran on combined MG + DP-SGD "
                                        "targets only."}
    c = hit.iloc[0]
    if not _fin(c["gap"]):
        return {"kind": "text", "text": f"No iso-accuracy comparison: {c['reason']}."}
    ci = (f"95% interval {c['gap_lo']:+.3f} to {c['gap_hi']:+.3f}, {c['interval']}" if _fin(c["gap_lo"])
          else "no interval")
    return {"kind": "gap", "acc": f"{c['acc_low']:.3f}–{c['acc_high']:.3f}", "attack": attack,
            "gap": f"{c['gap']:+.3f}", "ci": ci, "verdict": c["verdict"],
            "named": c["verdict"] in (VERDICT_MG, VERDICT_DP)}


def _baseline_sentence(g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame) -> str:
    attack = _primary_attack(g)
    base = ov[ov["family"] == "baseline"] if len(ov) else ov
    if base.empty:
        return "No undefended baseline (κ = 0, no DP-SGD) has been audited."
    acc = base.iloc[0]["test_accuracy"]
    rows = st[(st["setting_id"] == base.iloc[0]["setting_id"]) & (st["attack"] == attack)]
    auc = rows.iloc[0]["auc"] if len(rows) else math.nan
    return f"Undefended baseline: test accuracy {_f3(acc)}, {attack or 'attack'}-attack AUC {_f3(auc)}."


def _setting_name(o: Mapping[str, Any]) -> str:
    """``baseline``, ``MG noise κ=0.5``, ``DP-SGD σ=1``, ``MG + DP-SGD κ=0.5, σ=1``."""
    return "baseline" if o["family"] == "baseline" else f"{o['family']} {o['setting']}"


def _attack_rows(st: pd.DataFrame, o: Mapping[str, Any]) -> pd.DataFrame:
    """A setting's per-attack rows of the summary, indexed by attack, in the report's order."""
    rows = st[st["setting_id"] == o["setting_id"]].set_index("attack")
    return rows.loc[sorted(rows.index, key=_attack_key)]


def _empirical_sentence(g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame, extras: Any) -> dict | None:
    """The sentence about the strongest attack and the empirical ε (templates/sentences.html.j2),
    or None when the group has no such results."""
    if not _has_empirical(g, extras) or ov.empty:
        return None
    out: dict = {"strongest": None, "bounds": ""}
    ref = next((o for _, o in ov.iterrows() if o["family"] == "baseline"), ov.iloc[0])
    if ref["strongest"]:
        r = _attack_rows(st, ref).loc[ref["strongest"]]
        out.update(strongest=ref["strongest"], auc=_f3(r["auc"]),
                   where="the baseline" if ref["family"] == "baseline" else _setting_name(ref),
                   tpr=_pct(r["tpr_at_0p1pct_fpr"]) if _fin(r["tpr_at_0p1pct_fpr"]) else "")
    with_one_run = ov["one_run_eps_lower_bound"].notna().any()
    clauses = []
    for family in _FAMILY_CSS:
        fam = ov[ov["family"] == family]
        have = fam[fam["eps_strongest"].notna()]
        if have.empty:
            continue
        o = have.loc[have["eps_strongest"].idxmax()]
        notes = []
        if o["dp"] and _fin(o["epsilon"]):
            notes.append(f"accountant ε = {_sig3(o['epsilon'])}")
        if len(fam) > 1:
            notes.append(f"the largest ε bound of its {len(fam)} settings")
        note = f" ({'; '.join(notes)})" if notes else ""
        one = (f" (one-run canary bound: {_lb(o['one_run_eps_lower_bound'])})"
               if with_one_run and _fin(o["one_run_eps_lower_bound"]) else "")
        bound = f"ε ≥ {_lb(o['eps_strongest'])}"
        clauses.append(f"{bound} for the baseline{one}" if family == "baseline"
                       else f"{_setting_name(o)}{note}: {bound}{one}")
    if clauses:
        attack = next((o["eps_attack"] for _, o in ov.iterrows() if o["eps_attack"]), None)
        lead = (f"Empirical ε lower bounds of {attack} (the strongest attack; a heuristic that treats the samples of "
                f"the model as independent trials{'; the one-run canary bound is the rigorous one, from a single training run' if with_one_run else ''}): ")
        out["bounds"] = lead + "; ".join(clauses) + "."
    return out if out["strongest"] or out["bounds"] else None


def _figure(svg: str, caption: str) -> dict:
    from markupsafe import Markup

    return {"svg": Markup(svg), "caption": caption}  # matplotlib's own SVG: no script, no link


def _band(rows: pd.DataFrame, x: str, y: str, label: str) -> dict:
    """A line-plot series of summary rows with their 95 % intervals as error bars."""
    rows = rows.sort_values(x, kind="stable")
    return {"label": label, "x": rows[x], "y": rows[y], "y_lo": rows[f"{y}_lo"], "y_hi": rows[f"{y}_hi"]}


def _fpr_floor(n_nonmembers: pd.Series) -> float:
    """The lowest FPR a log-log ROC shows: 1 / non-members, within [1e-4, 0.1]."""
    n = n_nonmembers.dropna()
    low = max(1e-4, 1.0 / float(n.min())) if len(n) and n.min() > 0 else 1e-4
    return min(low, 0.1)


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
        label = setting_label(bool(r["dp"]), r["kappa"], r["noise_multiplier"], r["epsilon"])
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
    figs = [_figure(line_plot(
        [_band(mg_ov, "kappa", "test_accuracy", "test accuracy"), _band(mg_ov, "kappa", "train_accuracy",
                                                                          "train accuracy")],
        title="Accuracy vs MG noise κ", xlabel="κ (MG noise std)", ylabel="accuracy"),
        "Target accuracy over κ (runs without DP-SGD; κ = 0 is the baseline); bars: 95 % intervals.")]
    mg_st = st[st["family"].isin(["baseline", "MG noise"])] if len(st) else st
    by_attack = [_band(mg_st[mg_st["attack"] == a], "kappa", "auc", f"{a} attack")
                 for a in sorted(set(g["attack"]), key=_attack_key)]
    figs.append(_figure(line_plot(by_attack, title="Attack AUC vs MG noise κ", xlabel="κ (MG noise std)",
                                  ylabel="attack AUC"),
                        "Leakage over κ, one curve per attack (0.5 = chance); bars: 95 % intervals."))
    mg_pts, dp_pts = _curve_rows(st[st["attack"] == attack] if len(st) else st)
    for metric, name in (("precision", "precision"), ("recall", "recall"), ("auc", "AUC")):
        figs.append(_figure(line_plot(
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
            def cell(m: str, fmt: Callable[[Any], str] = _f3) -> dict:
                lo, hi = p.get(f"{m}_lo", math.nan), p.get(f"{m}_hi", math.nan)
                return {"value": fmt(p[m]), "ci": _ci(lo, hi, fmt)}
            out.append({"curve": curve, "setting": p["setting"],
                        "cells": [{"value": _sig3(p["epsilon"]), "ci": ""}, cell("test_accuracy"), cell("precision"),
                                  cell("recall"), cell("auc")]})
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
    for attack in sorted(set(shown["attack"]), key=lambda a: _attack_key(str(a))):
        ca = comps[comps["attack"] == attack].set_index("metric")
        first = shown[shown["attack"] == attack].iloc[0]
        cells = []
        for m in metrics:
            c = ca.loc[m] if m in ca.index else None
            if c is None or not _fin(c["gap"]):
                cells.append({"gap": "", "tip": c["reason"] if c is not None else ""})
                continue
            ci = f" [{c['gap_lo']:+.3f}, {c['gap_hi']:+.3f}]" if _fin(c["gap_lo"]) else ""
            tip = (f"{_METRIC_NAMES.get(m, m)}: mean DP − MG {c['gap']:+.4f}{ci} ({c['interval']}) over test "
                   f"accuracy {c['acc_low']:.3f}–{c['acc_high']:.3f}" + (f"; {c['reason']}" if c["reason"] else ""))
            cells.append({"gap": f"{c['gap']:+.3f}", "ci": ci, "tip": tip, "verdict": c["verdict"],
                          "css": _VERDICT_CSS.get(c["verdict"], "none")})
        rows.append({"attack": attack, "range": f"{first['acc_low']:.3f}–{first['acc_high']:.3f}", "cells": cells})
    return {"rows": rows, "metrics": [_METRIC_NAMES.get(m, m) for m in metrics], "none": ""}


def _group_view(model: str, dataset: str, g: pd.DataFrame, summary: Summary, extras: Any) -> dict:
    """One (model, dataset) group as both its key finding and its section read it: its rows of
    the table (``g``) and of the summary (``st``, ``ov``, ``comps``), and its sentences (the
    verdict, the baseline, the strongest attack and empirical ε), each worked out once."""
    st, ov, comps = (_of(f, model, dataset) for f in (summary.settings, summary.overview, summary.comparisons))
    return {"model": model, "dataset": dataset, "g": g, "st": st, "ov": ov, "comps": comps,
            "verdict": _verdict(g, comps), "baseline": _baseline_sentence(g, st, ov),
            "empirical": _empirical_sentence(g, st, ov, extras)}


def _group_section(view: dict, rocs: Mapping[str, Any], extras: Any) -> str:
    from markupsafe import Markup

    from privaudit.reporting.templates import render

    model, dataset, g, st, ov = (view[k] for k in ("model", "dataset", "g", "st", "ov"))
    attack = _primary_attack(g) or "shadow"
    roc = _roc_series(g, attack, rocs)
    fpr_lo = _fpr_floor(g["n_nonmembers"])
    roc_figs = [
        _figure(line_plot(roc, title=f"ROC, {attack} attack", xlabel="false-positive rate",
                          ylabel="true-positive rate", x_range=(0, 1), y_range=(0, 1), diagonal=True),
                "Linear axes; dashed: chance."),
        _figure(line_plot(roc, title=f"ROC, {attack} attack (log-log)", xlabel="false-positive rate",
                          ylabel="true-positive rate", log_x=True, log_y=True, x_range=(fpr_lo, 1),
                          y_range=(fpr_lo, 1), diagonal=True),
                f"Log-log axes from FPR {fpr_lo:.2g}: the low-FPR regime where confident membership claims live; "
                "dashed: chance."),
    ]
    strongest = _empirical_section(model, dataset, g, st, ov, rocs, extras)
    return render("group.html.j2", g={
        "slug": _slug("g", model, dataset), "model": model, "dataset": dataset, "attack": attack,
        "verdict": view["verdict"], "baseline": view["baseline"], "empirical": view["empirical"],
        "strongest_part": Markup(strongest) if strongest else "",
        "figures": _tradeoff_figures(g, st, ov, attack), "points": _points(st, attack),
        "iso": _iso_view(g, view["comps"], view["verdict"]), "roc_figures": roc_figs})


def _key_findings(views: list[dict]) -> str:
    from markupsafe import Markup

    from privaudit.reporting.templates import macro, render

    items = [Markup(_name_dp(macro("sentences.html.j2", "finding", {
        "slug": _slug("g", v["model"], v["dataset"]), "emp_slug": _slug("e", v["model"], v["dataset"]),
        **{k: v[k] for k in ("model", "dataset", "verdict", "baseline", "empirical")}}), v["g"]))
        for v in views]
    return render("findings.html.j2", items=items)


# ---------------------------------------------------------------------------------------
# strongest attacks and empirical epsilon


def _empirical_rows(st: pd.DataFrame, ov: pd.DataFrame, attacks: list[str], extras: Any) -> list[dict]:
    """The rows of the strongest-attacks table (templates/strongest.html.j2), one per setting."""
    missing = {"cls": "num missing", "text": _DASH}
    out = []
    for _, o in ov.iterrows():
        att = _attack_rows(st, o)
        info = next((ex for run in o["runs"] if (ex := _extras_of(extras, run, "one_run"))), {})
        cells = [{"cls": "num", "text": _f3(o["test_accuracy"]),
                  "sub": _ci(o["test_accuracy_lo"], o["test_accuracy_hi"], _f3)}]
        if o["dp"] and _fin(o["epsilon"]):
            cells.append({"cls": "num", "text": _sig3(o["epsilon"]), "title": f"accountant upper bound at "
                                                                                f"δ={_short(o['delta'])}"})
        elif o["dp"]:
            cells.append(missing)
        else:
            cells.append({"cls": "num missing", "text": _DASH, "title": "no formal ε", "sub": "no formal ε",
                          "space": True})
        if o["eps_attack"]:
            cells.append({"cls": "num eps", "strong": True, "text": _lb(o["eps_strongest"]),
                          "title": _eps_tip(att.loc[o["eps_attack"]]), "space": True,
                          "sub": o["eps_attack"] if o["eps_strongest"] > 0 else ""})
        else:
            cells.append(missing)
        one = o["one_run_eps_lower_bound"]
        cells.append({"cls": "num" if _fin(one) else "num missing", "text": _lb(one), "title": _one_run_tip(info)})
        strong = o["strongest"]
        if strong and _fin(att.loc[strong, "loo_auc_mean"]):
            r = att.loc[strong]
            cells.append({"cls": "num", "text": _f3(r["loo_auc_mean"]), "sub": f"± {_f3(r['loo_auc_std'])}",
                          "title": f"{strong}: each of the {_int(r['loo_n_targets'])} reference-pool models in "
                                   f"turn as the target, the others as references"})
        else:
            cells.append({**missing, "title": f"{strong} uses no reference pool" if strong else "no attack results"})
        for a in attacks:
            if a not in att.index or not (_fin(att.loc[a, "auc"]) or _fin(att.loc[a, "tpr_at_0p1pct_fpr"])):
                cells.append(missing)
                continue
            r = att.loc[a]
            auc = _num(r["auc"])
            cells.append({"cls": "num att best" if a == o["row_strongest"] else "num att", "title": _attack_tip(a, r),
                          "pair": (f"{auc:.2f}" if math.isfinite(auc) else _DASH, _pct(r["tpr_at_0p1pct_fpr"]))})
        out.append({"css": _FAMILY_CSS.get(o["family"], "fam0"), "name": _setting_name(o),
                    "runs": ", ".join(o["runs"]), "n_runs": len(o["runs"]), "cells": cells})
    return out


def _empirical_plots(st: pd.DataFrame, ov: pd.DataFrame, g: pd.DataFrame, rocs: Mapping[str, Any]
                     ) -> tuple[list[dict], str]:
    """The figures of the empirical-ε part, and the names of the DP settings whose lower bound
    exceeds the accountant's ε ("" when none does)."""
    figs: list[dict] = []
    fam = ov["family"]

    def curve(rows: pd.DataFrame) -> dict:
        rows = rows[rows["test_accuracy"].notna() & rows["eps_strongest"].notna()].sort_values("test_accuracy")
        return {"x": rows["test_accuracy"].to_numpy(float), "y": rows["eps_strongest"].to_numpy(float)}

    has_mg, has_dp = bool((fam == "MG noise").any()), bool(ov["dp"].any())
    series = [{"label": "MG noise (κ)", **curve(ov[fam.isin(["baseline", "MG noise"])] if has_mg else ov[:0])},
              {"label": "DP-SGD (σ)", **curve(ov[ov["dp"] | (fam == "baseline")] if has_dp else ov[:0])}]
    if not has_mg and not has_dp:  # the baseline alone
        series = [{"label": "baseline", **curve(ov)}]
    ys = [v for sr in series for v in sr["y"] if math.isfinite(v)]
    flat = (0.0, 1.0) if ys and max(ys) <= 0 else None  # all zero: no negative ε axis
    figs.append(_figure(line_plot(
        series, title="Empirical ε lower bound vs test accuracy", xlabel="target test accuracy",
        ylabel="empirical ε ≥ (max over attacks)", y_range=flat),
        "Largest empirical ε lower bound of any attack per setting (95% confidence); higher = more leakage "
        "proven. Both curves end at the undefended baseline."))

    check = ""
    dp_ov = ov[ov["dp"] & ov["noise_multiplier"].notna()]
    if (dp_ov["family"] == "DP-SGD").any():
        dp_ov = dp_ov[dp_ov["family"] == "DP-SGD"]
    if len(dp_ov):
        dp_ov = dp_ov.sort_values("noise_multiplier", kind="stable")
        sig = dp_ov["noise_multiplier"].to_numpy(float)
        series = [{"label": "accountant ε (upper bound)", "x": sig, "y": dp_ov["epsilon"].to_numpy(float)},
                  {"label": "empirical ε (lower bound)", "x": sig, "y": dp_ov["eps_strongest"].to_numpy(float)}]
        one = dp_ov["one_run_eps_lower_bound"].to_numpy(float)
        if np.isfinite(one).any():
            series.append({"label": "one-run ε (lower bound)", "x": sig, "y": one})
        pos = [v for sr in series for v in sr["y"] if math.isfinite(v) and v > 0]
        log_y = bool(pos) and max(pos) / min(pos) >= 30
        caption = ("The accountant's ε is a proven upper bound, the empirical ε a lower bound from attacks: the "
                   "true ε of the training run lies between them.")
        if log_y:
            zero = any(math.isfinite(v) and v <= 0 for sr in series for v in sr["y"])
            # a series of zero bounds only cannot be drawn on a log axis: leave it out
            series = [sr for sr in series if any(math.isfinite(v) and v > 0 for v in sr["y"])
                      or not any(math.isfinite(v) for v in sr["y"])]
            if zero:
                caption += " Lower bounds of 0 (nothing proven) cannot be drawn on the log axis."
        figs.append(_figure(line_plot(series, title="DP-SGD: accountant ε vs empirical ε",
                                      xlabel="σ (noise multiplier)",
                                      ylabel="ε" + (" (log scale)" if log_y else ""), log_y=log_y), caption))
        eps = dp_ov["epsilon"]
        above = (eps.notna() & ((dp_ov["eps_strongest"] > eps) | (dp_ov["one_run_eps_lower_bound"] > eps)))
        check = ", ".join(_setting_name(o) for _, o in dp_ov[above].iterrows())

    # log-log ROC of every attack on the baseline (else the least-defended target)
    chosen = next(((o, run, rocs[run]) for _, o in ov.sort_values("family", key=lambda f: f != "baseline",
                                                                   kind="stable").iterrows()
                   for run in o["runs"] if isinstance(rocs.get(run), Mapping) and rocs[run]), None)
    if chosen:
        o, run, per_run = chosen
        att = _attack_rows(st, o)
        series = []
        for a in sorted((k for k in per_run if isinstance(k, str)), key=_attack_key):
            try:
                fpr, tpr = per_run[a][0], per_run[a][1]
            except (TypeError, IndexError, KeyError):
                continue
            auc = _num(att.loc[a, "auc"]) if a in att.index else math.nan
            series.append({"label": f"{a} (AUC {auc:.2f})" if math.isfinite(auc) else a,
                           "x": np.asarray(fpr, dtype=float), "y": np.asarray(tpr, dtype=float), "markers": False})
        fpr_lo = _fpr_floor(g.loc[g["target_run"] == run, "n_nonmembers"])
        name = _setting_name(o)
        which = "the undefended baseline" if o["family"] == "baseline" else name
        figs.append(_figure(line_plot(
            series, title=f"ROC of every attack, {name} (log-log)", xlabel="false-positive rate",
            ylabel="true-positive rate", log_x=True, log_y=True, x_range=(fpr_lo, 1), y_range=(fpr_lo, 1),
            diagonal=True),
            f"All attacks on {which} ({run}), log-log axes from FPR {fpr_lo:.2g} (1 / non-members): the higher a "
            "curve at low FPR, the more members it identifies confidently; dashed: chance."))
    return figs, check


def _exposure(ov: pd.DataFrame, extras: Any, dataset: str) -> list[dict]:
    """Per setting run with exposure details (the baseline first): its classes and samples."""
    items = [(o, run, ex) for _, o in ov.sort_values("family", key=lambda f: f != "baseline", kind="stable").iterrows()
             for run in o["runs"] if (ex := _extras_of(extras, run, "exposure"))]
    counts: dict[str, int] = {}
    for o, _, _ in items:
        counts[_setting_name(o)] = counts.get(_setting_name(o), 0) + 1
    out = []
    for o, run, ex in items:
        name = _setting_name(o)
        classes = []
        per_class = ex.get("per_class_auc")
        if isinstance(per_class, Mapping):
            def order(c: Any) -> tuple:
                try:
                    return (0, int(c), "")
                except (TypeError, ValueError):
                    return (1, 0, str(c))
            aucs = {c: _num(a) for c, a in per_class.items()}
            finite = [a for a in aucs.values() if math.isfinite(a)]
            top = max(finite) if finite else math.nan
            for c in sorted(aucs, key=order):
                a = aucs[c]
                width = max(0.0, min(1.0, (a - 0.5) / 0.5)) * 100 if math.isfinite(a) else 0.0
                classes.append({"name": _class_name(dataset, c), "auc": _f3(a), "width": f"{width:.0f}",
                                "top": math.isfinite(a) and a == top})
        samples = ex.get("top_samples")
        samples = [{"index": _int(s.get("index")), "name": _class_name(dataset, s.get("class")),
                    "score": _sig3(s.get("score"))}
                   for s in (samples if isinstance(samples, (list, tuple)) else []) if isinstance(s, Mapping)]
        out.append({"label": name if counts[name] == 1 else f"{name} [{run}]", "attack": _text(ex.get("attack")),
                    "classes": classes, "samples": samples})
    return out


def _empirical_section(model: str, dataset: str, g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame,
                       rocs: Mapping[str, Any], extras: Any) -> str:
    if not _has_empirical(g, extras) or ov.empty:
        return ""
    from privaudit.reporting.templates import render

    attacks = sorted(set(g["attack"]), key=_attack_key)
    sizes = sorted({_int(loo.get("pool_size")) for _, o in ov.iterrows() for run in o["runs"]
                    if (loo := _extras_of(extras, run, "loo"))})
    pool_text = (f' Pool attacks use {", ".join(sizes)} reference models per target trained like the target (half '
                 'of them on each sample).' if sizes else "")
    figs, check = _empirical_plots(st, ov, g, rocs)
    return render("strongest.html.j2", e={
        "slug": _slug("e", model, dataset), "pool_text": pool_text, "attacks": [a.split("-") for a in attacks],
        "rows": _empirical_rows(st, ov, attacks, extras), "check": check, "figures": figs,
        "exposure": _exposure(ov, extras, dataset)})


def _with_one_run(table: pd.DataFrame | None, extras: Mapping) -> pd.DataFrame | None:
    """The table with ``one_run_eps_lower_bound`` taken from the extras where the table has
    none (tables written before the column existed)."""
    if table is None or not len(table) or not extras:
        return table
    out = table.copy()
    have = out["one_run_eps_lower_bound"] if "one_run_eps_lower_bound" in out.columns else pd.Series(np.nan, out.index)
    runs = out["target_run"] if "target_run" in out.columns else pd.Series(None, out.index)
    found = runs.map(lambda r: _num(_extras_of(extras, r, "one_run").get("eps_lower_bound")))
    out["one_run_eps_lower_bound"] = pd.to_numeric(have, errors="coerce").fillna(found)
    return out


def _defences_section(table: pd.DataFrame) -> str:
    """NoisyCGD (convex-relu) beside DP-SGD (mlp) at equal ε and MG noise at equal accuracy."""
    comp = noisycgd_comparison(table)
    if comp.empty:
        return ""
    from privaudit.reporting.templates import render

    head = ["dataset", "attack", "P", "mlp width", "NoisyCGD σ", "ε", "NoisyCGD test acc", "DP-SGD test acc",
            "NoisyCGD AUC", "DP-SGD AUC", "MG AUC", "NoisyCGD TPR@0.1%", "DP-SGD TPR@0.1%", "MG TPR@0.1%"]
    comp = comp.assign(_rank=comp["attack"].map(_ATTACK_ORDER).fillna(9)).sort_values(
        ["dataset", "_rank", "attack", "noise_multiplier"], kind="stable")
    rows = [[_text(r["dataset"]), _text(r["attack"]), _int(r["width"]), _text(r["mlp_width"]),
             _short(r["noise_multiplier"]), _sig3(r["epsilon"]), _f3(r["ncgd_test_accuracy"]),
             _f3(r["dpsgd_test_accuracy"]), _f3(r["ncgd_auc"]), _f3(r["dpsgd_auc"]), _f3(r["mg_auc"]),
             _pct(r["ncgd_tpr_at_0p1pct_fpr"]), _pct(r["dpsgd_tpr_at_0p1pct_fpr"]), _pct(r["mg_tpr_at_0p1pct_fpr"])]
            for _, r in comp.iterrows()]
    return render("defences.html.j2", head=head, rows=rows, dash=_DASH)


def render_report(table: pd.DataFrame, rocs: Mapping[str, Mapping[str, Any]] | None = None, *,
                  title: str = "privaudit report", generated: str = "",
                  extras: Mapping[str, Mapping] | None = None, papers_html: str = "",
                  summary: Summary | None = None, figures: list | None = None) -> str:
    """The complete, self-contained HTML5 report page as a string.

    ``table``: the trade-off table (columns in :data:`TABLE_COLUMNS`; missing columns are
    treated as all-NaN). ``rocs``: ``{target_run: {attack: (fpr, tpr)}}``; entries for
    runs not in the table are ignored. ``generated``: a timestamp text shown under the
    title. ``extras``: ``{target_run: {"loo": ..., "exposure": ..., "one_run": ...}}`` as
    written next to each attack (see :func:`privaudit.reporting.build.read_extras`); optional,
    any part may be missing. A (model, dataset) group with pool attacks, empirical ε or
    one-run values gets a "Strongest attacks and empirical ε" part. An empty table gives a
    page saying nothing has been audited yet. ``papers_html``: the "Papers' figures" section
    (:func:`privaudit.reporting.papers.papers_section`), placed before "How to read this".
    """
    rocs = rocs if isinstance(rocs, Mapping) else {}
    extras = extras if isinstance(extras, Mapping) else {}
    summary = summary if summary is not None else summarise(_with_one_run(table, extras))
    df = _prepare(table)
    groups = [(str(m), str(d), g) for (m, d), g in df.groupby(["model", "dataset"], sort=True)]

    from markupsafe import Markup

    from privaudit.reporting.templates import render, stylesheet

    defences = _defences_section(df) if groups else ""
    toc, sections = [], []
    if groups:
        toc = [("table", "Trade-off table"), *((_slug("g", m, d), f"{m} · {d}") for m, d, _ in groups)]
        toc += [("defences", "NoisyCGD vs DP-SGD")] if defences else []
        toc += [("papers", "Papers' figures")] if papers_html else []
        toc += [("howto", "How to read this")]
        views = [_group_view(m, d, g, summary, extras) for m, d, g in groups]
        sections = [_first_screen(summary, figures or []), _key_findings(views),
                    _tradeoff_table(groups, n_rows=len(df), n_targets=df["_run"].nunique()),
                    *(_name_dp(_group_section(v, rocs, extras), v["g"]) for v in views),
                    defences]
    return render("page.html.j2", title=title, generated=generated, toc=toc, css=Markup(stylesheet()),
                  sections=[Markup(x) for x in sections if x], papers=Markup(papers_html)) + "\n"
