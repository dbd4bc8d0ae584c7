"""The report's and the theory pages' plots, drawn with matplotlib as SVG strings.

:func:`line_plot` (lines, points, optional 95 % error bars) and :func:`heatmap` (a value
per grid cell, with its colour bar) return one ``<svg>`` element: inline in an HTML page, or
with ``standalone=True`` a complete ``.svg`` file. Text stays text (searchable, selectable),
colours are the colour-blind-safe Okabe–Ito palette and viridis, the output has no date and
its element ids are salted per figure, so the same data give the same bytes and several
plots can share one page. The first child of each ``<svg>`` is its ``<title>`` (the plot's
accessible name). Points with a non-finite coordinate, or one ≤ 0 on a log axis, are
dropped; long series (ROC curves) are simplified by matplotlib's path simplification, which
keeps every visible bend. An empty plot says "no data".
"""

from __future__ import annotations

import hashlib
import html
import io
import math
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

#: Okabe–Ito colours (yellow left out: too pale on white), in drawing order.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_DASHES = ("-", "--", ":", "-.")
_STYLE = {"svg.fonttype": "none", "font.size": 10, "axes.titlesize": 11, "axes.titleweight": "bold",
          "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#e3e5e8",
          "grid.linewidth": 0.7, "legend.frameon": False, "legend.fontsize": 8.5, "path.simplify": True,
          "path.simplify_threshold": 0.2, "pdf.fonttype": 42}


def _figure(width: float, height: float):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width / 96, height / 96), layout="constrained")


def _svg(fig, title: str, salt: str, standalone: bool) -> str:
    """The figure as one ``<svg>`` element (:func:`svg_element`), ids salted with ``salt``."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": hashlib.sha1(salt.encode()).hexdigest()[:12]}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return svg_element(buf.getvalue().decode(), title, standalone, salt)


def svg_element(raw: str, title: str, standalone: bool = False, salt: str | None = None) -> str:
    """matplotlib's SVG document as one ``<svg>`` element whose first child is ``<title>``:
    without the XML prolog, doctype and RDF metadata block, links as SVG 2 ``href`` (so that
    no namespace but SVG's is needed), and inline (``standalone=False``) without any xmlns,
    ready for an HTML page. Every element id gets a prefix from ``salt`` (default: the title), so
    that several figures on one page never share an id."""
    text = raw[raw.index("<svg"):]
    prefix = "f" + hashlib.sha1((title if salt is None else salt).encode()).hexdigest()[:8] + "-"
    text = re.sub(r'(\sid="|href="#|url\(#)([^")]+)', lambda m: m.group(1) + prefix + m.group(2), text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)
    text = text.replace("xlink:href=", "href=")
    head_end = text.index(">") + 1
    head = re.sub(r'\sxmlns:xlink="[^"]*"', "", text[:head_end])
    if not standalone:  # matplotlib's document-wide <style> would leak into the page: report.css scopes it
        head = re.sub(r'\sxmlns="[^"]*"', "", head)
        text = re.sub(r'<style type="text/css">[^<]*</style>', "", text)
    head = head.replace("<svg", f'<svg role="img" aria-label="{html.escape(title)}" class="plot"', 1)
    return head + f"<title>{html.escape(title)}</title>" + compact_markup(compact_paths(text[head_end:]), prefix)


_ATTR_NUMBER = re.compile(r'(\s(?:x|y|width|height)=")(-?\d+\.\d+)"')
_FONT_FAMILY = re.compile(r"font-family: 'DejaVu Sans',[^;\"]*")


#: ids that privaudit gives (``gid=series-<i>``: a plot's series, which readers and tests find)
KEPT_ID = "series-"


def compact_markup(svg: str, prefix: str) -> str:
    """The rest of matplotlib's markup written short, the drawing unchanged: no indentation,
    ids only where something refers to them (and then short: ``<prefix><n>``) or where
    privaudit named the element (:data:`KEPT_ID`), x, y, width
    and height to 0.01 pt, no zero rotations and empty ``<defs>``, and one short font list
    (the browser draws the text with the first font it has, as it did with the long one)."""
    refs = list(dict.fromkeys(re.findall(r'(?:href="#|url\(#)([^")]+)', svg)))
    short = {old: f"{prefix}{i}" for i, old in enumerate(refs)}
    svg = re.sub(r'\sid="([^"]+)"', lambda m: f' id="{short[m.group(1)]}"' if m.group(1) in short
                 else m.group(0) if m.group(1).startswith(f"{prefix}{KEPT_ID}") else "", svg)
    svg = re.sub(r'(href="#|url\(#)([^")]+)', lambda m: m.group(1) + short.get(m.group(2), m.group(2)), svg)
    svg = re.sub(r">\s+<", "><", svg)
    svg = _ATTR_NUMBER.sub(lambda m: m.group(1) + (f"{float(m.group(2)):.2f}".rstrip("0").rstrip(".") or "0") + '"', svg)
    svg = re.sub(r'\stransform="rotate\(-?0 [^)]*\)"', "", svg)
    svg = svg.replace("<defs></defs>", "")
    svg = _FONT_FAMILY.sub("font-family: 'DejaVu Sans', Arial, sans-serif", svg)
    return _style_classes(svg, prefix)


def _style_classes(svg: str, prefix: str) -> str:
    """Every inline ``style`` that several elements repeat, given once in the figure's own
    ``<style>`` as a class (``<prefix>s<n>``, unique on the page); the rest stays inline."""
    counts: dict[str, int] = {}
    for style in re.findall(r' style="([^"]*)"', svg):
        counts[style] = counts.get(style, 0) + 1
    shared = {st: f"{prefix}s{i}" for i, st in enumerate(st for st, n in counts.items() if n >= 3)}
    if not shared:
        return svg
    svg = re.sub(r' style="([^"]*)"', lambda m: f' class="{shared[m.group(1)]}"' if m.group(1) in shared
                 else m.group(0), svg)
    rules = "".join(f".{name}{{{html.unescape(st)}}}" for st, name in shared.items())
    head = svg.index("</title>") + len("</title>") if "</title>" in svg else 0
    return svg[:head] + f"<style>{rules}</style>" + svg[head:]


_PATH_DATA = re.compile(r' d="([^"]*)"')
_DECIMAL = re.compile(r"-?\d+\.\d+")


def compact_paths(svg: str) -> str:
    """Path data written short: coordinates to 0.01 pt (matplotlib writes 6 decimals; a
    hundredth of a point is far below a pixel) and no spaces around the commands. Only the
    ``d`` attributes change, so text, ticks and ids stay as they are."""
    def short(number: re.Match) -> str:
        text = f"{float(number.group()):.2f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text

    def compact(match: re.Match) -> str:
        d = _DECIMAL.sub(short, match.group(1))
        d = re.sub(r"\s*([MLHVCSQTAZmlhvcsqtaz])\s*", r"\1", d)
        d = re.sub(r"\s+", " ", d).strip()
        return ' d="' + _horizontal_vertical(d) + '"'

    return _PATH_DATA.sub(compact, svg)


_MOVE_LINE = re.compile(r"([ML])(-?[\d.]+) (-?[\d.]+)")


def _horizontal_vertical(d: str) -> str:
    """A path of straight segments (M and L only, as a ROC staircase is) with its horizontal
    and vertical segments as H and V: the same points, each written once."""
    steps = _MOVE_LINE.findall(d)
    if not steps or "".join(f"{c}{x} {y}" for c, x, y in steps) != d:
        return d
    out, px, py = [], None, None
    for c, x, y in steps:
        if c == "L" and y == py and x != px:
            out.append(f"H{x}")
        elif c == "L" and x == px and y != py:
            out.append(f"V{y}")
        else:
            out.append(f"{c}{x} {y}")
        px, py = x, y
    return "".join(out)


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


def _thin(x: np.ndarray, y: np.ndarray, log_x: bool, log_y: bool, cells: int = 2000) -> np.ndarray:
    """Indices of the points of a long line that fall in distinct cells of a ``cells`` × ``cells``
    grid over its own range (log10 on log axes), first and last kept: at plot size nothing
    visible is lost, and a 20,000-point ROC curve draws from a few thousand."""
    if len(x) <= cells:
        return np.arange(len(x))
    tx, ty = (np.log10(x) if log_x else x), (np.log10(y) if log_y else y)
    gx = np.floor((tx - tx.min()) / max(np.ptp(tx), 1e-300) * (cells - 1))
    gy = np.floor((ty - ty.min()) / max(np.ptp(ty), 1e-300) * (cells - 1))
    key = gx * cells + gy
    keep = np.r_[True, key[1:] != key[:-1]]
    keep[-1] = True
    return np.flatnonzero(keep)


def line_plot(series: Iterable[Mapping[str, Any]], *, title: str, xlabel: str, ylabel: str,
              log_x: bool = False, log_y: bool = False, width: int = 560, height: int = 380,
              x_range: tuple[float, float] | None = None, y_range: tuple[float, float] | None = None,
              diagonal: bool = False, standalone: bool = False) -> str:
    """An ``<svg>`` line/scatter plot of ``series``.

    ``series``: dicts ``{"label", "x", "y"}`` with optional ``"markers"`` and ``"line"``
    (default True; ``line=False`` draws points only) and ``"y_lo"``/``"y_hi"`` (an interval
    per point, drawn as error bars; NaN = none). ``x_range``/``y_range`` fix an axis range;
    ``diagonal`` draws the chance line y = x (ROC curves). Series i is the SVG group whose
    id ends in ``series-i`` (its points are the ``<use>`` markers in it).
    """
    import matplotlib

    series = list(series or [])
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
            if not s.get("markers", True) and "y_lo" not in s:  # a plain line: thin what cannot show
                x, y = x[ok], y[ok]
                idx = _thin(x, y, log_x, log_y)
                x, y, ok = x[idx], y[idx], np.ones(len(idx), bool)
                n = len(x)
            colour, dash = PALETTE[i % len(PALETTE)], _DASHES[(i // len(PALETTE)) % len(_DASHES)]
            line, markers = s.get("line", True), s.get("markers", True)
            style = dict(color=colour, label=str(s.get("label", "")), linestyle=dash if line else "none",
                         marker="o" if (markers or not line) else None, markersize=4, linewidth=1.6)
            if "y_lo" in s and "y_hi" in s:
                err = error_bars(y[ok], _floats(s["y_lo"])[:n][ok], _floats(s["y_hi"])[:n][ok])
                ax.errorbar(x[ok], y[ok], yerr=err, elinewidth=0.9, capsize=2.5, **style).lines[0].set_gid(
                    f"series-{i}")
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
            fig.legend(loc="outside lower center", ncols=min(3, drawn))
        salt = repr((title, xlabel, ylabel, [str(s.get("label", "")) for s in series]))
        return _svg(fig, title, salt, standalone)


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
