"""Equal accuracy by construction: the κ at which MG noise reaches a DP-SGD target's accuracy.

The question an audit answers is *at equal test accuracy, which defence leaks less?*. A fixed
κ grid and a fixed σ grid rarely give accuracies that overlap, so ``--match-accuracy``
searches, for each DP-SGD setting, the κ whose MG-noise target reaches the same test
accuracy, and audits that κ besides the grid.

Test accuracy falls with κ (more multiplicative noise, less signal; docs/methods/a-mg-noise.md A.3), but
each point is one noisy training run, so the search assumes only that accuracy crosses the
DP-SGD accuracy somewhere between a κ above it and a κ below it (the intermediate-value
property), not monotonicity. It brackets the crossing from the κ already trained (the grid
and the baseline, κ = 0), doubling κ until accuracy falls below the goal, then narrows the
bracket by safeguarded false position (each new κ at least a tenth of the bracket away from
its ends, so the bracket shrinks geometrically). Each step is a cached training run, so a
rerun costs nothing. It stops when a κ lies within ``tolerance`` of the goal, after
``max_steps`` trainings, or when κ would exceed ``max_kappa``; the closest κ is returned
either way, with whether it is within tolerance.

κ values are rounded to three significant figures so that they read well in folder names
and tables and so that reruns land on the same cached models.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TOLERANCE = 0.01
MAX_STEPS = 8


@dataclass(frozen=True)
class KappaMatch:
    """The outcome of one search: the goal accuracy, the closest κ and its accuracy, every
    (κ, accuracy) trained for the search, and whether the closest one is within tolerance."""

    goal: float
    kappa: float
    accuracy: float
    within: bool
    tolerance: float
    steps: tuple[tuple[float, float], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"goal_accuracy": self.goal, "kappa": self.kappa, "accuracy": self.accuracy,
                "within_tolerance": self.within, "tolerance": self.tolerance,
                "steps": [{"kappa": k, "accuracy": a} for k, a in self.steps]}


#: the status of a defence searched to a target accuracy that stays more accurate than the target
#: even at its strongest setting: audited there and reported, never dropped
ABOVE_TARGET = "above the target"

def round_kappa(kappa: float) -> float:
    """κ rounded to three significant figures (0 stays 0)."""
    return 0.0 if kappa <= 0 else float(f"{kappa:.3g}")


def match_strength(goal: float, accuracy_of: Callable[[float], float], known: Mapping[float, float], *,
                   max_strength: float, tolerance: float = DEFAULT_TOLERANCE,
                   max_steps: int = MAX_STEPS, first: float = 1.0,
                   rounder: Callable[[float], float] = round_kappa, defended_only: bool = False) -> KappaMatch:
    """Search the strength s with ``accuracy_of(s)`` within ``tolerance`` of ``goal``, for any
    defence. ``known`` maps strengths already trained (at least the baseline, s = 0) to their
    test accuracy; ``accuracy_of`` trains (or reuses) the target at s and returns its
    accuracy. The strength s ≥ 0 is the defence's knob mapped so that accuracy falls as s
    grows (s = 0: the undefended baseline, in ``known``); ``max_strength``, the ceiling, is
    the knob's ``search_max``. The bracket grows from ``first`` by doubling up to ``max_strength``, and every
    strength tried is ``rounder(s)`` (three significant figures; whole numbers for an integer
    knob). The result's ``kappa`` is the strength found. ``defended_only``: the baseline
    brackets the search but is never its answer (the search ends when a strength s > 0 lies
    within tolerance; with none tried, the answer is s = 0, not within)."""
    if not (math.isfinite(goal) and 0.0 <= goal <= 1.0):
        raise ValueError(f"goal accuracy must lie in [0, 1], got {goal}")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    seen = {rounder(float(k)): float(a) for k, a in known.items()}
    steps: list[tuple[float, float]] = []

    def evaluate(kappa: float) -> float:
        acc = float(accuracy_of(kappa))
        seen[kappa] = acc
        steps.append((kappa, acc))
        return acc

    def answers() -> dict[float, float]:
        return {k: a for k, a in seen.items() if k > 0} if defended_only else seen

    def result() -> KappaMatch:
        pool = answers()
        if not pool:
            return KappaMatch(goal, 0.0, seen.get(0.0, math.nan), False, tolerance, tuple(steps))
        kappa = min(pool, key=lambda k: (abs(pool[k] - goal), k))
        return KappaMatch(goal, kappa, pool[kappa], abs(pool[kappa] - goal) <= tolerance, tolerance, tuple(steps))

    def done() -> bool:
        return any(abs(a - goal) <= tolerance for a in answers().values()) or len(steps) >= max_steps

    while not done():
        below = [k for k, a in seen.items() if a < goal]
        if not below:  # accuracy never fell to the goal yet: bracket by doubling κ
            largest = max(seen)
            nxt = rounder(min(max(first, 2.0 * largest), max_strength))
            if nxt > max_strength or nxt in seen:
                break
            evaluate(nxt)
            continue
        hi = min(below)
        above = [k for k, a in seen.items() if k < hi and a > goal]
        if not above:  # the goal lies above every accuracy below hi (e.g. above the baseline's)
            break
        lo = max(above)
        f_lo, f_hi = seen[lo] - goal, seen[hi] - goal
        width = hi - lo
        guess = lo + width * f_lo / (f_lo - f_hi)  # false position on accuracy − goal
        nxt = rounder(min(max(guess, lo + 0.1 * width), hi - 0.1 * width))
        if nxt in seen:  # rounding can no longer split the bracket
            break
        evaluate(nxt)
    return result()
