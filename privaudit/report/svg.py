"""A small inline-SVG line/scatter plot writer (no plotting library needed).

:func:`line_plot` returns one ``<svg>`` element as a string, ready to be pasted into an
HTML page (or, with ``standalone=True``, written to a ``.svg`` file). It draws axes with
"nice" ticks (1-2-5 steps on linear axes, decades on log axes), gridlines, axis labels, a
legend and one polyline (plus optional circle markers) per series, in the colour-blind-safe
Okabe-Ito palette.

Data handling:

* points with a non-finite coordinate, or a coordinate <= 0 on a log axis, are dropped;
* long series (ROC curves have thousands of points) are thinned in pixel space with the
  Ramer-Douglas-Peucker algorithm to at most ``max_points`` points, keeping the first and
  the last point and every visible bend;
* an empty input (or series that are all empty after dropping) gives a plot frame with a
  "no data" note instead of an error.

Every text is XML-escaped and coordinates are rounded to 2 decimals.
"""

from __future__ import annotations

import hashlib
import html
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["line_plot", "PALETTE", "nice_linear_ticks", "log_decade_ticks", "thin_points"]

#: Okabe-Ito colours (yellow left out: too pale on white), in drawing order.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
#: Dash patterns used once the palette wraps around, so series stay distinguishable.
_DASHES = ("", "6 3", "2 3", "8 3 2 3")

_FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
_TEXT = "#222"
_MUTED = "#555"
_GRID = "#e3e5e8"
_GRID_MINOR = "#f1f2f4"
_AXIS = "#888"

_MARGIN_LEFT = 64
_MARGIN_RIGHT = 18
_MARGIN_TOP = 34
_MARGIN_BOTTOM = 54
_LEGEND_ROW = 18

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _r(v: float) -> str:
    """A coordinate rounded to 2 decimals, written without trailing zeros."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


# ---------------------------------------------------------------------------------------
# ticks


def _nice_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * mag * (1 + 1e-9):
            return m * mag
    return 10.0 * mag  # pragma: no cover - unreachable


def _decimals(step: float) -> int:
    return max(0, -int(math.floor(math.log10(step) + 1e-9)))


def nice_linear_ticks(lo: float, hi: float, target: int = 6, expand: bool = True
                      ) -> tuple[float, float, list[float], int]:
    """Nice ticks for a linear axis.

    Returns ``(lo, hi, ticks, decimals)``: the (possibly expanded to whole steps) axis
    range, the tick values (multiples of a 1-2-5 step) and the number of decimals that
    writes them exactly.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi < lo:
        lo, hi = hi, lo
    if hi - lo <= 1e-12 * max(1.0, abs(lo), abs(hi)):
        pad = abs(lo) * 0.1 if lo != 0 else 1.0
        lo, hi = lo - pad, hi + pad
    step = _nice_step(hi - lo, target)
    if expand:
        lo = math.floor(lo / step + 1e-9) * step
        hi = math.ceil(hi / step - 1e-9) * step
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    ticks = [round(k * step, 12) for k in range(first, last + 1)]
    return lo, hi, ticks, _decimals(step)


def log_decade_ticks(lo: float, hi: float, expand: bool = True
                     ) -> tuple[float, float, list[float], list[float]]:
    """Decade ticks for a log axis: ``(lo, hi, major_ticks, minor_ticks)``.

    Major ticks are powers of ten (every 2nd/3rd... one when the range spans many
    decades); minor ticks are 2..9 times each decade, drawn only for up to 6 decades.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 or hi <= 0:
        lo, hi = 0.1, 1.0
    if hi < lo:
        lo, hi = hi, lo
    elo, ehi = math.log10(lo), math.log10(hi)
    if expand:
        elo, ehi = math.floor(elo + 1e-9), math.ceil(ehi - 1e-9)
        if ehi <= elo:
            elo, ehi = elo - 1, ehi + 1
        lo, hi = 10.0 ** elo, 10.0 ** ehi
    elif ehi - elo < 1e-12:
        lo, hi = lo / 10, hi * 10
        elo, ehi = elo - 1, ehi + 1
    first, last = math.ceil(elo - 1e-9), math.floor(ehi + 1e-9)
    n_dec = last - first + 1
    every = 1 if n_dec <= 8 else math.ceil(n_dec / 8)
    majors = [10.0 ** e for e in range(first, last + 1) if (e - first) % every == 0]
    minors: list[float] = []
    if ehi - elo <= 6:
        for e in range(math.floor(elo), math.ceil(ehi) + 1):
            for m in range(2, 10):
                v = m * 10.0 ** e
                if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                    minors.append(v)
    return lo, hi, majors, minors


def _log_label(v: float, all_majors: Sequence[float]) -> str:
    exps = [round(math.log10(t)) for t in all_majors]
    e = round(math.log10(v))
    if exps and min(exps) >= -3 and max(exps) <= 3:
        return f"{v:.{max(0, -e)}f}"
    return "10" + str(e).translate(_SUPERSCRIPT)


def _lin_label(v: float, decimals: int) -> str:
    s = f"{v:.{decimals}f}"
    if s.startswith("-") and float(s) == 0:
        s = s[1:]
    return s.replace("-", "−")


# ---------------------------------------------------------------------------------------
# thinning


def thin_points(px: np.ndarray, py: np.ndarray, max_points: int = 400,
                tolerance: float = 0.35) -> np.ndarray:
    """Indices of the points to keep so that the polyline looks the same on screen.

    ``px``/``py`` are pixel coordinates. Ramer-Douglas-Peucker with a tolerance of
    ``tolerance`` pixels, grown by 1.5x until at most ``max_points`` points remain. The
    first and the last point are always kept. Returns sorted indices.
    """
    n = len(px)
    if n <= max(2, max_points):
        return np.arange(n)
    eps = tolerance
    while True:
        keep = _rdp(px, py, eps)
        if len(keep) <= max_points:
            return keep
        eps *= 1.5


def _rdp(px: np.ndarray, py: np.ndarray, eps: float) -> np.ndarray:
    n = len(px)
    keep = np.zeros(n, dtype=bool)
    keep[0] = keep[-1] = True
    stack = [(0, n - 1)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
        xs, ys = px[a + 1:b], py[a + 1:b]
        dx, dy = px[b] - px[a], py[b] - py[a]
        norm = math.hypot(dx, dy)
        if norm < 1e-12:
            dist = np.hypot(xs - px[a], ys - py[a])
        else:
            dist = np.abs(dy * (xs - px[a]) - dx * (ys - py[a])) / norm
        i = int(np.argmax(dist))
        if dist[i] > eps:
            m = a + 1 + i
            keep[m] = True
            stack.append((a, m))
            stack.append((m, b))
    return np.flatnonzero(keep)


# ---------------------------------------------------------------------------------------
# the plot


def _clean(series: Mapping[str, Any], log_x: bool, log_y: bool) -> tuple[np.ndarray, np.ndarray]:
    def as_float(v: Any) -> np.ndarray:
        try:
            return np.asarray(v if v is not None else [], dtype=float).ravel()
        except (TypeError, ValueError):
            return np.asarray([_to_float(t) for t in (v or [])], dtype=float)

    x, y = as_float(series.get("x")), as_float(series.get("y"))
    n = min(len(x), len(y))
    x, y = x[:n], y[:n]
    ok = np.isfinite(x) & np.isfinite(y)
    if log_x:
        ok &= x > 0
    if log_y:
        ok &= y > 0
    return x[ok], y[ok]


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _text_width(text: str, size: float) -> float:
    return 0.56 * size * len(text)


def line_plot(series: Iterable[Mapping[str, Any]], *, title: str, xlabel: str, ylabel: str,
              log_x: bool = False, log_y: bool = False, width: int = 560, height: int = 380,
              x_range: tuple[float, float] | None = None,
              y_range: tuple[float, float] | None = None, diagonal: bool = False,
              max_points: int = 400, standalone: bool = False) -> str:
    """An ``<svg>`` line/scatter plot of ``series`` as a string.

    ``series``: dicts ``{"label": str, "x": sequence, "y": sequence, "markers": bool, "line": bool}``
    (``markers`` and ``line`` default to True; ``line=False`` draws points only). ``x_range``/``y_range`` fix an axis range (otherwise it
    is taken from the data and widened to whole tick steps / decades). ``diagonal`` draws
    the chance line y = x (ROC curves). ``width``/``height`` are the plot's size in user
    units; the legend is added below it, so the ``viewBox`` is ``height`` plus the legend
    rows tall. ``standalone`` adds the SVG namespace for use outside HTML.
    """
    series = list(series or [])
    cleaned = [_clean(s, log_x, log_y) for s in series]
    all_x = np.concatenate([c[0] for c in cleaned]) if cleaned else np.empty(0)
    all_y = np.concatenate([c[1] for c in cleaned]) if cleaned else np.empty(0)
    has_data = all_x.size > 0

    # --- axis ranges and ticks
    def axis(values: np.ndarray, rng: tuple[float, float] | None, log: bool, target: int):
        if rng is not None:
            lo, hi = float(rng[0]), float(rng[1])
            expand = False
        elif values.size:
            lo, hi = float(values.min()), float(values.max())
            expand = True
        else:
            lo, hi = (0.1, 1.0) if log else (0.0, 1.0)
            expand = True
        if log:
            lo, hi, majors, minors = log_decade_ticks(lo, hi, expand=expand)
            labels = [_log_label(t, majors) for t in majors]
            return lo, hi, majors, minors, labels
        lo, hi, ticks, dec = nice_linear_ticks(lo, hi, target=target, expand=expand)
        return lo, hi, ticks, [], [_lin_label(t, dec) for t in ticks]

    pw = width - _MARGIN_LEFT - _MARGIN_RIGHT
    ph = height - _MARGIN_TOP - _MARGIN_BOTTOM
    x_lo, x_hi, x_ticks, x_minor, x_labels = axis(all_x, x_range, log_x, max(3, pw // 80))
    y_lo, y_hi, y_ticks, y_minor, y_labels = axis(all_y, y_range, log_y, max(3, ph // 50))

    tx = (lambda v: np.log10(v)) if log_x else (lambda v: v)
    ty = (lambda v: np.log10(v)) if log_y else (lambda v: v)
    tx_lo, tx_hi, ty_lo, ty_hi = tx(x_lo), tx(x_hi), ty(y_lo), ty(y_hi)

    def sx(v):
        return _MARGIN_LEFT + (tx(v) - tx_lo) / (tx_hi - tx_lo) * pw

    def sy(v):
        return _MARGIN_TOP + ph - (ty(v) - ty_lo) / (ty_hi - ty_lo) * ph

    # --- legend layout (rows below the x-axis label)
    legend_items = []
    for i, (s, (x, _)) in enumerate(zip(series, cleaned)):
        label = str(s.get("label", f"series {i + 1}"))
        if x.size == 0:
            label += " (no data)"
        legend_items.append((i, label))
    rows: list[list[tuple[int, str, float]]] = []
    cur_w, avail = 0.0, width - _MARGIN_LEFT - _MARGIN_RIGHT
    for i, label in legend_items:
        w = 30 + _text_width(label, 12) + 16
        if not rows or (cur_w + w > avail and rows[-1]):
            rows.append([])
            cur_w = 0.0
        rows[-1].append((i, label, cur_w))
        cur_w += w
    total_h = height + (len(rows) * _LEGEND_ROW + 4 if rows else 0)

    body: list[str] = []
    add = body.append
    clip_rect = f'x="{_MARGIN_LEFT}" y="{_MARGIN_TOP}" width="{pw}" height="{ph}"'

    # --- grid
    if log_x:
        for v in x_minor:
            xv = _r(sx(v))
            add(f'<line x1="{xv}" y1="{_MARGIN_TOP}" x2="{xv}" y2="{_MARGIN_TOP + ph}" '
                f'stroke="{_GRID_MINOR}"/>')
    if log_y:
        for v in y_minor:
            yv = _r(sy(v))
            add(f'<line x1="{_MARGIN_LEFT}" y1="{yv}" x2="{_MARGIN_LEFT + pw}" y2="{yv}" '
                f'stroke="{_GRID_MINOR}"/>')
    for v, lab in zip(x_ticks, x_labels):
        xv = _r(sx(v))
        add(f'<line x1="{xv}" y1="{_MARGIN_TOP}" x2="{xv}" y2="{_MARGIN_TOP + ph}" '
            f'stroke="{_GRID}"/>')
        add(f'<line x1="{xv}" y1="{_MARGIN_TOP + ph}" x2="{xv}" y2="{_MARGIN_TOP + ph + 4}" '
            f'stroke="{_AXIS}"/>')
        add(f'<text x="{xv}" y="{_MARGIN_TOP + ph + 17}" text-anchor="middle" font-size="11" '
            f'fill="{_MUTED}" class="tick">{_esc(lab)}</text>')
    for v, lab in zip(y_ticks, y_labels):
        yv = _r(sy(v))
        add(f'<line x1="{_MARGIN_LEFT}" y1="{yv}" x2="{_MARGIN_LEFT + pw}" y2="{yv}" '
            f'stroke="{_GRID}"/>')
        add(f'<line x1="{_MARGIN_LEFT - 4}" y1="{yv}" x2="{_MARGIN_LEFT}" y2="{yv}" '
            f'stroke="{_AXIS}"/>')
        add(f'<text x="{_MARGIN_LEFT - 7}" y="{yv}" dy="0.35em" text-anchor="end" font-size="11" '
            f'fill="{_MUTED}" class="tick">{_esc(lab)}</text>')

    # --- frame and axis labels
    add(f'<rect {clip_rect} fill="none" stroke="{_AXIS}"/>')
    add(f'<text x="{_r(_MARGIN_LEFT + pw / 2)}" y="{_MARGIN_TOP + ph + 38}" text-anchor="middle" '
        f'font-size="12.5" fill="{_TEXT}">{_esc(xlabel)}</text>')
    ymid = _r(_MARGIN_TOP + ph / 2)
    add(f'<text x="16" y="{ymid}" text-anchor="middle" font-size="12.5" fill="{_TEXT}" '
        f'transform="rotate(-90 16 {ymid})">{_esc(ylabel)}</text>')
    add(f'<text x="{_MARGIN_LEFT}" y="21" font-size="14" font-weight="600" fill="{_TEXT}">'
        f'{_esc(title)}</text>')

    # --- data (clipped to the plot area)
    data: list[str] = []
    if diagonal:
        lo = max(x_lo, y_lo)
        hi = min(x_hi, y_hi)
        if hi > lo:
            data.append(f'<line x1="{_r(sx(lo))}" y1="{_r(sy(lo))}" x2="{_r(sx(hi))}" '
                        f'y2="{_r(sy(hi))}" stroke="#999" stroke-dasharray="4 4"/>')
    markers_svg: list[str] = []
    for i, (s, (x, y)) in enumerate(zip(series, cleaned)):
        if x.size == 0:
            continue
        color = PALETTE[i % len(PALETTE)]
        dash = _DASHES[(i // len(PALETTE)) % len(_DASHES)]
        px, py = sx(x), sy(y)
        keep = thin_points(px, py, max_points=max_points)
        px, py = px[keep], py[keep]
        if px.size > 1 and s.get("line", True):
            pts = " ".join(f"{_r(a)},{_r(b)}" for a, b in zip(px, py))
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            data.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2" '
                        f'stroke-linejoin="round" stroke-linecap="round"{dash_attr}/>')
        if s.get("markers", True) or px.size == 1:
            inside = ((px >= _MARGIN_LEFT - 0.5) & (px <= _MARGIN_LEFT + pw + 0.5)
                      & (py >= _MARGIN_TOP - 0.5) & (py <= _MARGIN_TOP + ph + 0.5))
            for a, b in zip(px[inside], py[inside]):
                markers_svg.append(f'<circle cx="{_r(a)}" cy="{_r(b)}" r="3.6" fill="{color}" '
                                   f'stroke="#fff" stroke-width="1"/>')

    if not has_data:
        add(f'<text x="{_r(_MARGIN_LEFT + pw / 2)}" y="{_r(_MARGIN_TOP + ph / 2)}" '
            f'text-anchor="middle" font-size="13" fill="{_MUTED}" font-style="italic" '
            f'class="nodata">no data</text>')

    # --- legend
    for r, row in enumerate(rows):
        ly = height + r * _LEGEND_ROW + 2
        for i, label, off in row:
            color = PALETTE[i % len(PALETTE)]
            dash = _DASHES[(i // len(PALETTE)) % len(_DASHES)]
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            x0 = _MARGIN_LEFT + off
            if series[i].get("line", True):
                add(f'<line x1="{_r(x0)}" y1="{ly}" x2="{_r(x0 + 22)}" y2="{ly}" stroke="{color}" '
                    f'stroke-width="2"{dash_attr}/>')
            if series[i].get("markers", True):
                add(f'<circle cx="{_r(x0 + 11)}" cy="{ly}" r="3.6" fill="{color}" stroke="#fff" '
                    f'stroke-width="1"/>')
            add(f'<text x="{_r(x0 + 28)}" y="{ly}" dy="0.35em" font-size="12" fill="{_TEXT}">'
                f'{_esc(label)}</text>')

    inner = "".join(body)
    payload = inner + "".join(data) + "".join(markers_svg)
    clip_id = "clip-" + hashlib.sha1(
        (f"{width}x{height}|{title}|" + payload).encode("utf-8")).hexdigest()[:12]
    clipped = (f'<clipPath id="{clip_id}"><rect {clip_rect}/></clipPath>'
               f'<g clip-path="url(#{clip_id})">{"".join(data)}</g>' if data else "")
    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    return (f'<svg{ns} viewBox="0 0 {width} {total_h}" role="img" aria-label="{_esc(title)}" '
            f'class="plot" font-family="{_esc(_FONT)}">'
            f'<title>{_esc(title)}</title>'
            f'<rect width="{width}" height="{total_h}" fill="#fff"/>'
            f'{inner}{clipped}{"".join(markers_svg)}</svg>')
