"""How the report page writes a value: numbers to the precision it shows them at, and a dash
for anything missing. Lower bounds (rounded down), an accountant's ε (an upper bound, rounded
up) and 3 significant digits follow the terminal's rounding rules
(:mod:`privaudit.core.formatting`), so the page and the terminal print the same text."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from privaudit.core.formatting import lower_bound, sig3, upper_sig3

__all__ = ["DASH", "num", "finite", "f3", "sig3", "upper_sig3", "short", "integer", "lb", "lb3", "pct", "plain",
           "interval"]

#: what the page shows for a missing value
DASH = "—"
#: a lower bound rounded down: one rounding rule with the terminal
lb = lower_bound


def lb3(v: Any) -> str:
    """A lower bound rounded down to 3 decimals (a Gaussian-DP μ: 1.05798 → 1.057)."""
    return lower_bound(v, 3)


def num(v: Any) -> float:
    """``v`` as a float, NaN when it is none."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def finite(v: Any) -> bool:
    return math.isfinite(num(v))


def f3(v: Any) -> str:
    """3 decimals: accuracies, AUCs, rates."""
    f = num(v)
    return f"{f:.3f}" if math.isfinite(f) else DASH


def short(v: Any) -> str:
    """A defence parameter (kappa, sigma, delta) in its shortest form."""
    f = num(v)
    return f"{f:g}" if math.isfinite(f) else DASH


def integer(v: Any) -> str:
    f = num(v)
    return str(int(round(f))) if math.isfinite(f) else DASH


def pct(v: Any, digits: int = 1) -> str:
    f = num(v)
    return f"{100 * f:.{digits}f}%" if math.isfinite(f) else DASH


def plain(v: Any) -> str:
    """A text value as shown: a dash when it is missing or empty."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return DASH
    try:
        if pd.isna(v):
            return DASH
    except (TypeError, ValueError):
        pass
    s = str(v)
    return s if s else DASH


def interval(lo: Any, hi: Any, fmt: Callable[[Any], str]) -> str:
    """``[lo, hi]`` written with ``fmt``, or "" when a side is missing."""
    return f"[{fmt(lo)}, {fmt(hi)}]" if finite(lo) and finite(hi) else ""
