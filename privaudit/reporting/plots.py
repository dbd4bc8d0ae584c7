"""The report's and the theory pages' plots, drawn with matplotlib as SVG strings.

:func:`line_plot` (lines, points, optional 95 % error bars) and :func:`heatmap` (a value
per grid cell, with its colour bar) return one ``<svg>`` element: inline in an HTML page, or
with ``standalone=True`` a complete ``.svg`` file. Text stays text (searchable, selectable),
colours are the colour-blind-safe Okabe–Ito palette and viridis, the output has no date and
its element ids are salted per figure, so the same data give the same bytes and several
plots can share one page. The first child of each ``<svg>`` is its ``<title>`` (the plot's
accessible name). Points with a non-finite coordinate, or one ≤ 0 on a log axis, are
dropped; a plain line (no markers, no error bars: a ROC curve) is drawn from the points its
drawing needs (:func:`privaudit.reporting.curves.simplify`, in the axes as drawn: no point of the
data lies farther than :data:`TOLERANCE` from the drawn line), its ``exact_below`` end kept whole. An empty plot says
"no data". A legend sits below the axes in as many columns as fit the figure's width
(:func:`fit_legend`). The SVG is written short by :mod:`privaudit.reporting.svg`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.reporting.curves import simplify, up_to
from privaudit.reporting.svg import svg_element

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

#: Okabe–Ito colours (yellow left out: too pale on white), in drawing order.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_DASHES = ("-", "--", ":", "-.")
_STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none", "font.size": 10, "axes.titlesize": 11, "axes.titleweight": "bold",
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#e3e5e8",
    "grid.linewidth": 0.7, "legend.frameon": False, "legend.fontsize": 8.5, "path.simplify": False,
    "pdf.fonttype": 42}
#: how far (in points, 0.4 pixel at a figure's own size) a simplified line may be from its data
TOLERANCE = 0.3
#: the least room (in points) between a legend and each side of its figure
LEGEND_MARGIN = 2.0


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width / 96, height / 96), layout="constrained")


def renderer_of(fig):
    """A renderer of ``fig`` (an Agg canvas given to it if it has none) that measures its text
    before the figure is saved, at the figure's own dpi."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return (fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)).get_renderer()


def fit_legend(fig, handles: Sequence[Any] | None = None, labels: Sequence[str] | None = None, *,
               max_columns: int = 3, **kw):
    """The figure's legend below its axes (``"outside lower center"``) in the most columns, at
    most ``max_columns``, that keep it within the figure's width (one column when none do):
    a legend wider than the figure would be cut at both sides. ``handles``/``labels``: as
    matplotlib's ``fig.legend`` takes them (default: every axes' labelled artists); ``kw``: its
    other arguments. None when nothing is labelled."""
    if handles is None:
        pairs = [hl for ax in fig.axes for hl in zip(*ax.get_legend_handles_labels())]
        handles, labels = [h for h, _ in pairs], [label for _, label in pairs]
    if not handles:
        return None
    renderer = renderer_of(fig)
    room = fig.bbox.width - 2 * renderer.points_to_pixels(LEGEND_MARGIN)
    for ncols in range(min(max_columns, len(handles)), 0, -1):
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols, **kw)
        if ncols == 1 or legend.get_window_extent(renderer).width <= room:
            return legend
        legend.remove()


def _svg(fig, title: str, salt: str, standalone: bool) -> str:
    """The figure as one ``<svg>`` element (:func:`svg_element`), ids salted with ``salt``."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": hashlib.sha1(salt.encode()).hexdigest()[:12]}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return svg_element(buf.getvalue().decode(), title, standalone, salt)


def error_bars(values: Any, lo: Any, hi: Any) -> np.ndarray:
    """(2, n) distances from each value down to its interval's lower and up to its upper end,
    as matplotlib's ``xerr``/``yerr`` take them (0 where a point has no interval)."""
    v = _floats(values)
    return np.nan_to_num(np.vstack([v - _floats(lo), _floats(hi) - v]), nan=0.0).clip(min=0.0)


def _floats(values: Any) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        return np.array([float(v) if isinstance(v, (int, float)) else math.nan for v in values], dtype=float)


def line_plot(series: Iterable[Mapping[str, Any]], *, title: str, xlabel: str, ylabel: str,
              log_x: bool = False, log_y: bool = False, width: int = 560, height: int = 380,
              x_range: tuple[float, float] | None = None, y_range: tuple[float, float] | None = None,
              diagonal: bool = False, standalone: bool = False) -> str:
    """An ``<svg>`` line/scatter plot of ``series``.

    ``series``: dicts ``{"label", "x", "y"}`` with optional ``"markers"`` and ``"line"``
    (default True; ``line=False`` draws points only), ``"y_lo"``/``"y_hi"`` (an interval
    per point, drawn as error bars; NaN = none) and, on a plain line (``markers=False``) with
    ascending x, ``"exact_below"``: every point up to this x is drawn (a ROC curve's low-FPR
    end, whose TPR the page reports). ``x_range``/``y_range`` fix an axis range;
    ``diagonal`` draws the chance line y = x (ROC curves). Series i is the SVG group whose
    id ends in ``series-i`` (its points are the ``<use>`` markers in it). The legend, below
    the axes, takes as many columns (at most 3) as fit the figure's width (:func:`fit_legend`).
    """
    series = list(series or [])
    fig = _line_figure(series, title=title, xlabel=xlabel, ylabel=ylabel, log_x=log_x, log_y=log_y, width=width,
                       height=height, x_range=x_range, y_range=y_range, diagonal=diagonal)
    salt = repr((title, xlabel, ylabel, [str(s.get("label", "")) for s in series]))
    return _svg(fig, title, salt, standalone)


def _line_figure(series: Sequence[Mapping[str, Any]], *, title: str, xlabel: str, ylabel: str, log_x: bool = False,
                 log_y: bool = False, width: int = 560, height: int = 380, x_range: tuple[float, float] | None = None,
                 y_range: tuple[float, float] | None = None, diagonal: bool = False):
    """The matplotlib figure that :func:`line_plot` writes as SVG (its arguments, the same)."""
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        fig = _figure(width, height)
        ax = fig.subplots()
        drawn = 0
        for i, s in enumerate(series):
            x, y = _floats(s.get("x", [])), _floats(s.get("y", []))
            n = min(len(x), len(y))
            x, y = x[:n], y[:n]
            ok = np.isfinite(x) & np.isfinite(y) & ((x > 0) if log_x else True) & ((y > 0) if log_y else True)
            if not ok.any():
                continue
            drawn += 1
            colour, dash = PALETTE[i % len(PALETTE)], _DASHES[(i // len(PALETTE)) % len(_DASHES)]
            line, markers = s.get("line", True), s.get("markers", True)
            style = dict(color=colour, label=str(s.get("label", "")), linestyle=dash if line else "none",
                         marker="o" if (markers or not line) else None, markersize=4, linewidth=1.6)
            if "y_lo" in s and "y_hi" in s:
                err = error_bars(y[ok], _floats(s["y_lo"])[:n][ok], _floats(s["y_hi"])[:n][ok])
                ax.errorbar(x[ok], y[ok], yerr=err, elinewidth=0.9, capsize=2.5, **style).lines[0].set_gid(
                    f"series-{i}")
            elif line and not markers:  # a plain line: drawn from the points its drawing needs
                exact = up_to(x[ok], s["exact_below"]) if "exact_below" in s else None
                ax.add_line(_simplified_line()(x[ok], y[ok], exact, gid=f"series-{i}", **style))
                ax.update_datalim(np.column_stack([x[ok], y[ok]]))  # add_line alone leaves the axes' range
                ax.autoscale_view()
            else:
                ax.plot(x[ok], y[ok], gid=f"series-{i}", **style)
        if log_x:
            ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        if x_range is not None:
            ax.set_xlim(*x_range)
        if y_range is not None:
            ax.set_ylim(*y_range)
        if diagonal:
            lo, hi = ax.get_xlim()
            ax.plot([lo, hi], [lo, hi], color="#999", linestyle="--", linewidth=1, label="_chance")
        if not drawn:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="#555",
                    style="italic")
        ax.set_title(title, loc="left")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if drawn and any(str(s.get("label", "")) for s in series):
            fit_legend(fig)
        return fig


@functools.lru_cache(maxsize=1)
def _simplified_line():
    """matplotlib's Line2D drawing only the points its drawing needs: at each drawing, in the
    axes as laid out then, :func:`privaudit.reporting.curves.simplify` of the whole data at
    :data:`TOLERANCE` (its ``exact`` points kept). The axes' ranges are those of the whole data."""
    from matplotlib.lines import Line2D

    class SimplifiedLine(Line2D):
        def __init__(self, x: np.ndarray, y: np.ndarray, exact: np.ndarray | None, **style):
            super().__init__(x, y, **style)
            self.whole, self.exact, self.drawn_at = (x, y), exact, None

        def draw(self, renderer):
            x, y = self.whole
            at = (self.get_transform().get_affine().get_matrix().tobytes(), renderer.points_to_pixels(TOLERANCE))
            if at != self.drawn_at:  # savefig draws twice, for its layout and for the file: the same axes
                keep = simplify(self.get_transform().transform(np.column_stack([x, y])), at[1], self.exact)
                self.set_data(x[keep], y[keep])
                self.drawn_at = at
            super().draw(renderer)

    return SimplifiedLine


def format_sig(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant digits: plain notation for 1e-4 <= |v| < 1e5."""
    v = float(v)
    if not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    rounded = float(f"{v:.{digits}g}")
    if 1e-4 <= abs(rounded) < 1e5:
        dec = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
        s = f"{rounded:.{dec}f}"
        return s.rstrip("0").rstrip(".") if "." in s else s
    mant, exp = f"{v:.{digits - 1}e}".split("e")
    return mant.rstrip("0").rstrip(".") + "e" + exp


def heatmap(values: Any, *, x_labels: Sequence[Any], y_labels: Sequence[Any], title: str, xlabel: str,
            ylabel: str, value_label: str, log_color: bool = False, cell_text: bool = True,
            fmt: Callable[[float], str] | None = None, width: int = 560, height: int = 400,
            standalone: bool = False) -> str:
    """An ``<svg>`` heatmap of ``values``, shape ``(len(y_labels), len(x_labels))``, the first
    row at the bottom; ``log_color`` colours by log10 (cells ≤ 0 or non-finite are grey and
    read "n/a"); ``fmt`` writes the cell texts (default: 3 significant digits)."""
    import matplotlib
    from matplotlib.colors import LogNorm, Normalize

    fmt = fmt or format_sig
    xl = [format_sig(v) if isinstance(v, float) else str(v) for v in x_labels]
    yl = [format_sig(v) if isinstance(v, float) else str(v) for v in y_labels]
    z = np.asarray(values, dtype=float)
    if z.size and z.shape != (len(yl), len(xl)):
        raise ValueError(f"heatmap: values has shape {z.shape} but the labels need "
                         f"(len(y_labels), len(x_labels)) = ({len(yl)}, {len(xl)})")
    with matplotlib.rc_context({**_STYLE, "axes.grid": False}):
        fig = _figure(width, height)
        ax = fig.subplots()
        ok = np.isfinite(z) & ((z > 0) if log_color else True) if z.size else np.zeros((0, 0), bool)
        if ok.any():
            lo, hi = float(z[ok].min()), float(z[ok].max())
            if hi <= lo:
                lo, hi = (lo / 2, hi * 2) if log_color else (lo - 0.5, hi + 0.5)
            norm = LogNorm(lo, hi) if log_color else Normalize(lo, hi)
            cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")
            mesh = ax.pcolormesh(np.ma.masked_where(~ok, z), cmap=cmap, norm=norm, edgecolors="white",
                                 linewidth=0.5)
            fig.colorbar(mesh, ax=ax, label=value_label)
            if cell_text:
                for i in range(z.shape[0]):
                    for j in range(z.shape[1]):
                        dark = ok[i, j] and norm(z[i, j]) < 0.55
                        ax.text(j + 0.5, i + 0.5, fmt(z[i, j]) if ok[i, j] else "n/a", ha="center", va="center",
                                fontsize=8, color="white" if dark else "#222")
            ax.set_xticks(np.arange(len(xl)) + 0.5, xl, rotation=40 if max(map(len, xl), default=0) > 4 else 0)
            ax.set_yticks(np.arange(len(yl)) + 0.5, yl)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="#555",
                    style="italic")
        ax.set_title(title, loc="left")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        return _svg(fig, title, repr((title, xl, yl, value_label)), standalone)
