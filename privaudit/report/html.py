"""The self-contained HTML report page.

:func:`render_report` turns the trade-off table (one row per target, defence setting and
attack) and the attacks' ROC curves into one HTML5 document that opens from disk with no
network: CSS is inline, plots are inline SVG (:mod:`privaudit.report.svg`), there is no
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

from privaudit.report.iso import as_bool, iso_accuracy, iso_summary, split_curves
from privaudit.report.svg import line_plot

__all__ = ["render_report", "TABLE_COLUMNS", "setting_label"]

#: The trade-off table's columns, in order.
TABLE_COLUMNS = [
    "target_run", "shadow_run", "model", "dataset", "defence", "kappa", "dp",
    "noise_multiplier", "epsilon", "delta", "accountant", "seed", "part_size", "epochs",
    "train_accuracy", "test_accuracy", "attack", "auc", "accuracy", "precision", "recall",
    "threshold", "advantage", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "n_members",
    "n_nonmembers",
]
_TEXT_COLUMNS = ["target_run", "shadow_run", "model", "dataset", "defence", "accountant", "attack"]
_NUMERIC_COLUMNS = [c for c in TABLE_COLUMNS if c not in _TEXT_COLUMNS and c != "dp"]
_ATTACK_ORDER = {"shadow": 0, "loss": 1, "confidence": 2}
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


def _sig3(v: Any) -> str:
    """3 significant digits (epsilon)."""
    f = _num(v)
    if math.isnan(f):
        return _DASH
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    if f != 0 and (abs(f) >= 1e5 or abs(f) < 1e-3):
        return f"{f:.2e}"
    s = f"{f:#.3g}"
    return s[:-1] if s.endswith(".") else s


def _short(v: Any) -> str:
    """A defence parameter (kappa, sigma, delta) in its shortest form."""
    f = _num(v)
    return f"{f:g}" if math.isfinite(f) else _DASH


def _int(v: Any) -> str:
    f = _num(v)
    return str(int(round(f))) if math.isfinite(f) else _DASH


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


def _slug(*parts: Any) -> str:
    s = "-".join(str(p) for p in parts).lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "group"


def setting_label(dp: bool, kappa: Any, sigma: Any, epsilon: Any = float("nan"),
                  with_epsilon: bool = True) -> str:
    """How a defence setting is named in the report: "baseline", "κ=0.5", "σ=1 (ε=21.3)",
    "κ=0.5, σ=1 (ε=21.3)"."""
    k = _num(kappa)
    if not dp:
        return "baseline" if not math.isfinite(k) or k == 0 else f"κ={k:g}"
    parts = []
    if math.isfinite(k) and k > 0:
        parts.append(f"κ={k:g}, ")
    s = _num(sigma)
    parts.append(f"σ={s:g}" if math.isfinite(s) else "σ=?")
    if with_epsilon and _fin(epsilon):
        parts.append(f" (ε={_sig3(epsilon)})")
    return "".join(parts)


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
    df["_key"] = [setting_label(d, k, s, with_epsilon=False)
                  for d, k, s in zip(df["dp"], df["kappa"], df["noise_multiplier"])]
    df["_run"] = df["target_run"].map(_text)
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
    a = g[g["attack"] == attack]
    name = f"{_esc(attack)} attack"
    iso = iso_accuracy(a, "auc")
    if not iso.empty:
        s = iso_summary(iso).iloc[0]
        diff = float(s["mean_dp_minus_mg"])
        rng = f"acc range {s['acc_low']:.3f}–{s['acc_high']:.3f}"
        if abs(diff) < 0.0005:
            return (f"At equal test accuracy ({rng}), DP-SGD's and MG noise's {name} AUC are "
                    f"on average the same (difference {diff:+.4f}) → neither leaks clearly less.")
        word = "higher" if diff > 0 else "lower"
        winner = "MG noise" if diff > 0 else "DP-SGD"
        return (f"At equal test accuracy ({rng}), DP-SGD's {name} AUC is on average "
                f"{abs(diff):.3f} {word} than MG noise's → <strong>{winner} leaks less</strong>.")
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


def _key_findings(df: pd.DataFrame, groups: list[tuple[str, str, pd.DataFrame]]) -> str:
    items = []
    for model, dataset, g in groups:
        items.append(
            f'<li><a href="#{_slug("g", model, dataset)}"><strong>{_esc(model)} · '
            f'{_esc(dataset)}</strong></a>: {_verdict(g)} '
            f'<span class="muted">{_baseline_sentence(g)}</span></li>')
    return ('<section class="findings" aria-labelledby="kf"><h2 id="kf">Key findings</h2>'
            f'<ul>{"".join(items)}</ul></section>')


_TABLE_SPEC: list[tuple[str, str, Callable[[Any], str], str]] = [
    # (header, column, formatter, css class)
    ("target run", "target_run", _text, "txt"),
    ("shadow run", "shadow_run", _text, "txt"),
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
    ("members", "n_members", _int, "num"),
    ("non-members", "n_nonmembers", _int, "num"),
]


def _tradeoff_table(groups: list[tuple[str, str, pd.DataFrame]]) -> str:
    head = "".join(f'<th scope="col" class="{cls}">{_esc(h)}</th>' for h, _, _, cls in _TABLE_SPEC)
    bodies = []
    ncol = len(_TABLE_SPEC)
    for model, dataset, g in groups:
        rows = [f'<tr class="grouphead"><th colspan="{ncol}" scope="rowgroup">'
                f'<a href="#{_slug("g", model, dataset)}">{_esc(model)} · {_esc(dataset)}</a>'
                f'</th></tr>']
        prev_run, alt = None, True
        for _, r in g.iterrows():
            run = r["_run"]
            first = run != prev_run
            if first:
                alt = not alt
                prev_run = run
            cls = " ".join(c for c in ("alt" if alt else "", "first" if first else "") if c)
            cells = []
            for _, col, fmt, ccls in _TABLE_SPEC:
                text = fmt(r[col])
                extra = ""
                if col == "epsilon" and _fin(r["epsilon"]):
                    tip = f"δ={_short(r['delta'])}, accountant: {_text(r['accountant'])}"
                    extra = f' title="{_esc(tip)}"'
                elif col == "target_run":
                    tip = (f"part size {_int(r['part_size'])}, "
                           f"{'DP-SGD' if r['dp'] else 'no DP-SGD'}")
                    extra = f' title="{_esc(tip)}"'
                mcls = f"{ccls} missing" if text == _DASH else ccls
                cells.append(f'<td class="{mcls}"{extra}>{_esc(text)}</td>')
            rows.append(f'<tr class="{cls}">{"".join(cells)}</tr>' if cls
                        else f'<tr>{"".join(cells)}</tr>')
        bodies.append(f'<tbody>{"".join(rows)}</tbody>')
    return (f'<div class="tablewrap"><table class="data"><thead><tr>{head}</tr></thead>'
            f'{"".join(bodies)}</table></div>')


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
            label = setting_label(bool(p["dp"]), p["kappa"], p["noise_multiplier"],
                                  with_epsilon=False)
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
    intro = ('<p class="muted">Both curves interpolated linearly on 25 accuracies spanning the '
             'overlap of their test-accuracy ranges; DP − MG &gt; 0 means DP-SGD leaks more '
             'at equal accuracy.</p>')
    if summ.empty:
        return (f'<h3>Iso-accuracy comparison</h3>{intro}<p class="note">No comparison '
                f'possible: {_verdict(g).removeprefix("No iso-accuracy comparison: ")}</p>')
    summ = summ.assign(_ar=summ["attack"].map(_ATTACK_ORDER).fillna(9),
                       _mr=summ["metric"].map({m: i for i, m in enumerate(_ISO_METRICS)}))
    summ = summ.sort_values(["_ar", "attack", "_mr"], kind="stable")
    rows = []
    for _, s in summ.iterrows():
        d = float(s["mean_dp_minus_mg"])
        cls = "mg" if d > 0 else ("dp" if d < 0 else "")
        rows.append(
            f'<tr><td class="txt">{_esc(s["attack"])}</td>'
            f'<td class="txt">{_esc(_METRIC_NAMES.get(s["metric"], s["metric"]))}</td>'
            f'<td class="num">{s["acc_low"]:.3f}–{s["acc_high"]:.3f}</td>'
            f'<td class="num">{d:+.3f}</td>'
            f'<td class="txt"><span class="pill {cls}">{_esc(s["leaks_less"])}</span></td></tr>')
    return (f'<h3>Iso-accuracy comparison</h3>{intro}'
            '<div class="tablewrap fit"><table class="data compact iso"><thead><tr>'
            '<th class="txt">attack</th><th class="txt">metric</th>'
            '<th class="num">test-acc range</th><th class="num">mean DP − MG</th>'
            '<th class="txt">leaks less</th></tr></thead>'
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


def _group_section(model: str, dataset: str, g: pd.DataFrame, rocs: Mapping[str, Any]) -> str:
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

    # (c)-(e) leakage vs test accuracy, MG curve vs DP curve
    mg_pts, dp_pts = _curve_points(a)
    for metric, name in (("precision", "precision"), ("recall", "recall"), ("auc", "AUC")):
        figs.append(_figure(line_plot(
            [{"label": "MG noise (κ)", "x": mg_pts["test_accuracy"], "y": mg_pts[metric]},
             {"label": "DP-SGD (σ)", "x": dp_pts["test_accuracy"], "y": dp_pts[metric]}],
            title=f"Attack {name} vs test accuracy", xlabel="target test accuracy",
            ylabel=f"{attack} attack {name}"),
            f"Privacy-utility trade-off ({_esc(attack)} attack); both curves end at the "
            f"undefended baseline when it has been audited. Points are listed below."))

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

    return (f'<section class="group" id="{sid}"><h2>{_esc(model)} · {_esc(dataset)}</h2>'
            f'<p>{_verdict(g)} <span class="muted">{_baseline_sentence(g)}</span></p>'
            f'<h3>Trade-off plots</h3><div class="plots">{"".join(figs)}</div>'
            f'{_points_table(attack, mg_pts, dp_pts)}'
            f'{_iso_block(g)}'
            f'<h3>ROC curves</h3><div class="plots">{"".join(roc_figs)}</div></section>')


_HOW_TO_READ = """
<section id="howto" class="howto"><h2>How to read this</h2>
<ul>
<li><strong>Membership inference.</strong> An attack guesses, for each record, whether it
was in the target model's training set. <em>Member</em> is the positive class.</li>
<li><strong>Threshold metrics.</strong> Attack accuracy, precision and recall are measured at
the attack's own decision threshold (column <code>threshold</code>); precision = share of
the records flagged as members that really are members, recall = share of the members that
are flagged.</li>
<li><strong>Threshold-free metrics.</strong> AUC (0.5 = chance), advantage (max TPR − FPR)
and TPR at 1% / 0.1% FPR summarise the whole ROC curve; the low-FPR numbers say how many
members can be identified with few false alarms.</li>
<li><strong>Test accuracy</strong> is the target's accuracy on its held-out non-member
part.</li>
<li><strong>Defences.</strong> MG noise multiplies the inputs by Gaussian noise with mean 1
and standard deviation κ; DP-SGD clips per-example gradients and adds Gaussian noise with
multiplier σ. κ = 0 without DP-SGD is the undefended baseline, which also ends both
trade-off curves.</li>
<li><strong>ε</strong> is the Opacus privacy accountant's bound at the stated δ (PRV
accountant, RDP as fallback; the one used is in the <code>accountant</code> column, hover an
ε value to see it) and exists for DP-SGD rows only; MG noise has no formal ε.</li>
<li><strong>Iso-accuracy.</strong> Defences are compared at equal test accuracy: both
curves are interpolated over the overlap of their accuracy ranges and DP − MG is averaged.
A positive value means DP-SGD leaks more at the same utility.</li>
</ul></section>
"""

_CSS = """
:root{--fg:#1f2328;--muted:#5c6570;--line:#d9dde2;--stripe:#f6f7f9;--accent:#0072B2;
--bg:#fff;--soft:#eef5fb}
*{box-sizing:border-box}
body{margin:0;background:#fafbfc;color:var(--fg);font:15px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:24px 28px 48px;background:var(--bg);
min-height:100vh;box-shadow:0 0 0 1px #eceef1}
header h1{margin:0 0 2px;font-size:1.8rem;letter-spacing:-.01em}
.generated{color:var(--muted);margin:0 0 14px;font-size:.9rem}
nav.toc{font-size:.9rem;margin:6px 0 18px;color:var(--muted)}
nav.toc a{margin-right:14px}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
h2{font-size:1.35rem;margin:34px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:1.05rem;margin:22px 0 8px}
.findings{background:var(--soft);border:1px solid #cfe2f1;border-left:4px solid var(--accent);
border-radius:6px;padding:4px 18px 8px}
.findings h2{border:0;margin:10px 0 4px;font-size:1.1rem}
.findings ul{margin:4px 0;padding-left:18px}.findings li{margin:6px 0}
.muted{color:var(--muted)}
.note,.empty{background:#fff8e6;border:1px solid #f0dca4;border-radius:6px;padding:10px 14px}
.tablewrap{overflow-x:auto;border:1px solid var(--line);border-radius:6px;margin:8px 0 12px}
table.data{border-collapse:collapse;width:100%;font-size:.84rem;
font-variant-numeric:tabular-nums}
table.data th,table.data td{padding:5px 9px;white-space:nowrap;text-align:left}
table.data thead th{position:sticky;top:0;background:#f0f2f5;border-bottom:1px solid var(--line);
font-weight:600}
table.data .num{text-align:right}
table.data tr.alt td{background:var(--stripe)}
table.data tr.first td{border-top:1px solid #e6e8eb}
table.data tr.grouphead th{background:#e8eef5;font-size:.9rem;padding:6px 9px;
border-top:2px solid #c9d6e3}
table.data td.missing{color:#a0a7b0}
table.compact{width:auto}
.tablewrap.fit{display:inline-block;max-width:100%;vertical-align:top}
table.compact tbody tr:nth-child(even) td{background:var(--stripe)}
.pill{display:inline-block;padding:0 8px;border-radius:10px;font-size:.8rem;background:#eee}
.pill.mg{background:#dcecf7;color:#005a8c}.pill.dp{background:#fbe3d3;color:#9a4300}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,470px),1fr));gap:16px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:8px 8px 4px;background:#fff}
figure svg{display:block;width:100%;height:auto}
figcaption{font-size:.82rem;color:var(--muted);padding:2px 6px 4px}
details.points summary{cursor:pointer;color:var(--muted);font-size:.9rem;margin-top:10px}
.howto li{margin:6px 0}
code{background:#f0f2f5;padding:0 4px;border-radius:3px;font-size:.9em}
footer{margin-top:36px;color:var(--muted);font-size:.8rem}
@media print{main{box-shadow:none}figure{break-inside:avoid}}
"""


def render_report(table: pd.DataFrame, rocs: Mapping[str, Mapping[str, Any]] | None = None, *,
                  title: str = "privaudit report", generated: str = "") -> str:
    """The complete, self-contained HTML5 report page as a string.

    ``table``: the trade-off table (columns in :data:`TABLE_COLUMNS`; missing columns are
    treated as all-NaN). ``rocs``: ``{target_run: {attack: (fpr, tpr)}}``; entries for
    runs not in the table are ignored. ``generated``: a timestamp text shown under the
    title. An empty table gives a page saying nothing has been audited yet.
    """
    rocs = rocs or {}
    df = _prepare(table)
    groups = [(str(m), str(d), g) for (m, d), g in df.groupby(["model", "dataset"], sort=True)]

    parts = [f'<header><h1>{_esc(title)}</h1>']
    if generated:
        parts.append(f'<p class="generated">Generated {_esc(generated)}</p>')
    if groups:
        toc = "".join(f'<a href="#{_slug("g", m, d)}">{_esc(m)} · {_esc(d)}</a>'
                      for m, d, _ in groups)
        parts.append(f'<nav class="toc"><a href="#table">Trade-off table</a>{toc}'
                     f'<a href="#howto">How to read this</a></nav>')
    parts.append("</header>")

    if not groups:
        parts.append('<section><p class="empty">Nothing has been audited yet: there are no '
                     'attack results to report. Train targets and shadows, run the attacks, '
                     'then rebuild this report.</p></section>')
    else:
        parts.append(_key_findings(df, groups))
        n_targets = df["_run"].nunique()
        parts.append(f'<section id="table"><h2>Trade-off table</h2>'
                     f'<p class="muted">{len(df)} rows: {n_targets} target run(s) × attacks, '
                     f'grouped by model and dataset. Hover a target run or an ε for details; '
                     f'{_DASH} = not available.</p>{_tradeoff_table(groups)}</section>')
        for m, d, g in groups:
            parts.append(_group_section(m, d, g, rocs))
    parts.append(_HOW_TO_READ)
    parts.append('<footer>Generated by privaudit. This page is self-contained: it loads '
                 'nothing from the network.</footer>')

    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(parts) + "\n</main>\n</body>\n</html>\n")
