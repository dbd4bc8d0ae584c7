"""DP-SGD accounting through Opacus and dp_accounting: noise calibration and ε (docs/methods/a-mg-noise.md A.5).

Opacus owns the mechanism (Poisson sampling, per-sample clipping with ghost clipping, noise)
and the accountants. privaudit reports ε from the PRV accountant, Opacus's default and the
tightest of its accountants. The PRV accountant's time and memory grow with ε, until it runs
out of memory (docs/performance.md), so where the RDP bound
already exceeds ``PRV_MAX_EPSILON`` (and wherever PRV fails) ε comes from the RDP accountant
instead; the metrics always name the accountant used. Both are upper bounds on the true ε,
PRV ≤ RDP.

Opacus is imported when an ε is first asked for, not with this module: importing it loads
torch's distributed-tensor stack and sympy (docs/performance.md), which a command that
trains no DP-SGD model never needs, and an audit then loads on a training worker while the
other trains instead of before any training starts.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from privaudit.errors import ConfigError

ACCOUNTANTS = ("prv", "rdp")
PRV_MAX_EPSILON = 100.0
EPSILON_TOLERANCE = 0.01
#: how Opacus's accountants fail on a setting they cannot handle: a bad domain or argument
#: (ValueError), overflow, a discretisation that does not converge (RuntimeError, also
#: std::bad_alloc), or an array too large to allocate; anything else is a bug and propagates
ACCOUNTANT_ERRORS = (ValueError, ArithmeticError, RuntimeError, MemoryError)


def create_accountant(mechanism: str) -> Any:  # Opacus's IAccountant (no type information)
    """Opacus's accountant ``mechanism`` ("prv" or "rdp"), Opacus imported on first use."""
    from opacus.accountants import create_accountant as opacus_accountant

    return opacus_accountant(mechanism=mechanism)


def _opacus_epsilon(history: Sequence[tuple[float, float, int]], delta: float, name: str) -> float:
    acc = create_accountant(mechanism=name)
    acc.history = [tuple(h) for h in history]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(delta=delta))


def epsilon_from_history(history: Sequence[tuple[float, float, int]], delta: float,
                         accountant: str | None = None) -> tuple[float, str]:
    """ε at ``delta`` for an Opacus history [(noise_multiplier, sample_rate, steps), ...].

    Returns (ε, accountant name). With ``accountant=None``: PRV, unless the RDP bound exceeds
    :data:`PRV_MAX_EPSILON` or PRV fails, in which case RDP.

    Computed once per process for each (history, δ, accountant): an audit's target, shadow,
    reference and canary models of one DP-SGD setting mostly share their history, and the
    accountants are slow (docs/performance.md; the same inputs give the same ε, so this only
    saves time).
    """
    if _NOT_ACCOUNTED:
        return math.nan, "not accounted"
    return _epsilon_cached(tuple((float(s), float(q), int(t)) for s, q, t in history), float(delta), accountant)


_NOT_ACCOUNTED = False


@contextlib.contextmanager
def not_accounted() -> Iterator[None]:
    """Inside the block :func:`epsilon_from_history` returns (NaN, "not accounted") at once:
    for the cost model's timing runs (:mod:`privaudit.executor.costs`), which time the
    training and price the accounting apart (the ε of a short timing run is never used, and
    each new history costs the accountants time)."""
    global _NOT_ACCOUNTED
    old, _NOT_ACCOUNTED = _NOT_ACCOUNTED, True
    try:
        yield
    finally:
        _NOT_ACCOUNTED = old


def accounting_seconds() -> float:
    """Seconds the accountants take for one new DP-SGD history (σ 1, sample rate 0.01, 1,000
    steps, δ 1e-5; the process's cache bypassed): what each DP-SGD setting's first model pays."""
    import time

    start = time.perf_counter()
    _epsilon_cached.__wrapped__(((1.0, 0.01, 1000),), 1e-5, None)
    return time.perf_counter() - start


@functools.lru_cache(maxsize=1024)
def _epsilon_cached(history: tuple[tuple[float, float, int], ...], delta: float,
                    accountant: str | None) -> tuple[float, str]:
    if accountant is not None:
        names: tuple[str, ...] = (accountant,)
    else:
        try:
            rdp = _opacus_epsilon(history, delta, "rdp")
        except ACCOUNTANT_ERRORS:
            rdp = math.nan
        if rdp > PRV_MAX_EPSILON:
            return rdp, "rdp"
        names = ACCOUNTANTS
    last_error: Exception | None = None
    for name in names:
        try:
            eps = _opacus_epsilon(history, delta, name)
        except ACCOUNTANT_ERRORS as exc:  # PRV's discretisation can fail at large epsilon
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
    never above it. Returns (σ, accountant name).

    The RDP σ comes from Opacus's own search (``get_noise_multiplier``, cheap). Beyond
    :data:`PRV_MAX_EPSILON` that is the answer. Otherwise the same bisection is run with
    the PRV accountant, but bracketed below the RDP σ (PRV ≤ RDP, so the RDP σ already meets
    the target under PRV): Opacus's search starts from σ = 0 and would evaluate PRV at tiny
    σ, where it needs gigabytes.
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ConfigError(f"`target_epsilon` must be > 0 (got {target_epsilon})")
    from opacus.accountants.utils import get_noise_multiplier

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sigma_rdp = float(get_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta,
                                                   sample_rate=sample_rate, steps=steps, accountant="rdp",
                                                   epsilon_tolerance=EPSILON_TOLERANCE))
    except ValueError as exc:
        raise ConfigError(f"cannot reach `target_epsilon` {target_epsilon} at delta {delta} with {steps} "
                          f"steps at sampling rate {sample_rate:.4g} ({exc})") from exc
    if target_epsilon > PRV_MAX_EPSILON:
        return sigma_rdp, "rdp"
    try:
        return _bisect_prv(target_epsilon, delta, sample_rate, steps, sigma_rdp), "prv"
    except ACCOUNTANT_ERRORS:
        return sigma_rdp, "rdp"


def _bisect_prv(target: float, delta: float, q: float, steps: int, sigma_high: float) -> float:
    def eps(sigma: float) -> float:
        return _opacus_epsilon([(sigma, q, steps)], delta, "prv")

    eps_high = eps(sigma_high)
    if eps_high > target:  # cannot happen (PRV <= RDP) unless PRV is inexact: search upwards
        for _ in range(20):
            sigma_high *= 1.25
            eps_high = eps(sigma_high)
            if eps_high <= target:
                break
        else:
            raise ConfigError("PRV search did not converge")
    sigma_low = sigma_high
    for _ in range(30):  # find a sigma below the target's (larger epsilon)
        sigma_low /= 1.5
        if eps(sigma_low) > target:
            break
    else:
        return sigma_high
    while target - eps_high > EPSILON_TOLERANCE and sigma_high - sigma_low > 1e-6:
        mid = (sigma_low + sigma_high) / 2
        e = eps(mid)
        if e <= target:
            sigma_high, eps_high = mid, e
        else:
            sigma_low = mid
    return sigma_high


REPLACE_ONE_ACCOUNTANT = "pld replace-one (dp_accounting)"
# The PLD's time grows with ε (docs/performance.md); past this σ/2 bound the bound itself is
# reported.
REPLACE_ONE_MAX_BOUND = 1000.0


def replace_one_discretisation(steps: int) -> float:
    """The PLD's privacy-loss grid for ``steps`` compositions. Its pessimistic rounding keeps
    ε an upper bound at any interval, and the rounding error grows with the number of
    compositions. So the interval is 0.5 / steps between 1e-4 (the library's default, kept
    for long runs) and 1e-3, the coarser and faster grid for short runs (docs/performance.md
    has the error and the time; tests/test_hidden_state.py checks both regimes against the
    finer grid)."""
    return min(1e-3, max(1e-4, 0.5 / max(int(steps), 1)))


@functools.lru_cache(maxsize=256)
def replace_one_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> tuple[float, str]:
    """ε at ``delta`` of DP-SGD (``steps`` Poisson-subsampled Gaussian steps, rate q, noise
    multiplier σ) under *replace-one* adjacency: neighbouring datasets differ in one sample
    swapped for another, the notion of NoisyCGD's hidden-state bound (docs/methods/b-hidden-state.md B.3).

    Computed exactly (up to the discretisation of the privacy-loss distribution, an upper
    bound) by Google's ``dp_accounting`` PLD accountant with its ``REPLACE_ONE`` neighbouring
    relation. The paper's comparator, Opacus's add/remove ε at multiplier σ/2 (a swap moves a
    clipped sum by up to 2C), is an upper bound on this, the looser the smaller σ
    (:func:`replace_one_epsilon_sigma_half`): at δ = 1e-5, rate 1/106 and 5,300 steps it is
    6.2× the exact ε at σ = 0.8, 4.1× at σ = 1, 1.9× at σ = 1.5 and 1.4× at σ = 2; at the
    paper's σ = 15 (rate 1/60, 24,000 steps) 1.01×. Where that bound already exceeds
    ``REPLACE_ONE_MAX_BOUND`` (the PLD's cost grows with ε) it is returned instead, named as such.
    Returns (ε, accountant name)."""
    bound, name = replace_one_epsilon_sigma_half(noise_multiplier, sample_rate, steps, delta)
    if bound > REPLACE_ONE_MAX_BOUND:
        return bound, f"{name} at sigma/2 (upper bound)"
    import dp_accounting
    from dp_accounting import pld

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)
    accountant = pld.PLDAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE,
                                   value_discretization_interval=replace_one_discretisation(steps))
    accountant.compose(event)
    return float(accountant.get_epsilon(delta)), REPLACE_ONE_ACCOUNTANT


@functools.lru_cache(maxsize=256)  # also the first step of replace_one_epsilon: computed once
def replace_one_epsilon_sigma_half(noise_multiplier: float, sample_rate: float, steps: int,
                                   delta: float) -> tuple[float, str]:
    """The paper's conservative replace-one comparator: Opacus's (add/remove) ε at noise
    multiplier σ/2. Returns (ε, accountant name)."""
    return epsilon_from_history([(noise_multiplier / 2, sample_rate, steps)], delta)
