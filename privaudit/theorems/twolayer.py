"""The two-layer ReLU network of the papers' theory (docs/methods/a-mg-noise.md A.2 and
docs/methods/c-masked-neurons.md C).

    f(W, x) = (1/√m) Σ_r a_r ReLU(w_rᵀx),   a_r ∈ {±1} fixed, only W (m × d) trained,

squared loss L(W) = ½ Σ_i (f(W, x_i) − y_i)² over the n samples, inputs on the unit sphere
(‖x_i‖ = 1, the NTK setting). Shapes: X (n, d), y (n,), W (m, d), a (m,).

Everything here is float64 NumPy and takes an explicit ``numpy.random.Generator``.

Data. The papers do not state how Figure 3's data are generated. Inputs are Gaussian
vectors normalised to unit norm. Labels come, by default, from a random *teacher* network
of the same form (width 50, standardised to mean 0 and variance 1): a target that gradient
descent can fit within the figure's 2,000 iterations at lr 0.005. With independent Gaussian
or ±1 labels (``labels="gaussian" | "sign"``) the residual spreads over the Gram matrix's
smallest eigen-directions, plain GD is still far from its floor after 2,000 iterations, and
the κ ≤ 0.4 curves lie on top of κ = 0; both label choices stay available.

The masked loss and its decomposition (docs/methods/a-mg-noise.md A.2). With a fresh mask c ~ N(1, κ² I) on
each input, wᵀ(x ⊙ c) ~ N(z, s²), z = wᵀx, s = κ‖w ⊙ x‖, so

    E_c ½(f(W, x ⊙ c) − y)² = ½(f̄(W, x) − y)² + ½ Var_c f(W, x ⊙ c),

where f̄ = E_c f is the smoothed network (each ReLU replaced by z·Φ(z/s) + s·φ(z/s)) and the
output variance is the data-dependent regulariser. To first order in κ,
Var_c f(W, x ⊙ c) ≈ κ² Σ_k (x_k ∂f/∂x_k)², with ∂f/∂x = (1/√m) Σ_r a_r 1{w_rᵀx > 0} w_r.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privaudit.core.defaults import THEORY_LABELS
from privaudit.theorems.smoothing import expected_relu

LABELS = THEORY_LABELS
TEACHER_WIDTH = 50


@dataclass
class Problem:
    """A regression problem and the network's initial state."""

    X: np.ndarray   # (n, d), unit-norm rows
    y: np.ndarray   # (n,)
    W0: np.ndarray  # (m, d), w_r ~ N(0, init_scale² I)
    a: np.ndarray   # (m,), ±1, fixed

    @property
    def width(self) -> int:
        return self.W0.shape[0]


def sphere_inputs(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """n Gaussian vectors in R^d normalised to unit norm (uniform on the sphere)."""
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def make_labels(X: np.ndarray, labels: str, rng: np.random.Generator) -> np.ndarray:
    """Targets for X: a standardised random teacher network, or i.i.d. Gaussian or ±1."""
    n: int
    d: int
    n, d = X.shape
    if labels == "teacher":
        Wt = rng.standard_normal((TEACHER_WIDTH, d))
        at = rng.choice([-1.0, 1.0], TEACHER_WIDTH)
        y = np.maximum(X @ Wt.T, 0.0) @ at
        standardised: np.ndarray = (y - y.mean()) / y.std()
        return standardised
    if labels == "gaussian":
        return rng.standard_normal(n)
    if labels == "sign":
        return rng.choice([-1.0, 1.0], n)
    raise ValueError(f"labels must be one of {', '.join(LABELS)} (got {labels!r})")


def make_problem(n: int, d: int, m: int, *, labels: str = "teacher", init_scale: float = 1.0,
                 seed: int = 0) -> Problem:
    """Data, labels, W0 ~ N(0, init_scale²) and a ~ ±1, all from one seed."""
    rng = np.random.default_rng(seed)
    X = sphere_inputs(n, d, rng)
    y = make_labels(X, labels, rng)
    W0 = init_scale * rng.standard_normal((m, d))
    a = rng.choice([-1.0, 1.0], m)
    return Problem(X, y, W0, a)


def predict(W: np.ndarray, a: np.ndarray, X: np.ndarray, m: int | None = None) -> np.ndarray:
    """f(W, X) = ReLU(X Wᵀ) a / √m, shape (n,). ``m`` is the width in the 1/√m scaling
    (defaults to len(a); a subnetwork passes the full network's width)."""
    return np.maximum(X @ W.T, 0.0) @ a / math.sqrt(len(a) if m is None else m)


def gradient(W: np.ndarray, a: np.ndarray, X: np.ndarray, y: np.ndarray,
             m: int | None = None) -> np.ndarray:
    """∇_W ½‖f(W, X) − y‖², shape (m, d): row r is (a_r/√m) Σ_i (f_i − y_i) 1{w_rᵀx_i > 0} x_i."""
    scale = 1.0 / math.sqrt(len(a) if m is None else m)
    pre = X @ W.T
    residual = np.maximum(pre, 0.0) @ a * scale - y
    return ((pre > 0) * (residual[:, None] * (a * scale)[None, :])).T @ X


def clean_loss(W: np.ndarray, a: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """½‖f(W, X) − y‖² on unmasked inputs."""
    r = predict(W, a, X) - y
    return 0.5 * float(r @ r)


def mask_inputs(X: np.ndarray, kappa: float, rng: np.random.Generator) -> np.ndarray:
    """X ⊙ C with C ~ N(1, κ²) elementwise, fresh per call (X itself when κ = 0; no draw)."""
    if kappa == 0:
        return X
    return X * (1.0 + kappa * rng.standard_normal(X.shape))


def ntk_gram(X: np.ndarray) -> np.ndarray:
    """H∞_ij = E_w[x_iᵀx_j 1{wᵀx_i ≥ 0, wᵀx_j ≥ 0}] = x_iᵀx_j (π − arccos x_iᵀx_j) / (2π), w ~ N(0, I).

    Du et al. (2019)'s Gram matrix for unit-norm inputs; shape (n, n)."""
    G = np.clip(X @ X.T, -1.0, 1.0)
    return G * (math.pi - np.arccos(G)) / (2 * math.pi)


def least_eigenvalue(X: np.ndarray) -> float:
    """λ₀ = λ_min(H∞), the constant in the linear rate (1 − ηλ₀/2)^k of the theorems."""
    return float(np.linalg.eigvalsh(ntk_gram(X))[0])


def smoothed_predict(W: np.ndarray, a: np.ndarray, X: np.ndarray, kappa: float) -> np.ndarray:
    """f̄(W, x) = E_c f(W, x ⊙ c) = (1/√m) Σ_r a_r [z Φ(z/s) + s φ(z/s)], z = w_rᵀx, s = κ‖w_r ⊙ x‖.

    Shape (n,); memory O(n·m)."""
    z = X @ W.T
    s = kappa * np.sqrt((X * X) @ (W * W).T)  # ‖w_r ⊙ x_i‖² = Σ_k x_ik² w_rk²
    return expected_relu(z, s) @ a / math.sqrt(len(a))


def output_variance_first_order(W: np.ndarray, a: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Var_c f(W, x ⊙ c) / κ² as κ → 0: Σ_k (x_k ∂f/∂x_k)², shape (n,)."""
    grad_x = ((X @ W.T > 0) * a[None, :]) @ W / math.sqrt(len(a))  # (n, d)
    return ((X * grad_x) ** 2).sum(axis=1)


@dataclass
class LossDecomposition:
    """The masked loss and its two parts, summed over samples."""

    masked_loss: float       # Monte Carlo E_c ½‖f(W, X ⊙ c) − y‖²
    masked_loss_se: float    # its standard error
    smoothed_loss: float     # ½‖f̄(W, X) − y‖², closed form
    output_variance: float   # ½ Σ_i Var_c f(W, x_i ⊙ c), Monte Carlo
    first_order: float       # ½ κ² Σ_i Σ_k (x_ik ∂f/∂x_k)², closed form, small-κ limit


def masked_loss_decomposition(W: np.ndarray, a: np.ndarray, X: np.ndarray, y: np.ndarray,
                              kappa: float, draws: int, rng: np.random.Generator) -> LossDecomposition:
    """Check E_c[masked loss] = smoothed-network loss + output variance by simulation.

    The masked loss and the output variance are Monte Carlo estimates over ``draws`` masks
    of the whole data set; the smoothed loss uses the closed form, so the identity is a real
    check of f̄ (an error in the closed form would show up as a gap)."""
    if kappa == 0:  # no mask: the masked loss is the clean loss, without sampling error
        r = predict(W, a, X) - y
        loss = 0.5 * float(r @ r)
        return LossDecomposition(loss, 0.0, loss, 0.0, 0.0)
    outputs = np.empty((draws, len(y)))
    for t in range(draws):
        outputs[t] = predict(W, a, mask_inputs(X, kappa, rng))
    per_draw = 0.5 * ((outputs - y[None, :]) ** 2).sum(axis=1)
    variance = 0.5 * float(outputs.var(axis=0, ddof=1).sum())
    smoothed = smoothed_predict(W, a, X, kappa) - y
    return LossDecomposition(
        masked_loss=float(per_draw.mean()), masked_loss_se=float(per_draw.std(ddof=1) / math.sqrt(draws)),
        smoothed_loss=0.5 * float(smoothed @ smoothed), output_variance=variance,
        first_order=0.5 * kappa ** 2 * float(output_variance_first_order(W, a, X).sum()))
