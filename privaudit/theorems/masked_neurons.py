"""Training with randomly masked neurons: dropout, multi-sample dropout, IST (docs/methods/c-masked-neurons.md C).

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
(p ≥ 1, τ ≥ 1).

Computation. :func:`train_masked` runs all p subnetworks of a round as one batch in torch, in
*pre-activation space*: the state is P = W Xᵀ (m × n), not W. Every gradient row of W is a
combination of the inputs, so a GD step on W is the step P ← P − η D G, G = X Xᵀ (n × n),
D the rows (a_r/√m)(f − y) ⊙ 1{P_r > 0}; the outputs and the error need only P. A round
gathers the (subnetwork, neuron) pairs its masks keep as the rows of one (K × n) tensor,
K = Σ_j |S_j| (about ξ·p·m for Bernoulli masks, m for categorical ones), runs the τ local
steps on it (each subnetwork's outputs are a segment sum over its rows) and scatters the
mean update back per neuron. A masked-out neuron's gradient is zero, so gathering the kept
rows is exact: the same numbers as :func:`masked_round` (the per-subnetwork NumPy reference
in weight space, kept for the tests) up to rounding. A local step costs 2n²K flops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privaudit.theorems.twolayer import Problem, gradient, least_eigenvalue

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
    """One global round from W with the given (p, m) masks; returns the aggregated W.

    The NumPy reference of one round, a subnetwork at a time in weight space (slow; the
    tests check :func:`train_masked` against it)."""
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


class PreactivationNet:
    """A problem in pre-activation space for the batched rounds: G = X Xᵀ (n × n), P₀ = W₀ Xᵀ
    (m × n), y, and c_r = a_r/√m; ``dtype`` torch.float64 (default) or torch.float32."""

    def __init__(self, X: np.ndarray, y: np.ndarray, W0: np.ndarray, a: np.ndarray, dtype=None):
        import torch

        self.dtype = dtype or torch.float64
        X64 = torch.as_tensor(np.asarray(X, dtype=np.float64))
        self.G = (X64 @ X64.T).to(self.dtype).contiguous()
        self.P0 = (torch.as_tensor(np.asarray(W0, dtype=np.float64)) @ X64.T).to(self.dtype).contiguous()
        self.y = torch.as_tensor(np.asarray(y, dtype=np.float64)).to(self.dtype)
        self.c = (torch.as_tensor(np.asarray(a, dtype=np.float64)) / math.sqrt(len(a))).to(self.dtype)
        self.m, self.n = self.P0.shape

    @classmethod
    def from_problem(cls, problem: Problem, dtype=None) -> PreactivationNet:
        return cls(problem.X, problem.y, problem.W0, problem.a, dtype)

    def error(self, P, scale: float) -> float:
        """‖y − scale·f(W, X)‖² of the full network whose pre-activations are P."""
        import torch

        u = scale * (torch.relu(P).T @ self.c)
        return float(((self.y - u) ** 2).sum())


@dataclass
class Trajectory:
    """One run of :func:`train_masked`: ``errors[k]`` = ‖y − ξ f(W_k, X)‖², k = 0…rounds; with
    ``record_local``, ``local[k, t]`` = the mean over round k's non-empty subnetworks of their
    own error ‖y − f_j(W_j, X)‖² before local step t (t = 0: the freshly masked W_k)."""

    errors: np.ndarray
    local: np.ndarray | None = None


def train_masked(net: PreactivationNet, *, kind: str, p: int, local_steps: int, xi: float, lr: float,
                 rounds: int, rng: np.random.Generator, record_local: bool = False) -> Trajectory:
    """The batched rounds (module docstring) on ``net``; masks from ``rng`` by :func:`sample_masks`,
    one draw per round, so the same ``rng`` gives the same masks as the NumPy reference."""
    import torch

    if p < 1 or local_steps < 1 or rounds < 1:
        raise ValueError("p, local steps and rounds must be at least 1")
    if kind == "bernoulli" and not 0 < xi <= 1:
        raise ValueError(f"ξ must lie in (0, 1] (got {xi})")
    scale = keep_probability(kind, p, xi)
    m, n, G, y, c = net.m, net.n, net.G, net.y, net.c
    P = net.P0.clone()
    errors = np.empty(rounds + 1)
    local = np.full((rounds, local_steps), np.nan) if record_local else None
    errors[0] = net.error(P, scale)
    for k in range(rounds):
        masks = sample_masks(kind, p, m, xi, rng)
        sub, neuron = np.nonzero(masks)  # row-major: the rows of one subnetwork are contiguous
        if neuron.size == 0:
            errors[k + 1] = errors[k]
            continue
        idx = torch.from_numpy(neuron)
        owner = torch.from_numpy(sub)
        ck = c.index_select(0, idx)[:, None]
        step = ck * lr
        start = P.index_select(0, idx)
        L = start.clone()
        nonempty = torch.from_numpy(masks.any(axis=1))
        for t in range(local_steps):
            act = torch.relu(L)
            on = torch.sign(act)  # 1{L > 0}, exactly; faster than a bool mask or torch.where (docs/performance.md)
            out = torch.zeros(p, n, dtype=P.dtype).index_add_(0, owner, act.mul_(ck))
            resid = out - y
            if local is not None:
                local[k, t] = float((resid[nonempty] ** 2).sum(dim=1).mean())
            L.addmm_(resid.index_select(0, owner).mul_(step).mul_(on), G, alpha=-1.0)
        if kind == "categorical":  # every neuron in exactly one subnetwork: its update is its own
            P.index_copy_(0, idx, L)
        else:
            # each kept row's update divided by its neuron's count, summed into P: the mean update
            share = 1.0 / torch.from_numpy(masks.sum(axis=0)).to(P.dtype).index_select(0, idx)
            P.index_add_(0, idx, L.sub_(start).mul_(share[:, None]))
        errors[k + 1] = net.error(P, scale)
    return Trajectory(errors, local)


def masked_training(problem: Problem, *, kind: str, p: int, local_steps: int, xi: float, lr: float,
                    rounds: int, rng: np.random.Generator, dtype=None) -> np.ndarray:
    """Errors ‖y − ξ f(W_k, X)‖² for k = 0…rounds, shape (rounds + 1,) (batched, float64 by default)."""
    return train_masked(PreactivationNet.from_problem(problem, dtype), kind=kind, p=p, local_steps=local_steps,
                        xi=xi, lr=lr, rounds=rounds, rng=rng).errors


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
                              special_cases=SPECIAL_CASES, window: int | None = None,
                              dtype=None) -> MaskedNeuronsResult:
    """The loss curves of the special cases and the two heatmaps' final errors.

    The final error of a cell is the mean error over its last ``window`` rounds (default a
    tenth of them). ``dtype``: torch.float32 by default (relative differences from float64
    about 1e-5, at a third of the time)."""
    import torch

    window = window or max(rounds // 10, 1)
    net = PreactivationNet.from_problem(problem, dtype or torch.float32)

    def run(kind: str, p: int, tau: int, xi: float) -> np.ndarray:
        return train_masked(net, kind=kind, p=p, local_steps=tau, xi=xi, lr=lr, rounds=rounds,
                            rng=cell_rng(seed, kind, p, tau, xi)).errors

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
