"""How numbers are written, in the terminal and in the HTML report alike.

One rule for each kind of number, so that the terminal and the page never disagree:

- a lower bound (an empirical ε ≥ …, a Gaussian-DP μ ≥ …, an interval's lower end) is
  rounded *down* at the digits shown, so that what is printed is still a lower bound
  (μ = 1.05798 is shown as 1.05, never 1.06);
- an upper bound (an accountant's ε, an interval's upper end) is rounded *up*: an
  accountant's ε to 3 significant digits (:func:`upper_sig3`);
- accuracies, AUCs and rates have 3 decimals;
- a difference between two defences is written in its measure's unit: TPR at 0.1 % FPR in
  percentage points (its gaps are a few hundredths of a percent), the others as they are
  (:func:`difference`); the smallest difference a comparison could detect is rounded *up*
  (:func:`detectable`), so that it never claims more power than it has;
- an interval's lower end is rounded down and its upper end up (:func:`bounds`), so that
  the printed interval contains the computed one.
"""

from __future__ import annotations

import math
import re
from typing import Any

DASH = "—"


def number(v: Any) -> float:
    """``v`` as a float; NaN for anything that is not a number (None, text)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def slug(*parts: Any) -> str:
    """An HTML id or file stem from ``parts``: lower case, runs of other characters as ``-``."""
    s = "-".join(str(p) for p in parts).lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "group"


def _special(f: float) -> str | None:
    if math.isnan(f):
        return DASH
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    return None


def _tolerance(rounding) -> float:
    """What :func:`_directed` and :func:`_significant` forgive of the binary representation
    (2.28 is stored as 2.27999…, and still shown as 2.28)."""
    return 1e-9 if rounding is math.floor else -1e-9


def _significant(f: float, rounding) -> float:
    """``f`` (non-zero, finite) rounded by ``rounding`` to 3 significant digits."""
    scale = 10.0 ** (math.floor(math.log10(abs(f))) - 2)
    return rounding(f / scale + _tolerance(rounding)) * scale


def _directed(f: float, digits: int, rounding) -> str:
    """``f`` rounded by ``rounding`` (``math.floor`` or ``math.ceil``) to ``digits``
    decimals, or to 3 significant digits from 10,000 on."""
    if abs(f) >= 1e4:
        return f"{_significant(f, rounding):.3g}"
    scale = 10 ** digits
    return f"{rounding(f * scale + _tolerance(rounding)) / scale:.{digits}f}"


def lower_bound(v: Any, digits: int = 2) -> str:
    """A lower bound rounded *down* to ``digits`` decimals (``2.2799`` → ``2.27``), or with
    3 significant digits, still rounded down, from 10,000 on."""
    f = number(v)
    special = _special(f)
    return special if special is not None else _directed(f, digits, math.floor)


def upper_bound(v: Any, digits: int = 2) -> str:
    """An upper bound rounded *up* to ``digits`` decimals (``0.9401`` → ``0.95``), or with 3
    significant digits, still rounded up, from 10,000 on."""
    f = number(v)
    special = _special(f)
    return special if special is not None else _directed(f, digits, math.ceil)


def upper_sig3(v: Any) -> str:
    """An upper bound (an accountant's ε) with 3 significant digits, rounded *up*
    (``3.0949`` → ``3.10``), written as :func:`sig3` writes it."""
    f = number(v)
    return sig3(_significant(f, math.ceil) if math.isfinite(f) and f > 0 else f)


def sig3(v: Any) -> str:
    """3 significant digits, rounded to the nearest (a score; an accountant's ε, an upper
    bound, is :func:`upper_sig3`)."""
    f = number(v)
    special = _special(f)
    if special is not None:
        return special
    if f != 0 and (abs(f) >= 1e5 or abs(f) < 1e-3):
        return f"{f:.2e}"
    s = f"{f:#.3g}"
    return s[:-1] if s.endswith(".") else s


def fixed(v: Any, digits: int = 3) -> str:
    """``digits`` decimals (accuracy, AUC, TPR); a dash for a missing value."""
    f = number(v)
    return f"{f:.{digits}f}" if math.isfinite(f) else DASH


#: measures whose differences are written in percentage points
PERCENT_POINT_MEASURES = ("tpr_at_0p1pct_fpr", "tpr_at_1pct_fpr")


def difference(metric: str, gap: Any, lo: Any = float("nan"), hi: Any = float("nan")) -> tuple[str, str]:
    """(the difference, its interval) as text, in ``metric``'s unit (TPR at low FPR in
    percentage points, ``+2.419 pp``; the others as fractions, ``+0.005``); a dash and an
    empty interval for what is not a number. The page and the terminal both write it so."""
    scale, unit = (100.0, " pp") if metric in PERCENT_POINT_MEASURES else (1.0, "")
    g, a, b = number(gap), number(lo), number(hi)
    value = f"{scale * g:+.3f}{unit}" if math.isfinite(g) else DASH
    interval = f"[{scale * a:+.3f}, {scale * b:+.3f}]" if math.isfinite(a) and math.isfinite(b) else ""
    return value, interval


def bounds(lo: Any, hi: Any, digits: int = 2) -> str:
    """An interval ``[lo, hi]`` with ``lo`` rounded down and ``hi`` up to ``digits`` decimals
    (``0.2549, 0.3701`` → ``[0.25, 0.38]``); "" when a side is missing."""
    a, b = number(lo), number(hi)
    if not (math.isfinite(a) and math.isfinite(b)):
        return ""
    return f"[{lower_bound(a, digits)}, {upper_bound(b, digits)}]"


def detectable(metric: str, value: Any) -> str:
    """The smallest |DP − MG| a comparison detects with the stated power, in ``metric``'s unit
    as :func:`difference` writes it and rounded *up*: ``≥ 0.041``, ``≥ 2.42 pp``; "" when it
    is not a number."""
    scale, unit = (100.0, " pp") if metric in PERCENT_POINT_MEASURES else (1.0, "")
    f = number(value)
    return f"≥ {upper_bound(scale * f, 3)}{unit}" if math.isfinite(f) else ""
