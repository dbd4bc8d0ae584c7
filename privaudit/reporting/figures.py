"""The report's verdict figures, drawn with matplotlib from the summary layer.

One figure per (model, dataset): leakage against test accuracy, MG noise (over κ) and
DP-SGD (over σ) as two curves that both start at the undefended baseline, every point with
its 95 % interval as error bars in both directions (accuracy and leakage; see
:mod:`privaudit.reporting.summary` for how they are computed). Left: the paper's attack (shadow
AUC); right: the strongest attack (TPR at 0.1 % FPR). The same figure is embedded in the page
as inline SVG (text kept as text) and written as PDF and PNG under ``reports/figures/`` for
papers and slides.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privaudit.core.formatting import slug as _slug
from privaudit.reporting.plots import error_bars
from privaudit.reporting.svg import svg_element
from privaudit.reporting.summary import PAPER_ATTACK, Summary

COLOURS = {"MG noise": "#0072B2", "DP-SGD": "#D55E00", "baseline": "#555555"}  # Okabe–Ito, colour-blind safe
PANELS = (("paper's attack", "auc", "AUC", False), ("strongest attack", "tpr_at_0p1pct_fpr", "TPR at 0.1% FPR", True))


@dataclass(frozen=True)
class Figure:
    """One group's figure: its file stem, title and the three renderings."""

    stem: str
    title: str
    svg: str
    pdf: bytes
    png: bytes


def _errors(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """:func:`privaudit.reporting.plots.error_bars` of a metric's column and its interval columns."""
    return error_bars(rows[metric], rows[f"{metric}_lo"], rows[f"{metric}_hi"])


def _panel(ax, rows: pd.DataFrame, metric: str, label: str, percent: bool) -> None:
    scale = 100.0 if percent else 1.0
    base = rows[rows["family"] == "baseline"]
    for family, marker in (("MG noise", "o"), ("DP-SGD", "s")):
        # joined in the defence's own order (κ, σ up from the baseline): accuracy need not fall monotonically
        pts = pd.concat([base, rows[rows["family"] == family].sort_values(
            "kappa" if family == "MG noise" else "noise_multiplier")])
        if len(pts) <= len(base):
            continue
        ax.errorbar(pts["test_accuracy"], pts[metric] * scale, xerr=_errors(pts, "test_accuracy"),
                    yerr=_errors(pts, metric) * scale, color=COLOURS[family], marker=marker, markersize=5,
                    linewidth=1.4, elinewidth=0.9, capsize=2.5, label=family)
        for _, r in pts[pts["family"] == family].iterrows():
            ax.annotate(r["setting"], (r["test_accuracy"], r[metric] * scale), textcoords="offset points",
                        xytext=(4, 4), fontsize=7, color=COLOURS[family])
    if len(base):
        b = base.iloc[0]
        ax.plot([b["test_accuracy"]], [b[metric] * scale], marker="D", color=COLOURS["baseline"], markersize=6,
                linestyle="none", label="baseline", zorder=5)
    ax.set_xlabel("test accuracy")
    ax.set_ylabel(label + (" (%)" if percent else ""))
    ax.grid(True, color="#e5e5e5", linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)


def group_figures(summary: Summary) -> list[Figure]:
    """One :class:`Figure` per (model, dataset) of ``summary`` with MG-noise or DP-SGD rows."""
    st, vd = summary.settings, summary.verdicts
    if st.empty:
        return []
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure as MplFigure

    out = []
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "privaudit", "font.size": 9,
                                "pdf.fonttype": 42, "axes.titlesize": 9.5}):
        for (model, dataset), g in st.groupby(["model", "dataset"], sort=True):
            if not g["family"].isin(["MG noise", "DP-SGD"]).any():
                continue
            v = vd[(vd["model"] == model) & (vd["dataset"] == dataset)] if len(vd) else vd
            strongest = next(iter(v["attack"][v["comparison"] == "strongest attack"]), None) if len(v) else None
            fig = MplFigure(figsize=(8.4, 3.3), layout="constrained")
            axes = fig.subplots(1, 2)
            for ax, (comparison, metric, label, percent) in zip(axes, PANELS):
                attack = PAPER_ATTACK if comparison == "paper's attack" else strongest
                rows = g[g["attack"] == attack] if attack else g.iloc[0:0]
                ax.set_title(f"{comparison}: {attack or 'none'}")
                if rows.empty or rows[metric].isna().all():
                    ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes, color="#777")
                    ax.set_axis_off()
                    continue
                _panel(ax, rows, metric, label, percent)
            handles, labels = axes[0].get_legend_handles_labels()
            if handles:
                fig.legend(handles, labels, loc="outside lower center", ncols=len(handles), frameon=False)
            n = int(g["n_seeds"].max())
            title = (f"{model} on {dataset}: leakage vs test accuracy, 95 % intervals "
                     f"({'t over ' + str(n) + ' seeds' if n > 1 else 'one seed: sampling only'})")
            fig.suptitle(title, fontsize=10)
            svg = svg_element(_render(fig, "svg").decode(), title)
            fig.set_layout_engine("none")  # the layout the SVG drew is kept: PDF and PNG skip its solver (2 of 3 passes)
            out.append(Figure(_slug("verdict", model, dataset), title, svg, _render(fig, "pdf"), _render(fig, "png")))
    return out


def _render(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}.get(fmt)
    fig.savefig(buf, format=fmt, dpi=160 if fmt == "png" else None, metadata=meta)
    return buf.getvalue()
