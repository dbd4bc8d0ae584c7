"""A small inline-SVG heatmap writer (no plotting library needed), companion to :mod:`.svg`.

:func:`heatmap` returns one ``<svg>`` element as a string (``standalone=True`` adds the SVG
namespace for a ``.svg`` file). ``values[i][j]`` is drawn as the cell of row ``i`` (row 0 at
the *bottom*, like a plot's y axis) and column ``j`` (left to right), filled from the
perceptually uniform viridis colour map (dark purple = low, yellow = high; 9 anchor colours,
linear interpolation in RGB), optionally on a log10 scale. Cells show their value in white or
near-black text, whichever contrasts better with the fill, and carry a ``<title>`` tooltip.
A vertical colour bar with 5 ticks is drawn on the right.

Non-finite cells (and cells <= 0 with ``log_color``) are drawn light grey with "n/a". An
empty input gives a frame with a "no data" note; a shape that does not match the labels
raises :class:`ValueError`. Every text is XML-escaped and coordinates are rounded to 2
decimals.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from .svg import _AXIS, _FONT, _MUTED, _TEXT, _esc, _r, _text_width, _to_float

__all__ = ["heatmap", "VIRIDIS", "colormap", "format_sig"]

#: viridis at 0, 1/8, ..., 1 (low to high).
VIRIDIS = ("#440154", "#472D7B", "#3B528B", "#2C728E", "#21908C",
           "#27AD81", "#5DC863", "#AADC32", "#FDE725")
_MISSING = "#ddd"
_PLOT_W, _PLOT_H = 420, 300
_MARGIN_TOP, _MARGIN_BOTTOM = 34, 54
_BAR_GAP, _BAR_W = 16, 14


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def colormap(t: float) -> str:
    """The viridis colour at ``t`` in [0, 1] (clipped) as ``#rrggbb``."""
    t = min(1.0, max(0.0, float(t))) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    a, b, f = _rgb(VIRIDIS[i]), _rgb(VIRIDIS[i + 1]), t - i
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def _text_colour(fill: str) -> str:
    """White or near-black, whichever contrasts better (WCAG ratios cross at L ~ 0.179)."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
               for c in (x / 255.0 for x in _rgb(fill)))
    return "#fff" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.179 else _TEXT


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


def _label(v: Any) -> str:
    real = isinstance(v, numbers.Real) and not isinstance(v, (bool, numbers.Integral))
    return format_sig(v) if real else str(v)


def _as_matrix(values: Any) -> np.ndarray:
    try:
        return np.asarray(values if values is not None else [], dtype=float)
    except (TypeError, ValueError):
        arr = np.asarray(values, dtype=object)
        if arr.dtype == object and arr.ndim == 2:
            return np.vectorize(_to_float, otypes=[float])(arr)
        raise ValueError("heatmap: values must be a 2-D array of numbers") from None


def heatmap(values: Any, *, x_labels: Sequence[Any], y_labels: Sequence[Any], title: str,
            xlabel: str, ylabel: str, value_label: str, log_color: bool = False,
            cell_text: bool = True, fmt: Callable[[float], str] | None = None,
            width: int | None = None, height: int | None = None,
            standalone: bool = False) -> str:
    """An ``<svg>`` heatmap of ``values`` (shape ``(len(y_labels), len(x_labels))``).

    ``log_color`` colours by log10(value). ``fmt`` formats the cell texts and tooltips
    (default: 3 significant digits); colour-bar ticks always use 3 significant digits.
    ``width``/``height`` are the total size in user units (default: a plot area of about
    420x300 plus margins, colour bar and labels).
    """
    fmt = fmt or format_sig
    xl, yl = [_label(v) for v in x_labels], [_label(v) for v in y_labels]
    z = _as_matrix(values)
    empty = z.size == 0
    if not empty and z.shape != (len(yl), len(xl)):
        raise ValueError(f"heatmap: values has shape {z.shape} but the labels need "
                         f"(len(y_labels), len(x_labels)) = ({len(yl)}, {len(xl)})")
    if empty:
        z, xl, yl = np.empty((0, 0)), [], []
    nrows, ncols = z.shape

    # --- colour scale (in log10 space with log_color)
    ok = np.isfinite(z) & ((z > 0) if log_color else True)
    tz = np.where(ok, np.log10(np.where(ok, z, 1.0)) if log_color else z, np.nan)
    lo, hi = (float(np.nanmin(tz)), float(np.nanmax(tz))) if ok.any() else (0.0, 1.0)
    if hi - lo <= 1e-12 * max(1.0, abs(lo), abs(hi)):
        pad = 0.5 if log_color else (abs(lo) * 0.1 or 1.0)
        lo, hi = lo - pad, hi + pad
    ticks = [lo + k * (hi - lo) / 4 for k in range(5)]
    tick_labels = [format_sig(10.0 ** t if log_color else t) for t in ticks]

    # --- layout
    ytw = max((_text_width(s, 11) for s in yl), default=0.0)
    xtw = max((_text_width(s, 11) for s in xl), default=0.0)
    ctw = max(_text_width(s, 11) for s in tick_labels)
    m_left = max(64.0, 26 + ytw + 10)
    m_right = _BAR_GAP + _BAR_W + 7 + ctw + 26
    pw = max(40.0, width - m_left - m_right) if width else float(_PLOT_W)
    cw = pw / max(ncols, 1)
    rotate_x = ncols > 0 and xtw > cw - 4
    m_bottom = _MARGIN_BOTTOM + (0.64 * xtw if rotate_x else 0)
    ph = max(40.0, height - _MARGIN_TOP - m_bottom) if height else float(_PLOT_H)
    ch = ph / max(nrows, 1)
    total_w, total_h = math.ceil(m_left + pw + m_right), math.ceil(_MARGIN_TOP + ph + m_bottom)
    x0, y0, y_bot = m_left, _MARGIN_TOP, _MARGIN_TOP + ph

    body: list[str] = []
    add = body.append
    for i in range(nrows):
        for j in range(ncols):
            v, x, y = z[i, j], x0 + j * cw, y_bot - (i + 1) * ch
            if ok[i, j]:
                fill, text = colormap((tz[i, j] - lo) / (hi - lo)), fmt(v)
                tip = text
            else:
                fill, text = _MISSING, "n/a"
                tip = "n/a" if not math.isfinite(v) else f"{fmt(v)} (n/a on a log scale)"
            tip = f"x = {xl[j]}, y = {yl[i]}: {tip}"
            add(f'<rect x="{_r(x)}" y="{_r(y)}" width="{_r(cw)}" height="{_r(ch)}" '
                f'fill="{fill}" stroke="#fff" stroke-width="0.5" class="cell">'
                f'<title>{_esc(tip)}</title></rect>')
            size = min(11.0, ch * 0.5, (cw - 4) / max(0.56 * len(text), 1e-9))
            if cell_text and size >= 4:
                add(f'<text x="{_r(x + cw / 2)}" y="{_r(y + ch / 2)}" dy="0.35em" '
                    f'text-anchor="middle" font-size="{_r(size)}" fill="{_text_colour(fill)}" '
                    f'class="celltext" pointer-events="none">{_esc(text)}</text>')
    for j, lab in enumerate(xl):
        xv, ty = _r(x0 + (j + 0.5) * cw), _r(y_bot + 17)
        rot = f' transform="rotate(-40 {xv} {ty})"' if rotate_x else ""
        add(f'<text x="{xv}" y="{ty}" text-anchor="{"end" if rotate_x else "middle"}" '
            f'font-size="11" fill="{_MUTED}" class="tick"{rot}>{_esc(lab)}</text>')
    for i, lab in enumerate(yl):
        add(f'<text x="{_r(x0 - 7)}" y="{_r(y_bot - (i + 0.5) * ch)}" dy="0.35em" '
            f'text-anchor="end" font-size="11" fill="{_MUTED}" class="tick">{_esc(lab)}</text>')

    # --- frame, axis titles, title
    add(f'<rect x="{_r(x0)}" y="{y0}" width="{_r(pw)}" height="{_r(ph)}" fill="none" '
        f'stroke="{_AXIS}"/>')
    add(f'<text x="{_r(x0 + pw / 2)}" y="{_r(y_bot + m_bottom - 16)}" text-anchor="middle" '
        f'font-size="12.5" fill="{_TEXT}">{_esc(xlabel)}</text>')
    ymid = _r(y0 + ph / 2)
    add(f'<text x="16" y="{ymid}" text-anchor="middle" font-size="12.5" fill="{_TEXT}" '
        f'transform="rotate(-90 16 {ymid})">{_esc(ylabel)}</text>')
    add(f'<text x="{_r(x0)}" y="21" font-size="14" font-weight="600" fill="{_TEXT}">'
        f'{_esc(title)}</text>')

    defs = ""
    if empty:
        add(f'<text x="{_r(x0 + pw / 2)}" y="{_r(y0 + ph / 2)}" text-anchor="middle" '
            f'font-size="13" fill="{_MUTED}" font-style="italic" class="nodata">no data</text>')
    else:  # --- colour bar (low at the bottom)
        grad_id = "cmap-" + hashlib.sha1("".join(body).encode("utf-8")).hexdigest()[:12]
        stops = "".join(f'<stop offset="{_r(k / (len(VIRIDIS) - 1))}" stop-color="{c}"/>'
                        for k, c in enumerate(VIRIDIS))
        defs = (f'<defs><linearGradient id="{grad_id}" x1="0" y1="1" x2="0" y2="0">'
                f'{stops}</linearGradient></defs>')
        bx = x0 + pw + _BAR_GAP
        add(f'<rect x="{_r(bx)}" y="{y0}" width="{_BAR_W}" height="{_r(ph)}" '
            f'fill="url(#{grad_id})" stroke="{_AXIS}" class="colorbar"/>')
        for k, lab in enumerate(tick_labels):
            ty = _r(y_bot - k / 4 * ph)
            add(f'<line x1="{_r(bx + _BAR_W)}" y1="{ty}" x2="{_r(bx + _BAR_W + 4)}" y2="{ty}" '
                f'stroke="{_AXIS}"/>')
            add(f'<text x="{_r(bx + _BAR_W + 7)}" y="{ty}" dy="0.35em" font-size="11" '
                f'fill="{_MUTED}" class="cbtick">{_esc(lab)}</text>')
        lx = _r(bx + _BAR_W + 7 + ctw + 14)
        add(f'<text x="{lx}" y="{ymid}" text-anchor="middle" font-size="12.5" fill="{_TEXT}" '
            f'transform="rotate(-90 {lx} {ymid})">{_esc(value_label)}</text>')

    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    return (f'<svg{ns} viewBox="0 0 {total_w} {total_h}" role="img" aria-label="{_esc(title)}" '
            f'class="plot heatmap" font-family="{_esc(_FONT)}">'
            f'<title>{_esc(title)}</title>{defs}'
            f'<rect width="{total_w}" height="{total_h}" fill="#fff"/>'
            f'{"".join(body)}</svg>')
