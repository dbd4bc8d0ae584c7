"""DP-SGD through Opacus: noise calibration and ε accounting (papers.md A.5).

Opacus owns the mechanism (Poisson sampling, per-sample clipping with ghost clipping, noise)
and the accountants. privaudit reports ε from the PRV accountant, Opacus's default; where the
PRV accountant fails (it does at very large ε, e.g. σ ≈ 0.2), ε comes from the RDP accountant
instead and the metrics name the accountant used.
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

from opacus.accountants import create_accountant
from opacus.accountants.utils import get_noise_multiplier

from privaudit.errors import ConfigError

ACCOUNTANTS = ("prv", "rdp")


def epsilon_from_history(history: Sequence[tuple[float, float, int]], delta: float,
                         accountant: str | None = None) -> tuple[float, str]:
    """ε at ``delta`` for an Opacus history [(noise_multiplier, sample_rate, steps), ...].

    Returns (ε, accountant name). With ``accountant=None`` PRV is tried first and RDP is
    the fallback.
    """
    names = ACCOUNTANTS if accountant is None else (accountant,)
    last_error: Exception | None = None
    for name in names:
        acc = create_accountant(mechanism=name)
        acc.history = [tuple(h) for h in history]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eps = float(acc.get_epsilon(delta=delta))
        except Exception as exc:  # PRV fails for very large epsilon
            last_error = exc
            continue
        if math.isfinite(eps):
            return eps, name
    raise ConfigError(f"no accountant could compute epsilon for this setting ({last_error})")


def dpsgd_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                  accountant: str | None = None) -> tuple[float, str]:
    """ε of ``steps`` Poisson-subsampled Gaussian steps (rate q, noise multiplier σ)."""
    return epsilon_from_history([(noise_multiplier, sample_rate, steps)], delta, accountant)


def calibrate_noise_multiplier(target_epsilon: float, delta: float, sample_rate: float,
                               steps: int) -> tuple[float, str]:
    """The σ whose ε after ``steps`` steps lies at most 0.01 below ``target_epsilon`` and
    never above it (Opacus's binary search). Returns (σ, accountant name)."""
    last_error: Exception | None = None
    for name in ACCOUNTANTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sigma = get_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta,
                                             sample_rate=sample_rate, steps=steps, accountant=name)
            return float(sigma), name
        except ValueError as exc:
            last_error = exc
            if "too low" in str(exc):
                break
        except Exception as exc:
            last_error = exc
    raise ConfigError(f"cannot reach --target-epsilon {target_epsilon} at delta {delta} "
                      f"with {steps} steps at sampling rate {sample_rate:.4g} ({last_error})")
