"""Convergence of gradient descent under Gaussian input masks (docs/methods/a-mg-noise.md A.2, Figure 3(a)).

Full-batch GD on the two-layer ReLU network of :mod:`privaudit.theorems.twolayer`, each step
on freshly masked inputs X ⊙ C, C ~ N(1, κ²):

    W_{k+1} = W_k − η ∇_W ½‖f(W_k, X ⊙ C_k) − y‖².

The theorem: linear convergence at the rate of plain GD, (1 − ηλ₀/2)^k, up to an error
region proportional to κ². What is recorded is the *clean* training loss ½‖f(W_k, X) − y‖²
at every iteration (the figure's y-axis, docs/methods/a-mg-noise.md A.2).

Read-outs, per κ:

* the early rate, −(ln L_K − ln L_0)/K over the first K = ``early`` iterations, which
  should not depend on κ;
* the floor, the mean clean loss over the last ``window`` iterations, and whether the curve
  has reached it: *plateaued* when the mean over the last window is at least
  ``1 − plateau_tolerance`` of the window before it (κ = 0 should not plateau);
* at the final W, the masked loss split into the smoothed network's loss and the output
  variance (:func:`twolayer.masked_loss_decomposition`): at the floor, the variance term,
  the regulariser growing like κ², is what keeps the clean loss up;
* the log-log slope of floor against κ over the plateaued κ > 0, fitted by least squares
  (the theorem's floor ∝ κ² predicts 2; floors saturate near the initial loss for large κ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privaudit.theorems.twolayer import (
    Problem,
    clean_loss,
    gradient,
    least_eigenvalue,
    mask_inputs,
    masked_loss_decomposition,
)

KAPPAS = (0.0, 0.05, 0.2, 0.4, 0.6, 1.0, 2.0)


def masked_gd(problem: Problem, kappa: float, lr: float, iterations: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Masked full-batch GD: (clean loss at iterations 0…``iterations``, shape (iterations + 1,);
    the final W)."""
    X, y, a = problem.X, problem.y, problem.a
    W = problem.W0.copy()
    losses = np.empty(iterations + 1)
    losses[0] = clean_loss(W, a, X, y)
    for k in range(iterations):
        W -= lr * gradient(W, a, mask_inputs(X, kappa, rng), y)
        losses[k + 1] = clean_loss(W, a, X, y)
    return losses, W


def early_rate(losses: np.ndarray, early: int) -> float:
    """Per-iteration linear rate −(ln L_K − ln L_0)/K over the first K iterations."""
    return float(-(math.log(losses[early]) - math.log(losses[0])) / early)


def floor_of(losses: np.ndarray, window: int, plateau_tolerance: float) -> tuple[float, bool]:
    """(mean over the last ``window`` iterations, whether the curve has flattened there)."""
    last = float(losses[-window:].mean())
    before = float(losses[-2 * window:-window].mean())
    return last, last >= (1.0 - plateau_tolerance) * before


def loglog_slope(kappas: np.ndarray, floors: np.ndarray) -> tuple[float, float]:
    """Least-squares (slope, intercept) of ln floor on ln κ; NaN with fewer than two points."""
    if len(kappas) < 2:
        return float("nan"), float("nan")
    slope, intercept = np.polyfit(np.log(kappas), np.log(floors), 1)
    return float(slope), float(intercept)


@dataclass
class ConvergenceResult:
    curves: pd.DataFrame    # kappa, iteration, clean_loss
    summary: pd.DataFrame   # per κ: early_rate, floor, plateaued, final_loss and the decomposition
    lambda0: float          # λ_min of the NTK Gram matrix H∞ of the data
    slope: float            # d ln floor / d ln κ over plateaued κ > 0
    intercept: float


def convergence_experiment(problem: Problem, kappas=KAPPAS, lr: float = 0.005, iterations: int = 2000,
                           seed: int = 0, early: int = 20, window: int | None = None,
                           plateau_tolerance: float = 0.05, draws: int = 200) -> ConvergenceResult:
    """Masked GD for each κ from the same W0; each κ gets its own mask stream from ``seed``
    (``draws`` masks for the decomposition at the final W)."""
    window = window or max(iterations // 10, 1)
    if iterations < max(early, 2 * window):
        raise ValueError(f"iterations must be at least {max(early, 2 * window)} (got {iterations})")
    streams = np.random.SeedSequence(seed).spawn(len(kappas))
    curves, rows = [], []
    for kappa, stream in zip(kappas, streams):
        rng = np.random.default_rng(stream)
        losses, W = masked_gd(problem, float(kappa), lr, iterations, rng)
        parts = masked_loss_decomposition(W, problem.a, problem.X, problem.y, float(kappa), draws, rng)
        floor, plateaued = floor_of(losses, window, plateau_tolerance)
        curves.append(pd.DataFrame({"kappa": float(kappa), "iteration": np.arange(iterations + 1),
                                    "clean_loss": losses}))
        rows.append({"kappa": float(kappa), "initial_loss": float(losses[0]),
                     "early_rate": early_rate(losses, early), "floor": floor, "plateaued": plateaued,
                     "final_loss": float(losses[-1]), "masked_loss": parts.masked_loss,
                     "smoothed_loss": parts.smoothed_loss, "output_variance": parts.output_variance})
    summary = pd.DataFrame(rows)
    fit = summary[(summary["kappa"] > 0) & summary["plateaued"]]
    slope, intercept = loglog_slope(fit["kappa"].to_numpy(), fit["floor"].to_numpy())
    return ConvergenceResult(pd.concat(curves, ignore_index=True), summary, least_eigenvalue(problem.X),
                             slope, intercept)
