"""The self-contained HTML report page.

:func:`render_report` turns the trade-off table (one row per target, defence setting and
attack) and the attacks' ROC curves into one HTML5 document that opens from disk with no
network. The page skeleton, its first screen (the verdict, from :mod:`privaudit.report.summary`),
the long per-attack table, the NoisyCGD comparison and "How to read this" are Jinja2 templates
with autoescaping (``templates/``); the stylesheet ``templates/report.css`` is inlined; plots are
inline SVG drawn by matplotlib (:mod:`privaudit.report.plots`). The key findings, the per-group
plot sections and the strongest-attacks part are still written here as escaped strings. There is no
JavaScript, no font, no image and no link to anything outside the page (only ``#``
anchors). Every string that comes from the table or the ROC mapping is HTML-escaped.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from privaudit.formatting import lower_bound, sig3, slug
from privaudit.report.build import COLUMNS
from privaudit.report.defences import noisycgd_comparison
from privaudit.report.iso import as_bool, iso_accuracy, iso_summary, split_curves
from privaudit.metrics import strongest_attack
from privaudit.report.summary import Summary, compare, setting_label, summarise
from privaudit.report.summary import settings as setting_rows
from privaudit.report.plots import line_plot

__all__ = ["render_report", "TABLE_COLUMNS", "setting_label"]

#: The trade-off table's columns, in order (the CSV's, privaudit.report.build).
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
_FAMILY = {0: "baseline", 1: "MG noise", 2: "DP-SGD", 3: "MG + DP-SGD"}
_CLASS_NAMES = {
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                "ship", "truck"),
    "digits": tuple(str(i) for i in range(10)),
}
_ISO_METRICS = ("auc", "precision", "recall")
_METRIC_NAMES = {"auc": "AUC", "precision": "precision", "recall": "recall",
                 "accuracy": "attack accuracy", "advantage": "advantage"}
_DASH = "—"


# ---------------------------------------------------------------------------------------
# small helpers


def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


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


_lb = lower_bound  # one rounding rule with the terminal (privaudit.formatting)


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
    df["_baseline"] = (~df["dp"]) & (kappa == 0)
    df["_attack_rank"] = df["attack"].map(_ATTACK_ORDER).fillna(9)
    df["_key"] = [setting_label(d, k, s)
                  for d, k, s in zip(df["dp"], df["kappa"], df["noise_multiplier"])]
    df["_run"] = df["target_run"].map(_text)
    src = df["source"].where(df["source"].notna(), df["shadow_run"])
    df["_source"] = src.map(_text)
    df = df.sort_values(["model", "dataset", "_rank", "kappa", "noise_multiplier", "_run",
                         "_attack_rank", "attack"], kind="stable", na_position="first")
    return df.reset_index(drop=True)


def _primary_attack(g: pd.DataFrame) -> str | None:
    attacks = list(dict.fromkeys(g.sort_values("_attack_rank", kind="stable")["attack"]))
    if not attacks:
        return None
    return "shadow" if "shadow" in attacks else attacks[0]


def _curve_points(a: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MG and DP points of one attack's rows, averaged per setting, sorted by accuracy.

    MG: rows with dp False (baseline included); DP: dp True rows plus the baseline. A
    curve that would hold nothing but the baseline is left empty.
    """
    cols = ["test_accuracy", "train_accuracy", "auc", "precision", "recall", "epsilon",
            "kappa", "noise_multiplier"]

    def agg(rows: pd.DataFrame) -> pd.DataFrame:
        if rows.empty:
            return pd.DataFrame(columns=["_key", "dp", *cols])
        out = (rows.groupby(["_key", "dp"], sort=False)[cols].mean().reset_index())
        out = out.sort_values("test_accuracy", kind="stable", na_position="last")
        return out.reset_index(drop=True)

    has_mg = bool(((~a["dp"]) & ~a["_baseline"]).any())
    has_dp = bool(a["dp"].any())
    mg = agg(a[~a["dp"]] if has_mg else a.iloc[0:0])
    dp = agg(a[a["dp"] | a["_baseline"]] if has_dp else a.iloc[0:0])
    return mg, dp


# ---------------------------------------------------------------------------------------
# sections


def _verdict(g: pd.DataFrame) -> str:
    """One key-findings sentence (HTML) about a (model, dataset) group."""
    attack = _primary_attack(g)
    if attack is None:
        return "No attack results."
    if _dp_family(g) == "NoisyCGD":
        return (f'NoisyCGD trains only this model; it is set beside {_DPSGD_KEPT} and MG noise on the '
                f'mlp in <a href="#defences">NoisyCGD vs {_DPSGD_KEPT} and MG noise</a> where both '
                'were audited.')
    a = g[g["attack"] == attack]
    name = f"{_esc(attack)} attack"
    c = compare(a, "auc")
    if _fin(c["gap"]):
        rng = f"acc range {c['acc_low']:.3f}–{c['acc_high']:.3f}"
        ci = (f"95% interval {c['gap_lo']:+.3f} to {c['gap_hi']:+.3f}, {c['interval']}" if _fin(c["gap_lo"])
              else "no interval")
        verdict = c["verdict"]
        if verdict in _VERDICT_CSS and verdict != "no significant difference at 95 %":
            verdict = f"<strong>{_esc(verdict)}</strong>"
        else:
            verdict = _esc(verdict)
        return (f"At equal test accuracy ({rng}), DP-SGD − MG noise in {name} AUC is {c['gap']:+.3f} "
                f"({ci}) → {verdict}.")
    # why no comparison is possible
    if a["auc"].notna().sum() == 0:
        return f"No iso-accuracy comparison: the {name} has no AUC values."
    n_dp = int(a["dp"].sum())
    n_mg = int(((~a["dp"]) & ~a["_baseline"]).sum())
    if n_dp == 0 and n_mg == 0:
        return "No iso-accuracy comparison: only the undefended baseline has been audited."
    if n_dp == 0:
        return "No iso-accuracy comparison: there are no DP-SGD runs to compare MG noise with."
    if n_mg == 0 and not a["_baseline"].any():
        return ("No iso-accuracy comparison: there are no MG-noise runs (nor a baseline) to "
                "compare DP-SGD with.")
    (mg_acc, _), (dp_acc, _) = split_curves(a, "auc")
    if len(mg_acc) < 2 or len(dp_acc) < 2:
        side = "MG-noise" if len(mg_acc) < 2 else "DP-SGD"
        return (f"No iso-accuracy comparison: the {side} curve has fewer than two distinct "
                f"test accuracies.")
    return (f"No iso-accuracy comparison: the test-accuracy ranges do not overlap (MG noise "
            f"{mg_acc[0]:.3f}–{mg_acc[-1]:.3f}, DP-SGD {dp_acc[0]:.3f}–{dp_acc[-1]:.3f}).")


def _baseline_sentence(g: pd.DataFrame) -> str:
    attack = _primary_attack(g)
    base = g[g["_baseline"]]
    if base.empty:
        return "No undefended baseline (κ = 0, no DP-SGD) has been audited."
    acc = base.drop_duplicates("_run")["test_accuracy"].mean()
    auc = base[base["attack"] == attack]["auc"].mean() if attack else float("nan")
    return (f"Undefended baseline: test accuracy {_f3(acc)}, {_esc(attack or 'attack')}-attack "
            f"AUC {_f3(auc)}.")


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
    """The verdict, its figure (:mod:`privaudit.report.figures`, inline SVG) and one row per
    setting (templates/first_screen.html.j2)."""
    from markupsafe import Markup

    from privaudit.report.templates import render

    svgs = {f.stem: f for f in figures}

    groups = []
    st, vd = summary.settings, summary.verdicts
    for (model, dataset), g in st.groupby(["model", "dataset"], sort=True):
        v = vd[(vd["model"] == model) & (vd["dataset"] == dataset)] if len(vd) else vd
        strongest = next((a for a in v["attack"][v["comparison"] == "strongest attack"]), None) if len(v) else None
        verdicts = []
        for _, r in v.iterrows():
            # TPR at 0.1 % FPR in percentage points: its gaps are a few hundredths of a percent
            scale, unit = (100.0, " pp") if r["metric"] == "tpr_at_0p1pct_fpr" else (1.0, "")
            verdicts.append({
                "comparison": r["comparison"], "attack": r["attack"], "measure": _MEASURES.get(r["metric"], r["metric"]),
                "accuracy": f"{_f3(r['acc_low'])}–{_f3(r['acc_high'])}" if _fin(r["acc_low"]) else _DASH,
                "gap": f"{scale * r['gap']:+.3f}{unit}" if _fin(r["gap"]) else _DASH,
                "interval": (f"[{scale * r['gap_lo']:+.3f}, {scale * r['gap_hi']:+.3f}] {r['interval']}"
                             if _fin(r["gap_lo"]) else r["interval"]),
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


def _key_findings(df: pd.DataFrame, groups: list[tuple[str, str, pd.DataFrame]],
                  extras: Any = None) -> str:
    items = []
    for model, dataset, g in groups:
        emp = _empirical_sentence(g, extras)
        emp = (f'<span class="emp">{emp} <a href="#{_slug("e", model, dataset)}">(table)</a>'
               '</span>' if emp else "")
        items.append(_name_dp(
            f'<li><a href="#{_slug("g", model, dataset)}"><strong>{_esc(model)} · '
            f'{_esc(dataset)}</strong></a>: {_verdict(g)} '
            f'<span class="muted">{_baseline_sentence(g)}</span>{emp}</li>', g))
    return ('<section class="findings" aria-labelledby="kf"><h2 id="kf">Key findings</h2>'
            f'<ul>{"".join(items)}</ul></section>')


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


def _tradeoff_table(groups: list[tuple[str, str, pd.DataFrame]]) -> str:
    """The long table (templates/tradeoff_table.html.j2): rows of one target striped alike."""
    from privaudit.report.templates import render

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
    return render("tradeoff_table.html.j2", head=head, groups=out)


def _figure(svg: str, caption: str) -> str:
    return f'<figure>{svg}<figcaption>{caption}</figcaption></figure>'


def _per_kappa(rows: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    r = rows.dropna(subset=["kappa"])
    if r.empty:
        return np.empty(0), np.empty(0)
    m = r.groupby("kappa", sort=True)[col].mean()
    return m.index.to_numpy(dtype=float), m.to_numpy(dtype=float)


def _points_table(attack: str, mg: pd.DataFrame, dp: pd.DataFrame) -> str:
    rows = []
    for curve, pts in (("MG noise", mg), ("DP-SGD", dp)):
        for _, p in pts.iterrows():
            label = setting_label(bool(p["dp"]), p["kappa"], p["noise_multiplier"])
            rows.append(
                f'<tr><td class="txt">{curve}</td><td class="txt">{_esc(label)}</td>'
                f'<td class="num">{_esc(_sig3(p["epsilon"]))}</td>'
                f'<td class="num">{_f3(p["test_accuracy"])}</td>'
                f'<td class="num">{_f3(p["precision"])}</td>'
                f'<td class="num">{_f3(p["recall"])}</td>'
                f'<td class="num">{_f3(p["auc"])}</td></tr>')
    if not rows:
        return ""
    return ('<details class="points" open><summary>Points of the trade-off curves '
            f'({_esc(attack)} attack; averaged per setting)</summary>'
            '<div class="tablewrap fit"><table class="data compact"><thead><tr>'
            '<th class="txt">curve</th><th class="txt">setting</th><th class="num">ε</th>'
            '<th class="num">test acc</th><th class="num">precision</th>'
            '<th class="num">recall</th><th class="num">AUC</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></details>')


def _iso_block(g: pd.DataFrame) -> str:
    iso = pd.concat([iso_accuracy(g, m) for m in _ISO_METRICS], ignore_index=True)
    summ = iso_summary(iso) if not iso.empty else iso_summary(None)
    intro = ('<p class="muted">Per seed, both curves interpolated linearly on 25 accuracies spanning the '
             'overlap of their test-accuracy ranges, DP − MG averaged over it; then the mean over seeds with '
             'a 95 % interval (t over seeds, or with one seed a bootstrap over the sampling of each point). '
             'DP − MG &gt; 0 means DP-SGD leaks more at equal accuracy; a defence is named only when the '
             'interval excludes 0.</p>')
    if summ.empty:
        return (f'<h3>Iso-accuracy comparison</h3>{intro}<p class="note">No comparison '
                f'possible: {_verdict(g).removeprefix("No iso-accuracy comparison: ")}</p>')
    # one row per attack, one column per metric (many attacks would make a long list)
    metrics = [m for m in _ISO_METRICS if (summ["metric"] == m).any()]
    rows = []
    for attack in sorted(set(summ["attack"]), key=lambda a: _attack_key(str(a))):
        sa = summ[summ["attack"] == attack]
        first = sa.iloc[0]
        cells = [f'<td class="txt">{_esc(attack)}</td>',
                 f'<td class="num">{first["acc_low"]:.3f}–{first["acc_high"]:.3f}</td>']
        for m in metrics:
            if not (sa["metric"] == m).any():
                cells.append(f'<td class="num missing">{_DASH}</td>')
                continue
            c = compare(g[g["attack"] == attack], m)
            if not _fin(c["gap"]):
                cells.append(f'<td class="num missing">{_DASH}</td>')
                continue
            ci = f" [{c['gap_lo']:+.3f}, {c['gap_hi']:+.3f}]" if _fin(c["gap_lo"]) else ""
            tip = (f"{_METRIC_NAMES.get(m, m)}: mean DP − MG {c['gap']:+.4f}{ci} ({c['interval']}) over test "
                   f"accuracy {c['acc_low']:.3f}–{c['acc_high']:.3f}")
            cells.append(f'<td class="num" title="{_esc(tip)}">{c["gap"]:+.3f}{_esc(ci)} '
                         f'<span class="pill {_VERDICT_CSS.get(c["verdict"], "none")}">{_esc(c["verdict"])}</span></td>')
        rows.append(f'<tr>{"".join(cells)}</tr>')
    head = "".join(f'<th class="num">{_esc(_METRIC_NAMES.get(m, m))}: DP − MG [95 %]</th>'
                   for m in metrics)
    return (f'<h3>Iso-accuracy comparison</h3>{intro}'
            '<div class="tablewrap fit"><table class="data compact iso"><thead><tr>'
            f'<th class="txt">attack</th><th class="num">test-acc range</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _roc_series(g: pd.DataFrame, attack: str, rocs: Mapping[str, Any]) -> list[dict]:
    series: list[dict] = []
    runs = g[g["attack"] == attack].drop_duplicates("_run")
    labels: list[tuple[str, str, Any]] = []
    for _, r in runs.iterrows():
        run = r["target_run"]
        per_run = rocs.get(run) if isinstance(run, str) else None
        if not isinstance(per_run, Mapping) or attack not in per_run:
            continue
        curve = per_run[attack]
        try:  # (fpr, tpr) -- a longer tuple such as sklearn's (fpr, tpr, thresholds) works too
            fpr, tpr = curve[0], curve[1]
        except (TypeError, IndexError, KeyError):
            continue
        label = setting_label(bool(r["dp"]), r["kappa"], r["noise_multiplier"], r["epsilon"])
        labels.append((label, run, (fpr, tpr)))
    counts: dict[str, int] = {}
    for label, _, _ in labels:
        counts[label] = counts.get(label, 0) + 1
    for label, run, (fpr, tpr) in labels:
        shown = label if counts[label] == 1 else f"{label} [{run}]"
        series.append({"label": shown, "x": np.asarray(fpr, dtype=float),
                       "y": np.asarray(tpr, dtype=float), "markers": False})
    return series


def _group_section(model: str, dataset: str, g: pd.DataFrame, rocs: Mapping[str, Any],
                   extras: Any = None) -> str:
    sid = _slug("g", model, dataset)
    attack = _primary_attack(g) or "shadow"
    a = g[g["attack"] == attack]
    figs: list[str] = []

    # (a) test accuracy vs kappa (MG rows)
    mg_targets = g[~g["dp"]].drop_duplicates("_run")
    kx, test_y = _per_kappa(mg_targets, "test_accuracy")
    _, train_y = _per_kappa(mg_targets, "train_accuracy")
    figs.append(_figure(line_plot(
        [{"label": "test accuracy", "x": kx, "y": test_y},
         {"label": "train accuracy", "x": kx, "y": train_y}],
        title="Accuracy vs MG noise κ", xlabel="κ (MG noise std)", ylabel="accuracy"),
        "Target accuracy over κ (runs without DP-SGD; κ = 0 is the baseline)."))

    # (b) attack AUC vs kappa, one series per attack
    mg_rows = g[~g["dp"]]
    by_attack = []
    for att in dict.fromkeys(g.sort_values("_attack_rank", kind="stable")["attack"]):
        x, y = _per_kappa(mg_rows[mg_rows["attack"] == att], "auc")
        by_attack.append({"label": f"{att} attack", "x": x, "y": y})
    figs.append(_figure(line_plot(
        by_attack, title="Attack AUC vs MG noise κ", xlabel="κ (MG noise std)",
        ylabel="attack AUC"), "Leakage over κ, one curve per attack (0.5 = chance)."))

    # (c)-(e) leakage vs test accuracy, MG curve vs DP curve, with 95 % intervals (summary layer)
    mg_pts, dp_pts = _curve_points(a)
    st = setting_rows(a)
    mg_st = st[st["family"].isin(["baseline", "MG noise"])].sort_values("test_accuracy") if len(mg_pts) else st[:0]
    dp_st = st[st["family"].isin(["baseline", "DP-SGD"])].sort_values("test_accuracy") if len(dp_pts) else st[:0]
    for metric, name in (("precision", "precision"), ("recall", "recall"), ("auc", "AUC")):
        figs.append(_figure(line_plot(
            [{"label": "MG noise (κ)", "x": mg_st["test_accuracy"], "y": mg_st[metric],
              "y_lo": mg_st[f"{metric}_lo"], "y_hi": mg_st[f"{metric}_hi"]},
             {"label": "DP-SGD (σ)", "x": dp_st["test_accuracy"], "y": dp_st[metric],
              "y_lo": dp_st[f"{metric}_lo"], "y_hi": dp_st[f"{metric}_hi"]}],
            title=f"Attack {name} vs test accuracy", xlabel="target test accuracy",
            ylabel=f"{attack} attack {name}"),
            f"Privacy-utility trade-off ({_esc(attack)} attack); both curves end at the "
            f"undefended baseline when it has been audited; bars: 95 % intervals (over seeds; with one "
            f"seed, AUC's DeLong interval). Points are listed below."))

    # (g) ROC curves of the primary attack
    roc = _roc_series(g, attack, rocs)
    n_non = g["n_nonmembers"].dropna()
    fpr_lo = max(1e-4, 1.0 / float(n_non.min())) if len(n_non) and n_non.min() > 0 else 1e-4
    fpr_lo = min(fpr_lo, 0.1)
    roc_figs = [
        _figure(line_plot(roc, title=f"ROC, {attack} attack", xlabel="false-positive rate",
                          ylabel="true-positive rate", x_range=(0, 1), y_range=(0, 1),
                          diagonal=True),
                "Linear axes; dashed: chance."),
        _figure(line_plot(roc, title=f"ROC, {attack} attack (log-log)",
                          xlabel="false-positive rate", ylabel="true-positive rate",
                          log_x=True, log_y=True, x_range=(fpr_lo, 1), y_range=(fpr_lo, 1),
                          diagonal=True),
                f"Log-log axes from FPR {fpr_lo:.2g}: the low-FPR regime where "
                "confident membership claims live; dashed: chance."),
    ]

    emp = _empirical_sentence(g, extras)
    return (f'<section class="group" id="{sid}"><h2>{_esc(model)} · {_esc(dataset)}</h2>'
            f'<p>{_verdict(g)} <span class="muted">{_baseline_sentence(g)}</span>'
            f'{f"<span class=emp>{emp}</span>" if emp else ""}</p>'
            f'{_empirical_section(model, dataset, g, rocs, extras)}'
            f'<h3>Trade-off plots</h3><div class="plots">{"".join(figs)}</div>'
            f'{_points_table(attack, mg_pts, dp_pts)}'
            f'{_iso_block(g)}'
            f'<h3>ROC curves</h3><div class="plots">{"".join(roc_figs)}</div></section>')


# ---------------------------------------------------------------------------------------
# strongest attacks and empirical epsilon

_EMP_METRICS = ["test_accuracy", "epsilon", "delta", "n_nonmembers", "auc", "tpr_at_1pct_fpr",
                "tpr_at_0p1pct_fpr", "tpr_at_1pct_fpr_lo", "tpr_at_1pct_fpr_hi",
                "tpr_at_0p1pct_fpr_lo", "tpr_at_0p1pct_fpr_hi", "eps_lower_bound",
                "loo_n_targets", "loo_auc_mean", "loo_auc_std", "loo_eps_lower_bound_mean",
                "loo_eps_lower_bound_std"]


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


def _setting_name(rank: int, dp: bool, kappa: Any, sigma: Any) -> str:
    if rank == 0:
        return "baseline"
    return f"{_FAMILY.get(rank, '?')} {setting_label(dp, kappa, sigma)}"


def _settings(g: pd.DataFrame, extras: Any) -> list[dict]:
    """One record per defence setting of a group, in the group's order (baseline, MG by κ,
    DP-SGD by σ): metrics averaged over the setting's runs, per attack."""
    out = []
    for key, s in g.groupby("_key", sort=False):
        first = s.iloc[0]
        runs = list(dict.fromkeys(r for r in s["target_run"] if isinstance(r, str)))
        att = s.groupby("attack", sort=False)[_EMP_METRICS].mean()
        att = att.loc[sorted(att.index, key=_attack_key)]
        # one-run bound: the table's column, else the extras; averaged over runs
        one_run, info = [], {}
        for run, rows in s.groupby("_run", sort=False):
            v = rows["one_run_eps_lower_bound"].dropna()
            ex = _extras_of(extras, rows["target_run"].iloc[0], "one_run")
            if ex and not info:
                info = ex
            if len(v):
                one_run.append(float(v.iloc[0]))
            elif _fin(ex.get("eps_lower_bound")):
                one_run.append(_num(ex.get("eps_lower_bound")))
        strongest = strongest_attack(att.to_dict("index"))
        eps = att["eps_lower_bound"].dropna()
        eps_attack = str(eps.idxmax()) if len(eps) else None  # the largest bound (first on ties)
        per_run = s.drop_duplicates("_run")
        rank = int(first["_rank"])
        out.append({
            "key": key, "rank": rank, "dp": bool(first["dp"]), "kappa": first["kappa"],
            "sigma": first["noise_multiplier"],
            "name": _setting_name(rank, bool(first["dp"]), first["kappa"],
                                  first["noise_multiplier"]),
            "epsilon": per_run["epsilon"].mean(), "delta": per_run["delta"].mean(),
            "test_accuracy": per_run["test_accuracy"].mean(), "runs": runs,
            "n_runs": len(per_run), "attacks": att, "strongest": strongest,
            "eps_attack": eps_attack,
            "eps_max": _num(att.loc[eps_attack, "eps_lower_bound"]) if eps_attack else math.nan,
            "one_run": float(np.mean(one_run)) if one_run else math.nan, "one_run_info": info,
        })
    return out


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


def _settings_table(settings: list[dict], attacks: list[str]) -> str:
    head = ('<tr><th scope="col" class="txt">setting</th><th scope="col" class="num">test acc</th>'
            '<th scope="col" class="num">accountant ε</th>'
            '<th scope="col" class="num"><span class="nw">empirical ε ≥</span><br>'
            '<span class="sub">max over attacks</span></th>'
            '<th scope="col" class="num"><span class="nw">one-run ε ≥</span></th>'
            '<th scope="col" class="num">LOO AUC<br><span class="sub">strongest attack'
            '</span></th>'
            + "".join(f'<th scope="col" class="num att">{_esc(a).replace("-", "-<wbr>")}'
                      f'</th>' for a in attacks) + "</tr>")
    rows = []
    for st in settings:
        att = st["attacks"]
        name = _esc(st["name"])
        if st["n_runs"] > 1:
            name += f' <span class="muted">({st["n_runs"]} runs)</span>'
        run_tip = ", ".join(st["runs"])
        cells = [f'<th scope="row" class="txt" title="{_esc(run_tip)}">{name}</th>',
                 f'<td class="num">{_f3(st["test_accuracy"])}</td>']
        if st["dp"] and _fin(st["epsilon"]):
            tip = f"accountant upper bound at δ={_short(st['delta'])}"
            cells.append(f'<td class="num" title="{_esc(tip)}">{_esc(_sig3(st["epsilon"]))}</td>')
        elif st["dp"]:
            cells.append(f'<td class="num missing">{_DASH}</td>')
        else:
            cells.append(f'<td class="num missing" title="no formal ε">{_DASH} '
                         f'<span class="sub">no formal ε</span></td>')
        if st["eps_attack"]:
            r = att.loc[st["eps_attack"]]
            who = (f' <span class="sub">{_esc(st["eps_attack"])}</span>'
                   if st["eps_max"] > 0 else "")
            cells.append(f'<td class="num eps" title="{_esc(_eps_tip(r))}">'
                         f'<strong>{_esc(_lb(st["eps_max"]))}</strong>{who}</td>')
        else:
            cells.append(f'<td class="num missing">{_DASH}</td>')
        cls = "num" if _fin(st["one_run"]) else "num missing"
        cells.append(f'<td class="{cls}" title="{_esc(_one_run_tip(st["one_run_info"]))}">'
                     f'{_esc(_lb(st["one_run"]))}</td>')
        strong = st["strongest"]
        if strong and _fin(att.loc[strong, "loo_auc_mean"]):
            r = att.loc[strong]
            tip = (f"{strong}: each of the {_int(r['loo_n_targets'])} reference-pool models "
                   f"in turn as the target, the others as references")
            cells.append(f'<td class="num" title="{_esc(tip)}">{_f3(r["loo_auc_mean"])}'
                         f'<span class="sub">± {_f3(r["loo_auc_std"])}</span>'
                         '</td>')
        else:
            tip = (f"{strong} uses no reference pool" if strong else "no attack results")
            cells.append(f'<td class="num missing" title="{_esc(tip)}">{_DASH}</td>')
        for a in attacks:
            if a not in att.index or not (_fin(att.loc[a, "auc"])
                                          or _fin(att.loc[a, "tpr_at_0p1pct_fpr"])):
                cells.append(f'<td class="num missing">{_DASH}</td>')
                continue
            r = att.loc[a]
            auc = _num(r["auc"])
            auc_txt = f'{auc:.2f}' if math.isfinite(auc) else _DASH
            cls = "num att best" if a == strong else "num att"
            cells.append(f'<td class="{cls}" title="{_esc(_attack_tip(a, r))}">'
                         f'<span class="auc">{auc_txt}</span>'
                         f'<span class="tpr">{_pct(r["tpr_at_0p1pct_fpr"])}</span></td>')
        rows.append(f'<tr class="fam{st["rank"]}">{"".join(cells)}</tr>')
    return ('<div class="tablewrap fit"><table class="data compact strongest"><thead>'
            f'{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')


def _empirical_plots(settings: list[dict], g: pd.DataFrame, rocs: Mapping[str, Any]
                     ) -> tuple[list[str], str]:
    """The figures of the empirical-ε part, and a warning note (HTML, may be empty)."""
    figs: list[str] = []
    note = ""

    # (a) max empirical eps vs test accuracy, MG curve and DP curve (both with the baseline)
    def curve(sts: list[dict]) -> tuple[list[float], list[float]]:
        pts = sorted(((st["test_accuracy"], st["eps_max"]) for st in sts
                      if _fin(st["test_accuracy"]) and _fin(st["eps_max"])))
        return [p[0] for p in pts], [p[1] for p in pts]

    has_mg = any(st["rank"] == 1 for st in settings)
    has_dp = any(st["dp"] for st in settings)
    mg_x, mg_y = curve([st for st in settings if st["rank"] in (0, 1)] if has_mg else [])
    dp_x, dp_y = curve([st for st in settings if st["dp"] or st["rank"] == 0] if has_dp else [])
    series = [{"label": "MG noise (κ)", "x": mg_x, "y": mg_y},
              {"label": "DP-SGD (σ)", "x": dp_x, "y": dp_y}]
    if not has_mg and not has_dp:  # the baseline alone
        series = [{"label": "baseline", **dict(zip(("x", "y"), curve(settings)))}]
    ys = [v for sr in series for v in sr["y"] if math.isfinite(v)]
    flat = (0.0, 1.0) if ys and max(ys) <= 0 else None  # all zero: no negative ε axis
    figs.append(_figure(line_plot(
        series, title="Empirical ε lower bound vs test accuracy",
        xlabel="target test accuracy", ylabel="empirical ε ≥ (max over attacks)",
        y_range=flat),
        "Largest empirical ε lower bound of any attack per setting (95% confidence); higher "
        "= more leakage proven. Both curves end at the undefended baseline."))

    # (b) DP-SGD: accountant epsilon (upper bound) vs empirical lower bound, over sigma
    dp_sts = [st for st in settings if st["dp"] and _fin(st["sigma"])]
    if any(st["rank"] == 2 for st in dp_sts):
        dp_sts = [st for st in dp_sts if st["rank"] == 2]
    if dp_sts:
        dp_sts = sorted(dp_sts, key=lambda st: _num(st["sigma"]))
        sig = [_num(st["sigma"]) for st in dp_sts]
        acc_eps = [_num(st["epsilon"]) for st in dp_sts]
        emp = [st["eps_max"] for st in dp_sts]
        one = [st["one_run"] for st in dp_sts]
        series = [{"label": "accountant ε (upper bound)", "x": sig, "y": acc_eps},
                  {"label": "empirical ε (lower bound)", "x": sig, "y": emp}]
        if any(math.isfinite(v) for v in one):
            series.append({"label": "one-run ε (lower bound)", "x": sig, "y": one})
        pos = [v for sr in series for v in sr["y"] if math.isfinite(v) and v > 0]
        log_y = bool(pos) and max(pos) / min(pos) >= 30
        caption = ("The accountant's ε is a proven upper bound, the empirical ε a lower bound "
                   "from attacks: the true ε of the training run lies between them.")
        if log_y:
            zero = any(math.isfinite(v) and v <= 0 for sr in series for v in sr["y"])
            # a series of zero bounds only cannot be drawn on a log axis: leave it out
            series = [sr for sr in series
                      if any(math.isfinite(v) and v > 0 for v in sr["y"])
                      or not any(math.isfinite(v) for v in sr["y"])]
            if zero:
                caption += " Lower bounds of 0 (nothing proven) cannot be drawn on the log axis."
        figs.append(_figure(line_plot(
            series, title="DP-SGD: accountant ε vs empirical ε", xlabel="σ (noise multiplier)",
            ylabel="ε" + (" (log scale)" if log_y else ""), log_y=log_y), caption))
        bad = [st for st in dp_sts
               if _fin(st["epsilon"]) and _fin(st["eps_max"]) and st["eps_max"] > st["epsilon"]]
        bad += [st for st in dp_sts if st not in bad and _fin(st["epsilon"])
                and _fin(st["one_run"]) and st["one_run"] > st["epsilon"]]
        if bad:
            names = ", ".join(st["name"] for st in bad)
            note = ('<p class="note"><strong>Check:</strong> an empirical ε lower bound exceeds '
                    f'the accountant\'s ε for {_esc(names)}. A lower bound above a proven upper '
                    'bound points to a problem (the per-sample independence heuristic, a '
                    'selection on the audited model, or a bug in training or accounting).</p>')

    # (c) log-log ROC of every attack on the baseline (else the least-defended target)
    chosen = None
    for st in sorted(settings, key=lambda st: st["rank"] != 0):
        for run in st["runs"]:
            per_run = rocs.get(run)
            if isinstance(per_run, Mapping) and per_run:
                chosen = (st, run, per_run)
                break
        if chosen:
            break
    if chosen:
        st, run, per_run = chosen
        series = []
        for a in sorted((k for k in per_run if isinstance(k, str)), key=_attack_key):
            try:
                fpr, tpr = per_run[a][0], per_run[a][1]
            except (TypeError, IndexError, KeyError):
                continue
            auc = st["attacks"]["auc"].get(a, math.nan) if a in st["attacks"].index else math.nan
            label = f"{a} (AUC {auc:.2f})" if math.isfinite(_num(auc)) else a
            series.append({"label": label, "x": np.asarray(fpr, dtype=float),
                           "y": np.asarray(tpr, dtype=float), "markers": False})
        n_non = g.loc[g["target_run"] == run, "n_nonmembers"].dropna()
        fpr_lo = max(1e-4, 1.0 / float(n_non.min())) if len(n_non) and n_non.min() > 0 else 1e-4
        fpr_lo = min(fpr_lo, 0.1)
        which = "the undefended baseline" if st["rank"] == 0 else _esc(st["name"])
        figs.append(_figure(line_plot(
            series, title=f"ROC of every attack, {st['name']} (log-log)",
            xlabel="false-positive rate", ylabel="true-positive rate", log_x=True, log_y=True,
            x_range=(fpr_lo, 1), y_range=(fpr_lo, 1), diagonal=True),
            f"All attacks on {which} ({_esc(run)}), log-log axes from FPR {fpr_lo:.2g} "
            "(1 / non-members): the higher a curve at low FPR, the more members it identifies "
            "confidently; dashed: chance."))
    return figs, note


def _class_name(dataset: str, c: Any) -> str:
    names = _CLASS_NAMES.get(re.sub(r"[^a-z0-9]", "", str(dataset).lower()))
    try:
        i = int(c)
    except (TypeError, ValueError):
        return str(c)
    if names and 0 <= i < len(names):
        return names[i]
    return str(i)


def _exposure_tables(ex: Mapping, dataset: str) -> str:
    per_class = ex.get("per_class_auc")
    rows = []
    if isinstance(per_class, Mapping):
        items = []
        for c, auc in per_class.items():
            try:
                key = (0, int(c), "")
            except (TypeError, ValueError):
                key = (1, 0, str(c))
            items.append((key, c, _num(auc)))
        items.sort(key=lambda t: t[0])
        finite = [a for _, _, a in items if math.isfinite(a)]
        top = max(finite) if finite else math.nan
        for _, c, auc in items:
            width = max(0.0, min(1.0, (auc - 0.5) / 0.5)) * 100 if math.isfinite(auc) else 0.0
            cls = ' class="top"' if math.isfinite(auc) and auc == top else ""
            rows.append(f'<tr{cls}><td class="txt">{_esc(_class_name(dataset, c))}</td>'
                        f'<td class="num">{_f3(auc)}</td><td class="bar" aria-hidden="true">'
                        f'<span style="width:{width:.0f}%"></span></td></tr>')
    cls_table = ('<table class="data compact exposure"><caption>AUC per class</caption><thead>'
                 '<tr><th class="txt">class</th><th class="num">AUC</th>'
                 '<th class="bar">above chance</th></tr></thead>'
                 f'<tbody>{"".join(rows)}</tbody></table>') if rows else ""
    samples = ex.get("top_samples")
    srows = []
    if isinstance(samples, (list, tuple)):
        for i, smp in enumerate(samples, 1):
            if not isinstance(smp, Mapping):
                continue
            srows.append(f'<tr><td class="num">{i}</td>'
                         f'<td class="num">{_esc(_int(smp.get("index")))}</td>'
                         f'<td class="txt">{_esc(_class_name(dataset, smp.get("class")))}</td>'
                         f'<td class="num">{_esc(_sig3(smp.get("score")))}</td></tr>')
    smp_table = ('<table class="data compact exposure"><caption>Most exposed members</caption>'
                 '<thead><tr><th class="num">#</th><th class="num">sample index</th>'
                 '<th class="txt">class</th><th class="num">score</th></tr></thead>'
                 f'<tbody>{"".join(srows)}</tbody></table>') if srows else ""
    if not cls_table and not smp_table:
        return '<p class="muted">No exposure details.</p>'
    return f'<div class="exposure-pair">{cls_table}{smp_table}</div>'


def _exposure_block(settings: list[dict], extras: Any, dataset: str) -> str:
    items = []
    for st in sorted(settings, key=lambda st: st["rank"] != 0):
        for run in st["runs"]:
            ex = _extras_of(extras, run, "exposure")
            if ex:
                items.append((st, run, ex))
    if not items:
        return ""
    counts: dict[str, int] = {}
    for st, _, _ in items:
        counts[st["name"]] = counts.get(st["name"], 0) + 1
    blocks = []
    for i, (st, run, ex) in enumerate(items):
        label = st["name"] if counts[st["name"]] == 1 else f"{st['name']} [{run}]"
        summary = (f'{_esc(label)} <span class="muted">· {_esc(_text(ex.get("attack")))} '
                   f'attack</span>')
        opened = " open" if i == 0 else ""
        blocks.append(f'<details class="exposure"{opened}><summary>{summary}</summary>'
                      f'{_exposure_tables(ex, dataset)}</details>')
    return ('<h4>Exposure: which classes and samples leak most</h4><p class="muted">Per class: '
            'the attack\'s AUC on that class\'s members vs non-members (the strongest pool '
            'attack by AUC); the bar shows the AUC above chance (0.5 → empty, 1 → full). '
            'Most exposed: the members with the highest attack scores (sample index in the '
            f'data set).</p>{"".join(blocks)}')


def _empirical_section(model: str, dataset: str, g: pd.DataFrame, rocs: Mapping[str, Any],
                       extras: Any) -> str:
    if not _has_empirical(g, extras):
        return ""
    settings = _settings(g, extras)
    attacks = sorted(set(g["attack"]), key=_attack_key)
    pools = []
    for st in settings:
        for run in st["runs"]:
            loo = _extras_of(extras, run, "loo")
            if loo:
                pools.append((_text(loo.get("pool")), _int(loo.get("pool_size"))))
    sizes = sorted(set(n for _, n in pools))
    pool_txt = (f' Pool attacks use {", ".join(sizes)} reference models per target '
                'trained like the target (half of them on each sample).' if sizes else "")
    intro = ('<p class="muted">One row per defence setting (averaged over its runs). Attack '
             'cells: AUC above, TPR at 0.1% FPR below; <span class="best-key">highlighted'
             '</span>: the strongest attack of the row (highest TPR at 0.1% FPR, then AUC). '
             'Empirical ε lower bounds hold at 95% confidence and are rounded down; LOO = leave-one-out over '
             f'the reference pool (mean ± std). Hover a cell for intervals and details.{pool_txt}'
             '</p>')
    figs, note = _empirical_plots(settings, g, rocs)
    return (f'<h3 id="{_slug("e", model, dataset)}">Strongest attacks and empirical ε</h3>'
            f'{intro}{_settings_table(settings, attacks)}{note}'
            f'<div class="plots">{"".join(figs)}</div>'
            f'{_exposure_block(settings, extras, dataset)}')


def _empirical_sentence(g: pd.DataFrame, extras: Any) -> str:
    """The key-findings sentence about the strongest attack and the empirical ε (HTML), or
    "" when the group has no such results."""
    if not _has_empirical(g, extras):
        return ""
    settings = _settings(g, extras)
    if not settings:
        return ""
    parts = []
    ref = next((st for st in settings if st["rank"] == 0), settings[0])
    if ref["strongest"]:
        r = ref["attacks"].loc[ref["strongest"]]
        where = "the baseline" if ref["rank"] == 0 else _esc(ref["name"])
        tpr = (f'TPR {_pct(r["tpr_at_0p1pct_fpr"])} at 0.1% FPR on {where}, '
               if _fin(r["tpr_at_0p1pct_fpr"]) else f"on {where}: ")
        parts.append(f'Strongest attack: <strong>{_esc(ref["strongest"])}</strong> '
                     f'({tpr}AUC {_f3(r["auc"])}).')
    with_one_run = any(_fin(st["one_run"]) for st in settings)
    clauses = []
    for rank in sorted({st["rank"] for st in settings}):
        fam = [st for st in settings if st["rank"] == rank]
        have = [st for st in fam if _fin(st["eps_max"])]
        if not have:
            continue
        st = max(have, key=lambda st: st["eps_max"])
        notes = []
        if st["dp"] and _fin(st["epsilon"]):
            notes.append(f"accountant ε = {_sig3(st['epsilon'])}")
        if len(fam) > 1:
            notes.append(f"largest of {len(fam)} settings")
        note = f" ({'; '.join(notes)})" if notes else ""
        one = (f" (one-run: {_lb(st['one_run'])})" if with_one_run and _fin(st["one_run"])
               else "")
        bound = f"ε ≥ {_lb(st['eps_max'])}"
        if rank == 0:
            clauses.append(f"{bound} for the baseline{one}")
        else:
            clauses.append(f"{_esc(st['name'])}{note}: {bound}{one}")
    if clauses:
        if clauses[0].startswith("ε"):
            clauses[0] = "Empirical " + clauses[0]
        else:
            clauses[0] = "Empirical ε lower bounds: " + clauses[0]
        parts.append("; ".join(clauses) + ".")
    return " ".join(parts)





def _defences_section(table: pd.DataFrame) -> str:
    """NoisyCGD (convex-relu) beside DP-SGD (mlp) at equal ε and MG noise at equal accuracy."""
    comp = noisycgd_comparison(table)
    if comp.empty:
        return ""
    from privaudit.report.templates import render

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
    written next to each attack (see :func:`privaudit.report.build.read_extras`); optional,
    any part may be missing. A (model, dataset) group with pool attacks, empirical ε or
    one-run values gets a "Strongest attacks and empirical ε" part. An empty table gives a
    page saying nothing has been audited yet. ``papers_html``: the "Papers' figures" section
    (:func:`privaudit.report.papers.papers_section`), placed before "How to read this".
    """
    rocs = rocs if isinstance(rocs, Mapping) else {}
    extras = extras if isinstance(extras, Mapping) else {}
    summary = summary if summary is not None else summarise(table)
    df = _prepare(table)
    groups = [(str(m), str(d), g) for (m, d), g in df.groupby(["model", "dataset"], sort=True)]

    from markupsafe import Markup

    from privaudit.report.templates import render, stylesheet

    defences = _defences_section(df) if groups else ""
    toc, sections = [], []
    if groups:
        toc = [("table", "Trade-off table"), *((_slug("g", m, d), f"{m} · {d}") for m, d, _ in groups)]
        toc += [("defences", "NoisyCGD vs DP-SGD")] if defences else []
        toc += [("papers", "Papers' figures")] if papers_html else []
        toc += [("howto", "How to read this")]
        n_targets = df["_run"].nunique()
        sections = [_first_screen(summary, figures or []), _key_findings(df, groups, extras),
                    f'<section id="table"><h2>Trade-off table</h2>'
                    f'<p class="muted">{len(df)} rows: {n_targets} target run(s) × attacks, '
                    f'grouped by model and dataset. Hover a target run, an ε, an ε lower '
                    f'bound (ε lb) or a TPR for details; {_DASH} = not available.</p>'
                    f'{_tradeoff_table(groups)}</section>',
                    *(_name_dp(_group_section(m, d, g, rocs, extras), g) for m, d, g in groups), defences]
    return render("page.html.j2", title=title, generated=generated, toc=toc, css=Markup(stylesheet()),
                  sections=[Markup(x) for x in sections if x], papers=Markup(papers_html)) + "\n"
