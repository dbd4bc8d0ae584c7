"""The methods of the hidden-state paper's Table 1 and Figure 3, each trained at one ε
(docs/methods/b-hidden-state.md B.4).

Romijnders & Koskela (arXiv 2407.04884) compare, at ε = 1.33 and 4.76 (δ = 1e-5, replace-one
adjacency):

* ``noisycgd-convex``: NoisyCGD on the convex approximation (:func:`train_noisycgd`), ε from
  the hidden-state bound (:func:`privaudit.analysis.hidden_state.noisycgd_epsilon`);
* ``dpsgd-convex``: DP-SGD on the same model with λ = 0 (:func:`train_convex_dpsgd`);
* ``dpsgd-relu``: DP-SGD on a two-layer ReLU network; ``dpsgd-logistic`` (Figure 3): DP-SGD on
  multinomial logistic regression. Both through privaudit's DP-SGD engine
  (:class:`privaudit.training.dp_engine.GhostDPSGD`), plain SGD, Poisson batches;
* ``ssp-convex``, ``ssp-relu``, ``ssp-fourier``: sufficient-statistics perturbation on three
  data-independent feature maps (:func:`ssp_fit`).

Every DP-SGD method is accounted as the paper does (Opacus's add/remove accountant at noise
multiplier σ/2, Poisson rate b/n, E/q steps) and its σ calibrated to the target ε on the data
actually used; the exact replace-one ε (dp_accounting's PLD) is recorded beside it. Inputs
are centred on the training mean and scaled to unit norm (:func:`prepare`), so that C = 1
clips on the data's own scale and the smoothness the hidden-state bound assumes can be checked
(:func:`convex_smoothness`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from privaudit.analysis.accounting import (
    calibrate_noise_multiplier,
    replace_one_epsilon,
    replace_one_epsilon_sigma_half,
)
from privaudit.analysis.gdp import gdp_mu_for_epsilon
from privaudit.analysis.hidden_state import noisycgd_epsilon, noisycgd_noise_for_epsilon
from privaudit.models.convex_relu import ConvexReLU, logits_and_gates
from privaudit.training.dp_engine import GaussianNoise, GhostDPSGD, dp_compute_threads
from privaudit.training.loop import poisson, run_epochs
from privaudit.training.noisycgd import train_convex_dpsgd, train_noisycgd

METHODS = ("noisycgd-convex", "dpsgd-convex", "dpsgd-relu", "ssp-convex", "ssp-relu", "ssp-fourier",
           "dpsgd-logistic")
METHOD_NAMES = {"noisycgd-convex": "NoisyCGD + convex approximation",
                "dpsgd-convex": "DP-SGD + convex approximation (λ = 0)",
                "dpsgd-relu": "DP-SGD + two-layer ReLU network",
                "ssp-convex": "SSP, convex-approximation features",
                "ssp-relu": "SSP, random ReLU features",
                "ssp-fourier": "SSP, random Fourier features",
                "dpsgd-logistic": "DP-SGD + logistic regression"}
ITERATIVE = ("noisycgd-convex", "dpsgd-convex", "dpsgd-relu", "dpsgd-logistic")


@dataclass(frozen=True)
class Recipe:
    """How every method is trained in one reproduction (docs/methods/b-hidden-state.md B.4)."""

    epochs: int
    batch: int
    gates: int            # P, the convex approximation's gate vectors
    width: int            # the ReLU network's hidden units
    features: int         # D, the SSP feature maps' dimension
    lr_convex: float      # η of NoisyCGD and of DP-SGD on the convex approximation
    eta_lambda: float     # ηλ of NoisyCGD (λ = eta_lambda / lr_convex)
    lr_relu: float
    lr_logistic: float
    clip: float = 1.0
    delta: float = 1e-5
    eval_every: int = 10  # Figure 3: the test accuracy and the ε spent every this many epochs

    @property
    def l2(self) -> float:
        return self.eta_lambda / self.lr_convex


@dataclass
class Trained:
    """One method trained once: its test accuracy, the noise it used and the ε it reached, the
    curve of Figure 3 and (for the audit) the logits of the samples it was asked about."""

    method: str
    test_accuracy: float
    train_accuracy: float
    sigma: float                # the noise multiplier used (NoisyCGD: of its σC/b noise)
    epsilon: float              # the accountant's ε at δ (hidden-state for NoisyCGD)
    epsilon_exact: float        # DP-SGD: the exact replace-one ε (PLD); NoisyCGD: = epsilon
    accountant: str
    curve: list[dict] = field(default_factory=list)   # epoch, epsilon, test_accuracy
    logits: np.ndarray | None = None                   # (n_query, C) of ``query``
    seconds: float = 0.0


def prepare(x_train: np.ndarray, *others: np.ndarray) -> list[torch.Tensor]:
    """Flatten, scale pixels to [0, 1], subtract the training set's mean image and scale every
    row to unit norm (the same map for every array)."""
    flat = [np.asarray(a, np.float32).reshape(len(a), -1) / 255.0 for a in (x_train, *others)]
    mean = flat[0].mean(0, keepdims=True)
    out = []
    for a in flat:
        a = a - mean
        a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        out.append(torch.from_numpy(np.ascontiguousarray(a)))
    return out


def convex_smoothness(x: torch.Tensor, u: torch.Tensor) -> float:
    """An upper bound on the smoothness β of every per-sample loss of the convex approximation
    (softmax cross-entropy, whose Hessian in the logits is at most ½ I): ½‖x_j‖² Σ_i g_ji,
    maximised over the samples. The contraction c = 1 − ηλ of the hidden-state bound needs
    η ≤ 2/(β + λ)."""
    worst = 0.0
    for rows in torch.split(x, 4096):  # raw CIFAR-10 in float64 would take 1.2 GB at once
        gates = (rows.to(u.dtype) @ u.t() >= 0).sum(1).to(torch.float64)
        worst = max(worst, float((0.5 * rows.to(torch.float64).pow(2).sum(1) * gates).max()))
    return worst


def _accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(1) == y).double().mean())


@functools.lru_cache(maxsize=64)  # a bisection over accountants (seconds): once per setting
def dpsgd_sigma(target_epsilon: float, n: int, batch: int, epochs: int, delta: float) -> tuple[float, float, str]:
    """σ of a DP-SGD run of ``epochs`` epochs at Poisson rate b/n whose ε, accounted as the
    paper does (add/remove at σ/2), is the target; returns (σ, exact replace-one ε, its
    accountant)."""
    q = batch / n
    steps = epochs * max(int(round(1 / q)), 1)
    half, _ = calibrate_noise_multiplier(target_epsilon, delta, q, steps)
    sigma = 2.0 * half
    exact, name = replace_one_epsilon(sigma, q, steps, delta)
    return sigma, exact, name


def _dpsgd_epsilon_after(sigma: float, q: float, epochs: int, delta: float) -> float:
    return replace_one_epsilon_sigma_half(sigma, q, epochs * max(int(round(1 / q)), 1), delta)[0]


def train_method(method: str, x: torch.Tensor, y: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor,
                 recipe: Recipe, target_epsilon: float, seed: int, *, num_classes: int,
                 query: torch.Tensor | None = None, curve: bool = False,
                 on_epoch: Callable[[int, int, float], None] | None = None) -> Trained:
    """Train ``method`` on (x, y) (prepared, flattened) at ``target_epsilon`` (∞: the same
    recipe without noise, the convex methods only); evaluate on the test set; with ``curve`` record Figure 3's points
    every ``recipe.eval_every`` epochs; with ``query`` keep its logits (the audit's samples)."""
    import time

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    n, d = x.shape
    if method.startswith("ssp-"):
        out = _ssp(method, x, y, x_test, y_test, recipe, target_epsilon, seed, num_classes, query)
    else:
        out = _iterative(method, x, y, x_test, y_test, recipe, target_epsilon, seed, g, num_classes, query, curve,
                         on_epoch)
    out.seconds = time.perf_counter() - t0
    return out


def _iterative(method, x, y, x_test, y_test, r: Recipe, target_epsilon, seed, g, num_classes, query, curve,
               on_epoch) -> Trained:
    if method in ("noisycgd-convex", "dpsgd-convex"):
        return _convex(method, x, y, x_test, y_test, r, target_epsilon, seed, g, num_classes, query, curve, on_epoch)
    return _dense(method, x, y, x_test, y_test, r, target_epsilon, seed, g, num_classes, query, curve, on_epoch)


def _convex(method, x, y, x_test, y_test, r: Recipe, target_epsilon, seed, g, num_classes, query, curve,
            on_epoch) -> Trained:
    """NoisyCGD or DP-SGD (λ = 0) on the convex approximation, its P gate vectors drawn from
    ``g``; ∞ trains without noise (the audit's non-private control)."""
    n, d = x.shape
    points: list[dict] = []
    model = ConvexReLU(d, num_classes, r.gates)
    with torch.no_grad():
        model.u.copy_(torch.randn(r.gates, d, generator=g))

    def predict(a: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        if w is None:
            return model(a)
        return logits_and_gates(a, w, model.u, num_classes)[0]

    sigma, eps, exact, accountant, spent = _convex_privacy(method, target_epsilon, n, r)

    def seen(epoch: int, w: torch.Tensor) -> None:
        if curve and (epoch % r.eval_every == 0 or epoch == r.epochs):
            points.append({"epoch": epoch, "epsilon": spent(epoch),
                           "test_accuracy": _accuracy(predict(x_test, w), y_test)})

    common = dict(noise_multiplier=sigma, max_grad_norm=r.clip, epochs=r.epochs, lr=r.lr_convex, generator=g,
                  noise_seed=seed + 1, on_epoch=on_epoch, on_iterate=seen)
    with torch.no_grad():
        if method == "noisycgd-convex":
            train_noisycgd(model, x, y, batch_size=r.batch, l2=r.l2, **common)
        else:
            train_convex_dpsgd(model, x, y, sample_rate=r.batch / n, l2=0.0, **common)
    with torch.no_grad():
        final = lambda a: predict(a)  # noqa: E731
        out = _trained(method, final, x, y, x_test, y_test, sigma, eps, exact, accountant, points, query)
    return out


def _convex_privacy(method: str, target_epsilon: float, n: int, r: Recipe
                    ) -> tuple[float, float, float, str, Callable[[int], float]]:
    """The noise of a convex-approximation method at ``target_epsilon`` on ``n`` samples:
    (σ, its accountant's ε, the exact replace-one ε, the accountant's name, the ε spent after
    e epochs). NoisyCGD: the hidden-state bound, σ of its σC/b noise; DP-SGD: σ calibrated
    as the paper accounts it (:func:`dpsgd_sigma`); ∞: no noise."""
    if not math.isfinite(target_epsilon):  # the audit's non-private control: clipping, no noise
        def never(e: int) -> float:
            return math.inf

        return 0.0, math.inf, math.inf, "none (no noise)", never
    if method == "noisycgd-convex":
        privacy = noisycgd_noise_for_epsilon(target_epsilon, n, r.batch, r.epochs, r.lr_convex, r.l2, r.delta)
        sigma = privacy.noise_multiplier

        def hidden_state(e: int) -> float:
            return noisycgd_epsilon(sigma, n, r.batch, e, r.lr_convex, r.l2, r.delta).epsilon

        return sigma, privacy.epsilon, privacy.epsilon, "hidden-state GDP (shifted interpolation)", hidden_state
    sigma, exact, accountant = dpsgd_sigma(target_epsilon, n, r.batch, r.epochs, r.delta)

    def dpsgd(e: int) -> float:
        return _dpsgd_epsilon_after(sigma, r.batch / n, e, r.delta)

    return sigma, _dpsgd_epsilon_after(sigma, r.batch / n, r.epochs, r.delta), exact, accountant, dpsgd


def _dense(method, x, y, x_test, y_test, r: Recipe, target_epsilon, seed, g, num_classes, query, curve,
           on_epoch) -> Trained:
    """DP-SGD on a dense stack (``dpsgd-relu``: the two-layer ReLU network; ``dpsgd-logistic``:
    logistic regression) through privaudit's engine, Poisson batches at rate b/n."""
    n, d = x.shape
    points: list[dict] = []
    layers = ([nn.Linear(d, r.width), nn.ReLU(), nn.Linear(r.width, num_classes)] if method == "dpsgd-relu"
              else [nn.Linear(d, num_classes)])
    net = nn.Sequential(*layers)
    lr = r.lr_relu if method == "dpsgd-relu" else r.lr_logistic
    q = r.batch / n
    sigma, exact, accountant = dpsgd_sigma(target_epsilon, n, r.batch, r.epochs, r.delta)
    eps = _dpsgd_epsilon_after(sigma, q, r.epochs, r.delta)
    noise = GaussianNoise(seed + 1, x.device)
    engine = GhostDPSGD(net, r.clip, sigma, max(int(n * q), 1), noise)
    opt = torch.optim.SGD(net.parameters(), lr=lr)

    def step(batch, epoch):
        opt.zero_grad(set_to_none=True)
        losses = engine.compute_grads(batch.x, batch.y, batch.size)
        opt.step()
        return losses.sum(), batch.size

    def after(epoch: int, total: int, loss: float) -> None:
        if on_epoch is not None:
            on_epoch(epoch, total, loss)
        if curve and (epoch % r.eval_every == 0 or epoch == r.epochs):
            with torch.no_grad():
                points.append({"epoch": epoch, "epsilon": _dpsgd_epsilon_after(sigma, q, epoch, r.delta),
                               "test_accuracy": _accuracy(net(x_test), y_test)})

    try:
        with dp_compute_threads(x.device, net):
            run_epochs(r.epochs, poisson(x, y, q, max(int(round(1 / q)), 1), g, GhostDPSGD.padded_size), step,
                       on_epoch=after)
    finally:
        noise.close()
    with torch.no_grad():
        return _trained(method, net, x, y, x_test, y_test, sigma, eps, exact, accountant, points, query)


def _trained(method, predict, x, y, x_test, y_test, sigma, eps, exact, accountant, points, query) -> Trained:
    return Trained(method, _accuracy(predict(x_test), y_test), _accuracy(predict(x), y), float(sigma), float(eps),
                   float(exact), accountant, points,
                   None if query is None else predict(query).numpy().astype(np.float32))


# ------------------------------------------------------------------------------- SSP

def feature_map(kind: str, d: int, features: int, seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A data-independent feature map of unit-norm inputs to ``features`` dimensions, rows
    scaled to unit norm (docs/methods/b-hidden-state.md B.4):

    * ``relu``: ReLU(Ux), U (D × d) standard normal;
    * ``fourier``: cos(Ux + b), U standard normal, b uniform on [0, 2π) (an RBF kernel of
      bandwidth 1 on the unit sphere);
    * ``convex``: the convex approximation's gated copies 1[u_iᵀx ≥ 0]·(Rx) for P' = 8 gates
      of a random projection R of x to D/8 dimensions (the full P·d map has 307,200 dimensions
      on CIFAR-10, too many for a D × D statistic).
    """
    g = torch.Generator().manual_seed(seed)
    if kind == "convex":
        gates = 8
        proj = torch.randn(features // gates, d, generator=g) / math.sqrt(d)
        u = torch.randn(gates, d, generator=g)

        def phi(x: torch.Tensor) -> torch.Tensor:
            z = x @ proj.t()
            on = (x @ u.t() >= 0).to(x.dtype)
            return _unit((on[:, :, None] * z[:, None, :]).reshape(len(x), -1))
        return phi
    w = torch.randn(features, d, generator=g)
    if kind == "relu":
        return lambda x: _unit(torch.relu(x @ w.t()))
    b = torch.rand(features, generator=g) * 2 * math.pi
    return lambda x: _unit(torch.cos(x @ w.t() + b))


def _unit(z: torch.Tensor) -> torch.Tensor:
    return z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)


def ssp_fit(phi: torch.Tensor, y: torch.Tensor, num_classes: int, epsilon: float, delta: float,
            generator: torch.Generator) -> tuple[torch.Tensor, float]:
    """Sufficient-statistics perturbation: release ΦᵀΦ + N₁ and ΦᵀY + N₂ (Y one-hot, rows of Φ
    of unit norm) and solve the ridge system; returns the weights (D, C) and μ.

    Replacing one sample moves ΦᵀΦ by xxᵀ − x'x'ᵀ, of Frobenius norm at most √2, and ΦᵀY by at
    most 2; the two Gaussian releases share the budget equally, μ₁ = μ₂ = μ/√2 with μ the GDP
    μ of (ε, δ), so N₁ (symmetric, its upper triangle drawn) has std 2/μ and N₂ std 2√2/μ.
    The ridge term is the noise's expected spectral norm, 2·std₁·√D, which keeps the
    perturbed matrix positive definite with high probability."""
    mu = gdp_mu_for_epsilon(epsilon, delta)
    d = phi.shape[1]
    s1, s2 = 2.0 / mu, 2.0 * math.sqrt(2.0) / mu
    phi64 = phi.to(torch.float64)
    a = phi64.t() @ phi64
    noise = torch.randn(d, d, generator=generator, dtype=torch.float64) * s1
    upper = torch.triu(noise)
    a = a + upper + torch.triu(noise, 1).t()
    onehot = torch.nn.functional.one_hot(y, num_classes).to(torch.float64)
    b = phi64.t() @ onehot + torch.randn(d, num_classes, generator=generator, dtype=torch.float64) * s2
    ridge = 2.0 * s1 * math.sqrt(d)
    evals, evecs = torch.linalg.eigh(a)
    inv = evecs @ torch.diag(1.0 / (evals.clamp_min(0.0) + ridge)) @ evecs.t()
    return (inv @ b).to(torch.float32), mu


def _ssp(method, x, y, x_test, y_test, r: Recipe, target_epsilon, seed, num_classes, query) -> Trained:
    phi = feature_map(method.removeprefix("ssp-"), x.shape[1], r.features, seed)
    w, _ = ssp_fit(phi(x), y, num_classes, target_epsilon, r.delta, torch.Generator().manual_seed(seed + 1))
    return _trained(method, lambda a: phi(a) @ w, x, y, x_test, y_test, math.nan, target_epsilon, target_epsilon,
                    "Gaussian mechanism (GDP), two releases", [], query)
