"""Hidden-state privacy accounting of NoisyCGD (docs/methods/b-hidden-state.md B.3), and GDP → (ε, δ).

Romijnders & Koskela (arXiv 2407.04884, NeurIPS 2025) train a λ-strongly convex model with
noisy cyclic gradient descent (NoisyCGD: fixed disjoint batches of size b visited in the
same order every epoch, per-sample clipping to C, noise N(0, (σC/b)² I), L2 term λv,
step η) and release only the last iterate. The shifted-interpolation bound of Bok, Su and
Altschuler (ICML 2024, Thm 4.5) makes E epochs μ_E-GDP with

    μ_E = μ · sqrt( 1 + c^{2l−2} (1 − c²) / (1 − c^l)² · (1 − c^{l(E−1)}) / (1 + c^{l(E−1)}) ),

μ = 2/σ (replace-one adjacency: one sample swapped moves a clipped batch mean by 2C/b), l =
⌊n/b⌋ batches per epoch (privaudit's NoisyCGD leaves the n mod b remaining samples out
rather than form a smaller batch, whose sensitivity would be larger), and the contraction factor of one noiseless step
c = max{|1 − ηλ|, |1 − ηβ|} for a β-smooth loss; the authors' code uses c = 1 − ηλ, which
is the same whenever η ≤ 2/(β + λ). μ_E grows with E but stays bounded as E → ∞.

μ_E is turned into ε at the given δ by the GDP conversion δ(ε) of Dong, Roth, Su (2022,
Cor. 2.13), :func:`privaudit.analysis.gdp.gdp_epsilon` (``gdp_delta``, ``gdp_epsilon`` and
``gdp_mu_for_epsilon`` live in :mod:`privaudit.analysis.gdp` and are importable from here as
before). Every function refuses settings outside the theorem's assumptions (λ ≤ 0, c ≥ 1) and
a δ or target ε out of range with a :class:`~privaudit.errors.ConfigError` instead of
returning a meaningless ε.

Reference values (docs/methods/b-hidden-state.md B.3; pinned by the tests): n = 60,000, b = 1,000, E = 400,
δ = 1e-5, ηλ = 5.4e-5: σ = 15 → ε ≈ 1.34, σ = 5 → ε ≈ 4.61.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privaudit.analysis.gdp import gdp_delta, gdp_epsilon, gdp_mu_for_epsilon  # noqa: F401 (re-exported)
from privaudit.errors import ConfigError

# Without a known smoothness β the bound takes c = 1 − ηλ, which holds only for a loss that
# is β-smooth with β ≤ 2/η − λ. β ≥ λ always, and the data term of a loss on privaudit's
# unit-scale (normalised) inputs adds curvature of order one or more, so a step whose ceiling
# 2/η − λ falls below this floor is refused unless --smoothness is given.
SMOOTHNESS_FLOOR = 1.0


def smoothness_ceiling(lr: float, l2: float) -> float:
    """2/η − λ: the largest smoothness β for which c = 1 − ηλ is the contraction."""
    return 2.0 / lr - l2


def contraction(lr: float, l2: float, smoothness: float | None = None) -> float:
    """c = max{|1 − ηλ|, |1 − ηβ|} (β = ``smoothness``). Without β, c = 1 − ηλ as in the
    authors' code, valid only when the loss is at most (2/η − λ)-smooth: a step for which that
    ceiling lies below max(λ, ``SMOOTHNESS_FLOOR``) is refused. Raises :class:`ConfigError`
    unless 0 ≤ c < 1 with λ > 0."""
    for name, value in (("`lr`", lr), ("`l2`", l2)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ConfigError(f"{name} must be > 0 (got {value}): the hidden-state bound needs a "
                              "strongly convex objective and a positive step")
    c = 1.0 - lr * l2
    if smoothness is not None:
        if not (math.isfinite(smoothness) and smoothness >= l2):
            raise ConfigError(f"`smoothness` must be finite and >= `l2` (got {smoothness})")
        c = max(abs(c), abs(1.0 - lr * smoothness))
    elif smoothness_ceiling(lr, l2) < max(l2, SMOOTHNESS_FLOOR):
        raise ConfigError(f"`lr` {lr:g} is too large for the contraction 1 - lr*l2 the bound assumes: it holds "
                          f"only if the loss is at most {smoothness_ceiling(lr, l2):.3g}-smooth (2/lr - l2), which "
                          f"a loss with a data term is not; give `smoothness` (the loss's smoothness beta) or a "
                          f"step <= {2.0 / (max(l2, SMOOTHNESS_FLOOR) + l2):.3g}")
    if not 0.0 <= c < 1.0:
        raise ConfigError(f"the step is too large for the contraction the bound needs: c = {c:.4g} "
                          "(need `lr` x `l2` < 1, and `lr` < 2/`smoothness`)")
    return c


def noisycgd_mu(noise_multiplier: float, dataset_size: int, batch_size: int, epochs: int,
                lr: float, l2: float, smoothness: float | None = None) -> float:
    """μ_E of E epochs of NoisyCGD (module docstring), replace-one adjacency."""
    _check_schedule(noise_multiplier, dataset_size, batch_size, epochs)
    c = contraction(lr, l2, smoothness)
    return 2.0 / noise_multiplier * math.sqrt(_growth(c, dataset_size // batch_size, epochs))


def _growth(c: float, batches: int, epochs: int) -> float:
    """The factor under the square root of μ_E (``batches`` is l), with log1p/expm1 where ηλ is tiny."""
    if c == 0.0:
        return 1.0
    log_c = math.log(c)
    one_minus_cl = -math.expm1(batches * log_c)                # 1 − c^l
    tail = math.exp(batches * (epochs - 1) * log_c)            # c^{l(E−1)}
    one_minus_c2 = -math.expm1(2 * log_c)                      # 1 − c²
    return 1.0 + math.exp((2 * batches - 2) * log_c) * one_minus_c2 / one_minus_cl ** 2 * (1 - tail) / (1 + tail)


def _check_schedule(noise_multiplier: float, dataset_size: int, batch_size: int, epochs: int) -> None:
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
        raise ConfigError(f"`noise_multiplier` must be > 0 (got {noise_multiplier})")
    if not (isinstance(dataset_size, int) and isinstance(batch_size, int) and 1 <= batch_size <= dataset_size):
        raise ConfigError(f"need 1 <= `batch_size` <= `dataset_size` (got {batch_size} and {dataset_size})")
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ConfigError(f"`epochs` must be >= 1 (got {epochs})")


def _check_delta(delta: float) -> None:
    if not (math.isfinite(delta) and 0 < delta < 1):
        raise ConfigError(f"`delta` must lie in (0, 1) (got {delta})")


@dataclass(frozen=True)
class NoisyCGDPrivacy:
    """The privacy of one NoisyCGD setting: σ, μ_E, ε at δ and the schedule behind them."""

    noise_multiplier: float
    mu: float
    epsilon: float
    delta: float
    contraction: float
    batches_per_epoch: int


def noisycgd_epsilon(noise_multiplier: float, dataset_size: int, batch_size: int, epochs: int, lr: float,
                     l2: float, delta: float, smoothness: float | None = None) -> NoisyCGDPrivacy:
    """ε at δ of releasing the last iterate of NoisyCGD (replace-one adjacency)."""
    _check_delta(delta)
    mu = noisycgd_mu(noise_multiplier, dataset_size, batch_size, epochs, lr, l2, smoothness)
    return NoisyCGDPrivacy(noise_multiplier, mu, gdp_epsilon(mu, delta), delta,
                           contraction(lr, l2, smoothness), dataset_size // batch_size)


def noisycgd_noise_for_epsilon(target_epsilon: float, dataset_size: int, batch_size: int, epochs: int,
                               lr: float, l2: float, delta: float,
                               smoothness: float | None = None) -> NoisyCGDPrivacy:
    """The σ that makes NoisyCGD exactly ``target_epsilon``-DP at δ. μ_E is 2/σ times a
    factor of the schedule alone, so σ = 2·sqrt(factor)/μ*, μ* the GDP μ of the target."""
    _check_schedule(1.0, dataset_size, batch_size, epochs)
    _check_delta(delta)
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ConfigError(f"`target_epsilon` must be > 0 (got {target_epsilon})")
    factor = noisycgd_mu(2.0, dataset_size, batch_size, epochs, lr, l2, smoothness)  # = sqrt(growth)
    sigma = 2.0 * factor / gdp_mu_for_epsilon(target_epsilon, delta)
    return noisycgd_epsilon(sigma, dataset_size, batch_size, epochs, lr, l2, delta, smoothness)
