"""Long lines drawn from the points their drawing needs, none of the others farther than a
tolerance from the drawn line.

A ROC curve of n non-members and m members has up to n + m + 1 points, most of them a fraction
of a pixel from the line through their neighbours once drawn. :func:`simplify` keeps the
points a drawing needs (Ramer–Douglas–Peucker, in the drawing's own units): every dropped point
lies within the tolerance of the segment that replaces it, so the drawn line and the original
one are nowhere farther apart than the tolerance, both ways. The points marked exact are all
kept: :func:`up_to` marks the low-FPR end of a ROC curve, whose TPR the page reports.
"""

from __future__ import annotations

import numpy as np

#: a ROC curve is drawn exactly up to this FPR (the reports give TPR at 1 % and 0.1 % FPR)
EXACT_FPR = 0.01


def simplify(points: np.ndarray, tolerance: float, exact: np.ndarray | None = None) -> np.ndarray:
    """Indices, ascending, of the points of the polyline ``points`` ((n, 2), in drawing units)
    to draw: the first and the last, every one where ``exact`` is True, and between two kept
    points the farthest from their segment while it is farther than ``tolerance``."""
    p = np.asarray(points, dtype=float).reshape(-1, 2)
    keep = np.zeros(len(p), dtype=bool) if exact is None else np.array(exact, dtype=bool)
    if len(p) <= 2:
        return np.arange(len(p))
    keep[[0, -1]] = True
    anchors = np.flatnonzero(keep)
    spans = [(a, b) for a, b in zip(anchors[:-1], anchors[1:]) if b - a > 1]
    while spans:
        a, b = spans.pop()
        seg = p[b] - p[a]
        rel = p[a + 1:b] - p[a]
        length2 = float(seg @ seg)
        t = np.clip(rel @ seg / length2, 0.0, 1.0) if length2 > 0 else np.zeros(len(rel))
        dist = np.hypot(*(rel - t[:, None] * seg).T)
        i = int(np.argmax(dist))
        if dist[i] > tolerance:
            k = a + 1 + i
            keep[k] = True
            spans += [(s, e) for s, e in ((a, k), (k, b)) if e - s > 1]
    return np.flatnonzero(keep)


def up_to(x: np.ndarray, limit: float) -> np.ndarray:
    """The points of a curve with ascending ``x`` (a ROC curve's FPR) up to ``limit``, and the
    first beyond it: kept exact, the curve is drawn exactly wherever x ≤ ``limit``."""
    x = np.asarray(x, dtype=float)
    mask = np.zeros(len(x), dtype=bool)
    mask[:np.searchsorted(x, limit, side="right") + 1] = True
    return mask
