"""The report's verdict figures, drawn with matplotlib from the summary layer.

One figure per (model, dataset): leakage against test accuracy, MG noise (over κ) and
DP-SGD (over σ) as two curves that both start at the undefended baseline, every point with
its 95 % interval as error bars in both directions (accuracy and leakage; see
:mod:`privaudit.reporting.summary` for how they are computed). Left: the paper's attack (shadow
AUC); right: the strongest attack (TPR at 0.1 % FPR). Each point is labelled with its setting
where the label fits without covering another label or point (:func:`place_labels`). The
same figure is embedded in the page as inline SVG (text kept as text) and written as PDF and
PNG under ``reports/figures/`` for papers and slides.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privaudit.core.formatting import slug as _slug
from privaudit.reporting.plots import error_bars, fit_legend, renderer_of
from privaudit.reporting.summary import PAPER_ATTACK, Summary
from privaudit.reporting.svg import svg_element

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

COLOURS = {"MG noise": "#0072B2", "DP-SGD": "#D55E00", "baseline": "#555555"}  # Okabe–Ito, colour-blind safe
PANELS = (("paper's attack", "auc", "AUC", False), ("strongest attack", "tpr_at_0p1pct_fpr", "TPR at 0.1% FPR", True))
#: the verdict figures' matplotlib settings
STYLE: dict[RcKeyType, Any] = {"svg.fonttype": "none", "svg.hashsalt": "privaudit", "font.size": 9,
                               "pdf.fonttype": 42, "axes.titlesize": 9.5}
#: where a point's label may go, tried in turn: its offset from the point (points) and alignment
LABEL_SPOTS = (((4, 3), "left", "bottom"), ((4, -3), "left", "top"), ((-4, 3), "right", "bottom"),
               ((-4, -3), "right", "top"), ((0, 6), "center", "bottom"), ((0, -6), "center", "top"),
               ((4, 11), "left", "bottom"), ((4, -11), "left", "top"), ((-4, 11), "right", "bottom"),
               ((-4, -11), "right", "top"))
LABEL_SIZE = 7
#: the half-width (points) of the room a point's marker takes, which no label may cover
MARKER_ROOM = 3.0


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


def _panel(ax, rows: pd.DataFrame, metric: str, label: str, percent: bool) -> list[tuple[float, float, str, str]]:
    """Draw one panel's curves; return its points to label (x, y, text, colour), which
    :func:`place_labels` places once the figure is laid out."""
    scale = 100.0 if percent else 1.0
    labels = []
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
        labels += [(r["test_accuracy"], r[metric] * scale, r["setting"], COLOURS[family])
                   for _, r in pts[pts["family"] == family].iterrows()]
    if len(base):
        b = base.iloc[0]
        ax.plot([b["test_accuracy"]], [b[metric] * scale], marker="D", color=COLOURS["baseline"], markersize=6,
                linestyle="none", label="baseline", zorder=5)
    ax.set_xlabel("test accuracy")
    ax.set_ylabel(label + (" (%)" if percent else ""))
    ax.grid(True, color="#e5e5e5", linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)
    return labels


def place_labels(ax, points: list[tuple[float, float, str, str]]) -> list:
    """Label each point (x, y, text, colour; data coordinates) at the first of
    :data:`LABEL_SPOTS` where its text lies inside the axes and covers no label placed before
    it and no point's marker (:data:`MARKER_ROOM`), measured in the figure as laid out now;
    a label with no such spot is left out (the figure's table lists every point). Returns the
    labels placed (matplotlib annotations, kept out of the layout so that it stays as measured)."""
    from matplotlib.transforms import Bbox

    renderer = renderer_of(ax.figure)
    area = ax.get_window_extent(renderer)
    room = renderer.points_to_pixels(MARKER_ROOM)
    taken = [Bbox.from_bounds(px - room, py - room, 2 * room, 2 * room)
             for px, py in ax.transData.transform([(x, y) for x, y, _, _ in points] or np.empty((0, 2)))]
    placed = []
    for x, y, text, colour in points:
        for offset, ha, va in LABEL_SPOTS:
            note = ax.annotate(text, (x, y), xytext=offset, textcoords="offset points", ha=ha, va=va,
                               fontsize=LABEL_SIZE, color=colour, annotation_clip=False)
            note.set_in_layout(False)
            box = note.get_window_extent(renderer)
            if (area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
                    and not any(box.overlaps(other) for other in taken)):
                taken.append(box)
                placed.append(note)
                break
            note.remove()
    return placed


def group_figures(summary: Summary) -> list[Figure]:
    """One :class:`Figure` per (model, dataset) of ``summary`` with MG-noise or DP-SGD rows."""
    st, vd = summary.settings, summary.verdicts
    if st.empty:
        return []
    import matplotlib

    out = []
    with matplotlib.rc_context(STYLE):
        for (model, dataset), g in st.groupby(["model", "dataset"], sort=True):
            if not g["family"].isin(["MG noise", "DP-SGD"]).any():
                continue
            v = vd[(vd["model"] == model) & (vd["dataset"] == dataset)] if len(vd) else vd
            strongest = next(iter(v["attack"][v["comparison"] == "strongest attack"]), None) if len(v) else None
            paper = (next(iter(v["attack"][v["comparison"] == "paper's attack"]), PAPER_ATTACK) if len(v)
                     else PAPER_ATTACK)
            title, fig = verdict_figure(model, dataset, g, strongest, paper)
            svg = svg_element(_render(fig, "svg").decode(), title)
            out.append(Figure(_slug("verdict", model, dataset), title, svg, _render(fig, "pdf"), _render(fig, "png")))
    return out


def _through_pools(rows: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, bool]:
    """``rows`` with test accuracy and ``metric`` (and their intervals) read over each
    setting's pool models, as the verdicts read them, where every row has them; else as given
    (and False)."""
    cols = [f"pool_{m}{e}" for m in ("test_accuracy", metric) for e in ("", "_lo", "_hi")]
    if rows.empty or not all(c in rows for c in cols) or not np.isfinite(rows[cols].to_numpy(float)).all():
        return rows, False
    out = rows.copy()
    for m in ("test_accuracy", metric):
        for e in ("", "_lo", "_hi"):
            out[f"{m}{e}"] = rows[f"pool_{m}{e}"]
    return out, True


def verdict_figure(model: str, dataset: str, g: pd.DataFrame, strongest: str | None,
                   paper: str = PAPER_ATTACK) -> tuple[str, object]:
    """(title, matplotlib figure) of one group: its summary rows ``g`` (every attack), the
    paper's attack (``paper``, the verdict's) left and ``strongest`` right, each point a
    setting's mean over its pool models with its interval where the verdicts read pools, the
    points labelled where their labels fit
    (:func:`place_labels`, once the figure is laid out)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure as MplFigure

    with matplotlib.rc_context(STYLE):
        fig = MplFigure(figsize=(8.4, 3.3), layout="constrained")
        axes = fig.subplots(1, 2)
        points, pooled = [], []
        for ax, (comparison, metric, label, percent) in zip(axes, PANELS):
            attack = paper if comparison == "paper's attack" else strongest
            rows, through = _through_pools(g[g["attack"] == attack] if attack else g.iloc[0:0], metric)
            pooled.append(through)
            ax.set_title(f"{comparison}: {attack or 'none'}")
            if rows.empty or rows[metric].isna().all():
                ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes, color="#777")
                ax.set_axis_off()
                continue
            points.append((ax, _panel(ax, rows, metric, label, percent)))
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fit_legend(fig, handles, labels, max_columns=len(handles), frameon=False)
        n = int(g["n_seeds"].max())
        over = "t over " + str(n) + " seeds" if n > 1 else "one seed: sampling only"
        if any(pooled):
            models = int(pd.to_numeric(g["pool_n"], errors="coerce").max())
            over = f"{models} pool models a setting" + (f" over {n} seeds" if n > 1 else "")
        title = f"{model} on {dataset}: leakage vs test accuracy, 95 % intervals ({over})"
        fig.suptitle(title, fontsize=10)
        fig.draw_without_rendering()  # the layout, in which the labels are measured
        for ax, labelled in points:
            place_labels(ax, labelled)
        fig.set_layout_engine("none")  # laid out once: the SVG, PDF and PNG keep it, and skip its solver
    return title, fig


def _render(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}.get(fmt)
    fig.savefig(buf, format=fmt, dpi=160 if fmt == "png" else None, metadata=meta)
    return buf.getvalue()
