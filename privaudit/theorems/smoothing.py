"""The expected ReLU under a multiplicative Gaussian mask (docs/methods/a-mg-noise.md A.2, Figures 1–2).

For a neuron w and an input x masked by c ~ N(1, κ² I), the pre-activation is Gaussian,
wᵀ(x ⊙ c) = z + κ Σ_i w_i x_i ε_i ~ N(z, s²), z = wᵀx, s = κ‖w ⊙ x‖₂, so the expected
activation has the closed form

    E_c[ReLU(wᵀ(x ⊙ c))] = z·Φ(z/s) + s·φ(z/s),

the ReLU smoothed at scale s (→ ReLU(z) as κ → 0). The convergence theorems use the proxy
z·Φ(z/s), which drops s·φ(z/s): the two differ by at most s/√(2π), at z = 0.

The Monte Carlo check simulates the mask itself, not the Gaussian it implies: a vector
v = w ⊙ x in d = 20 dimensions with ‖v‖ fixed and Σ v_i = z, and draws of c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

DIMENSION = 20


def expected_relu(z: np.ndarray | float, s: np.ndarray | float) -> np.ndarray:
    """z·Φ(z/s) + s·φ(z/s); ReLU(z) where s = 0."""
    z, s = np.asarray(z, dtype=float), np.asarray(s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = z / s
        smooth = z * norm.cdf(t) + s * norm.pdf(t)
    return np.where(s > 0, smooth, np.maximum(z, 0.0))


def proxy_relu(z: np.ndarray | float, s: np.ndarray | float) -> np.ndarray:
    """The theorems' proxy z·Φ(z/s) (ReLU(z) where s = 0)."""
    z, s = np.asarray(z, dtype=float), np.asarray(s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        smooth = z * norm.cdf(z / s)
    return np.where(s > 0, smooth, np.maximum(z, 0.0))


def neuron_input(z: float, norm_wx: float, rng: np.random.Generator, d: int = DIMENSION) -> np.ndarray:
    """A vector v = w ⊙ x with Σ v_i = z and ‖v‖ = ``norm_wx`` (needs z² ≤ d·‖v‖²)."""
    if z * z > d * norm_wx ** 2:
        raise ValueError(f"z = {z} is out of reach for ‖w ⊙ x‖ = {norm_wx} in {d} dimensions")
    u = rng.standard_normal(d)
    u -= u.mean()                                   # orthogonal to the all-ones vector
    u *= math.sqrt(max(norm_wx ** 2 - z * z / d, 0.0)) / np.linalg.norm(u)
    return z / d + u


def monte_carlo_relu(v: np.ndarray, kappa: float, draws: int, rng: np.random.Generator,
                     chunk: int = 50_000) -> tuple[float, float]:
    """Mean and standard error of ReLU(Σ_i v_i c_i) over ``draws`` masks c ~ N(1, κ² I)."""
    total = total_sq = 0.0
    done = 0
    while done < draws:
        k = min(chunk, draws - done)
        c = 1.0 + kappa * rng.standard_normal((k, len(v)))
        a = np.maximum(c @ v, 0.0)
        total += a.sum()
        total_sq += (a * a).sum()
        done += k
    mean = total / draws
    var = max(total_sq / draws - mean * mean, 0.0)
    return mean, math.sqrt(var / draws)


@dataclass
class SmoothingResult:
    table: pd.DataFrame   # one row per (κ, z)
    max_gap: float        # largest |closed form − Monte Carlo|
    max_gap_se: float     # the Monte Carlo standard error at that point
    max_gap_in_se: float  # largest |gap| / SE over the grid


def smoothing_experiment(kappas=(0.1, 0.2, 0.5, 1.0), z_grid=None, norm_wx: float = 1.0,
                         draws: int = 200_000, seed: int = 0) -> SmoothingResult:
    """Closed form, proxy and Monte Carlo over κ × z (Figures 1–2 of docs/methods/a-mg-noise.md A.2)."""
    if z_grid is None:
        z_grid = np.linspace(-2.1, 2.1, 43)
    rng = np.random.default_rng(seed)
    rows = []
    for kappa in kappas:
        s = kappa * norm_wx
        for z in z_grid:
            mc, se = monte_carlo_relu(neuron_input(float(z), norm_wx, rng), float(kappa), draws, rng)
            closed = float(expected_relu(z, s))
            rows.append({"kappa": float(kappa), "z": float(z), "s": s, "relu": max(float(z), 0.0),
                         "closed_form": closed, "proxy": float(proxy_relu(z, s)), "monte_carlo": mc,
                         "mc_standard_error": se, "gap": closed - mc,
                         "gap_in_se": abs(closed - mc) / se if se > 0 else 0.0})
    table = pd.DataFrame(rows)
    worst = table["gap"].abs().idxmax()
    return SmoothingResult(table, float(abs(table.loc[worst, "gap"])), float(table.loc[worst, "mc_standard_error"]),
                           float(table["gap_in_se"].max()))
