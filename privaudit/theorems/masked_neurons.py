"""Training with randomly masked neurons: dropout, multi-sample dropout, IST (docs/methods.md C).

Liao & Kyrillidis, *On the Convergence of Shallow Neural Network Training with Randomly
Masked Neurons* (TMLR 2022), on the two-layer network of :mod:`privaudit.theorems.twolayer`.
Each global round k:

1. sample masks M ∈ {0, 1}^{p × m} for p subnetworks over the m hidden neurons:
   *Bernoulli(ξ)* per neuron per subnetwork (subnetworks may overlap), or *categorical*
   (each neuron in exactly one subnetwork, drawn uniformly; ξ = 1/p: Independent Subnet
   Training);
2. subnetwork j starts from W_k and runs τ full-batch GD steps on its own masked loss
   ½‖y − f_j(W, X)‖², f_j = (1/√m) Σ_{r: M_jr = 1} a_r ReLU(w_rᵀx) (masked-in neurons only,
   unscaled);
3. per-neuron aggregation: w_r ← w_r + mean of the updates of the subnetworks containing r;
   a neuron no subnetwork contained stays unchanged.

The full network is evaluated with its output scaled by ξ, u_k = ξ f(W_k, X), and the error
is ‖y − u_k‖² (no ½), the quantity of the paper's bound
E‖y − u_k‖² ≤ (1 − ¼ηθτλ₀)^k ‖y − u₀‖² + B, θ = 1 − (1 − ξ)^p.

Special cases: dropout = (p = 1, τ = 1); multi-sample dropout = (p ≥ 1, τ = 1); IST =
(p ≥ 1, τ ≥ 1). Only the masked-in rows of W are gathered for a subnetwork's steps, so a
round costs ξ·p·τ (Bernoulli) or τ (categorical) full-network gradient steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from privaudit.theorems.twolayer import Problem, gradient, least_eigenvalue, predict

MASKS = ("bernoulli", "categorical")


def sample_masks(kind: str, p: int, m: int, xi: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean (p, m): Bernoulli(ξ) entries, or one uniformly drawn subnetwork per neuron."""
    if kind == "bernoulli":
        return rng.random((p, m)) < xi
    if kind == "categorical":
        owner = rng.integers(p, size=m)
        return owner[None, :] == np.arange(p)[:, None]
    raise ValueError(f"masks must be one of {', '.join(MASKS)} (got {kind!r})")


def keep_probability(kind: str, p: int, xi: float) -> float:
    """ξ, the evaluation scale: given for Bernoulli masks, 1/p for categorical ones."""
    return xi if kind == "bernoulli" else 1.0 / p


def masked_round(W: np.ndarray, a: np.ndarray, X: np.ndarray, y: np.ndarray, masks: np.ndarray,
                 local_steps: int, lr: float) -> np.ndarray:
    """One global round from W with the given (p, m) masks; returns the aggregated W."""
    m = len(a)
    total = np.zeros_like(W)
    count = np.zeros(m)
    for mask in masks:
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            continue
        Wj, aj = W[idx], a[idx]
        start = Wj.copy()
        for _ in range(local_steps):
            Wj -= lr * gradient(Wj, aj, X, y, m=m)
        total[idx] += Wj - start
        count[idx] += 1
    touched = count > 0
    out = W.copy()
    out[touched] += total[touched] / count[touched, None]
    return out


def masked_training(problem: Problem, *, kind: str, p: int, local_steps: int, xi: float, lr: float,
                    rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Errors ‖y − ξ f(W_k, X)‖² for k = 0…rounds, shape (rounds + 1,)."""
    if p < 1 or local_steps < 1 or rounds < 1:
        raise ValueError("p, local steps and rounds must be at least 1")
    if kind == "bernoulli" and not 0 < xi <= 1:
        raise ValueError(f"ξ must lie in (0, 1] (got {xi})")
    X, y, a = problem.X, problem.y, problem.a
    scale = keep_probability(kind, p, xi)
    W = problem.W0.copy()
    errors = np.empty(rounds + 1)
    errors[0] = float(np.sum((y - scale * predict(W, a, X)) ** 2))
    for k in range(rounds):
        W = masked_round(W, a, X, y, sample_masks(kind, p, len(a), xi, rng), local_steps, lr)
        errors[k + 1] = float(np.sum((y - scale * predict(W, a, X)) ** 2))
    return errors


def final_error(errors: np.ndarray, window: int) -> float:
    """Mean error over the last ``window`` rounds: the floor, less noisy than one round."""
    return float(errors[-window:].mean())


BERNOULLI_PS = (1, 2, 4, 8)
BERNOULLI_XIS = (0.25, 0.5, 0.75)
CATEGORICAL_PS = (2, 4, 8)
CATEGORICAL_STEPS = (1, 2, 4, 8)
#: The named special cases drawn as loss curves: (label, masks, p, τ, ξ).
SPECIAL_CASES = (("full network (plain GD)", "bernoulli", 1, 1, 1.0),
                 ("dropout (p = 1, τ = 1, ξ = 0.5)", "bernoulli", 1, 1, 0.5),
                 ("multi-sample dropout (p = 4, τ = 1, ξ = 0.5)", "bernoulli", 4, 1, 0.5),
                 ("IST (categorical, p = 4, τ = 4)", "categorical", 4, 4, 0.25))


def cell_rng(seed: int, kind: str, p: int, local_steps: int, xi: float) -> np.random.Generator:
    """The mask stream of one setting: a function of the seed and the setting alone, so a
    cell's numbers do not depend on which other cells the grid holds."""
    return np.random.default_rng([seed, MASKS.index(kind), p, local_steps, round(xi * 1_000_000)])


@dataclass
class MaskedNeuronsResult:
    curves: pd.DataFrame       # setting, masks, p, local_steps, xi, round, error
    bernoulli: pd.DataFrame    # p, xi, final_error (τ = bernoulli_steps)
    categorical: pd.DataFrame  # p, local_steps, final_error (ξ = 1/p)
    lambda0: float


def masked_neurons_experiment(problem: Problem, *, lr: float, rounds: int, seed: int = 0,
                              bernoulli_ps=BERNOULLI_PS, xis=BERNOULLI_XIS, bernoulli_steps: int = 1,
                              categorical_ps=CATEGORICAL_PS, steps=CATEGORICAL_STEPS,
                              special_cases=SPECIAL_CASES, window: int | None = None) -> MaskedNeuronsResult:
    """The loss curves of the special cases and the two heatmaps' final errors.

    The final error of a cell is the mean error over its last ``window`` rounds (default a
    tenth of them)."""
    window = window or max(rounds // 10, 1)

    def run(kind: str, p: int, tau: int, xi: float) -> np.ndarray:
        return masked_training(problem, kind=kind, p=p, local_steps=tau, xi=xi, lr=lr, rounds=rounds,
                               rng=cell_rng(seed, kind, p, tau, xi))

    curves = []
    for label, kind, p, tau, xi in special_cases:
        errors = run(kind, p, tau, xi)
        curves.append(pd.DataFrame({"setting": label, "masks": kind, "p": p, "local_steps": tau, "xi": xi,
                                    "round": np.arange(rounds + 1), "error": errors}))
    bernoulli = pd.DataFrame([{"p": p, "xi": xi, "final_error": final_error(run("bernoulli", p, bernoulli_steps, xi),
                                                                                 window)}
                              for xi in xis for p in bernoulli_ps])
    categorical = pd.DataFrame([{"p": p, "local_steps": tau,
                                 "final_error": final_error(run("categorical", p, tau, 1.0 / p), window)}
                                for tau in steps for p in categorical_ps])
    curves = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
        columns=["setting", "masks", "p", "local_steps", "xi", "round", "error"])
    return MaskedNeuronsResult(curves, bernoulli, categorical,
                               least_eigenvalue(problem.X))
