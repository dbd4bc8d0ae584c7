"""HAMP, knob γ: train on high-entropy soft labels with an entropy regulariser, and release
low-confidence scores that keep the predicted label (Chen and Pattabiraman, *Overconfidence
is a Dangerous Thing: Mitigating Membership Inference Attacks by Enforcing Less Confident
Prediction*, NDSS 2024, arXiv 2307.01610; the authors' code is
github.com/DependableSystemsLab/MIA_defense_HAMP, ``*/cifar-train-hamp.py`` for training and
``*/lira-inference-defense.py`` for the output modification).

**Training** (its step terms, :mod:`privaudit.defences.terms`). Every member's target is a soft label whose entropy is
the fraction γ of the largest entropy log K (K classes): the true class gets the probability p(γ), every
other class (1 − p(γ))/(K − 1), where p(γ) ∈ [1/K, 1) solves

    H(p) = −p·log p − (1 − p)·log((1 − p)/(K − 1)) = γ·log K

(:func:`true_class_probability`, by bisection: H falls strictly from log K at p = 1/K to 0
at p = 1, and has no closed-form inverse). The authors' code steps p down from 1 by 0.01
until the entropy reaches the threshold, which lands up to 0.01 below the exact root; this
module uses the exact root. The loss is the KL divergence from the soft label minus an
entropy bonus on the model's own prediction,

    ℓ = KL(t ‖ softmax(z)) − λ·H(softmax(z)),

the paper's training objective. The authors' code computes the KL term with PyTorch's
``kl_div(reduction="mean")``, which averages over samples *and* classes (KL/K per sample),
with their α = 0.001 for CIFAR-10 (γ = 0.95); this module descends K times that objective,
KL − λ·H with λ = K·:data:`ENTROPY_WEIGHT` (Adam, the trainer's optimiser, is invariant to
scaling the objective up to its ε, so the steps are the authors'). The objective is computed
as CE(z, t) − λ·H, which differs from KL − λ·H by the constant H(t) (same gradient). The
reported loss is the cross-entropy against the soft labels, as for label smoothing.

**Release** (test time). The paper replaces the scores of every query by the model's scores
on a random input (uniform noise images in the authors' code, a fresh draw per query),
re-ordered so that the score ranked r-th in the query's output receives the r-th largest of
the random input's scores: the predicted label, and the whole ranking, are kept (no accuracy
is lost), the confidence is not. HAMP is both training-side and output-side: its ``side`` is
``training`` (the model is trained with its step terms, one model per γ), and it overrides
:meth:`Defence.release`, so :attr:`Defence.transforms_output` is true and the workspace
passes every query of a saved HAMP model through :meth:`Hamp.release`.

``release`` sees the logits and γ, not the model, and must be deterministic, so the random
input's scores are replaced by a fixed reference vector (:func:`reference_log_scores`): the
geometric profile r_k ∝ exp(−β·k), k = 0 … K − 1, with β > 0 solved so that its entropy is
γ·log K, the entropy the model was trained towards. Why this choice: the authors' random
scores depend on the query only through its ranking (a fresh random input, independent of the
query and of membership), so their release carries exactly the information of the ranking
plus independent noise; a fixed vector re-ordered by the same ranking carries the same
information, with no randomness, no seed and no dependence on the batch; its entries are
distinct (strictly decreasing), so the full ranking survives as in the paper; and its
entropy is the one HAMP asks of every member's prediction, i.e. a low-confidence output of
the strength the knob sets. The released logits are the exact log-scores log r (softmax of
the released logits is r, re-ordered); ties in a query's logits are ranked by index (the
first of equal logits ranks first, as ``argmax`` picks it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob, entropy_of, knobs

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

#: the entropy regulariser's weight per class, the authors' α for CIFAR-10 under their
#: ``kl_div(reduction="mean")`` normalisation (module docstring): λ = K·ENTROPY_WEIGHT
ENTROPY_WEIGHT = 0.001


def label_entropy(p: float, num_classes: int) -> float:
    """H of the soft label with p on the true class and (1 − p)/(K − 1) on each other, in nats."""
    k = num_classes
    h = -p * math.log(p) if p > 0 else 0.0
    rest = 1.0 - p
    if rest > 0 and k > 1:
        h -= rest * math.log(rest / (k - 1))
    return h


def true_class_probability(gamma: float, num_classes: int) -> float:
    """The true-class probability p(γ) ∈ [1/K, 1] of the soft label whose entropy is γ·log K
    (bisection to double precision; γ ∈ [0, 1])."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1] (got {gamma})")
    k = num_classes
    if k < 2:
        return 1.0
    target = gamma * math.log(k)
    lo, hi = 1.0 / k, 1.0                       # H(lo) = log K ≥ target ≥ 0 = H(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if label_entropy(mid, k) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def soft_labels(y: torch.Tensor, num_classes: int, gamma: float) -> torch.Tensor:
    """The members' soft labels (N, K), float64: :meth:`Hamp.soft_targets` of one model."""
    import torch.nn.functional as F

    return DEFENCE.soft_targets(F.one_hot(y, num_classes).double()[None], (gamma,))[0]


def _geometric(beta: float, k: int) -> tuple[list[float], float]:
    """(log r_j for j < k, entropy) of r_j ∝ exp(−β·j)."""
    log_z = math.log(math.fsum(math.exp(-beta * j) for j in range(k)))
    logs = [-beta * j - log_z for j in range(k)]
    h = -math.fsum(math.exp(lr) * lr for lr in logs)
    return logs, h


def reference_log_scores(gamma: float, num_classes: int) -> list[float]:
    """log r_k, k = 0 … K − 1, of the release's reference scores: r_k ∝ exp(−β·k), strictly
    decreasing, with β solved (bisection) so that the entropy of r is γ·log K."""
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma must be in (0, 1) (got {gamma})")
    k = num_classes
    if k < 2:
        return [0.0]
    target = gamma * math.log(k)
    lo, hi = 0.0, 1.0
    while _geometric(hi, k)[1] > target:         # entropy falls with β, from log K to 0
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _geometric(mid, k)[1] > target:
            lo = mid
        else:
            hi = mid
    return _geometric(hi, k)[0]


class Hamp(Defence):
    name = "hamp"
    tag = "hamp"
    title = "HAMP"
    knob = Knob("gamma", "γ", 0.0, 0.99, grid=(0.5, 0.8, 0.95), low_open=True)
    paper = ("Chen and Pattabiraman, Overconfidence is a Dangerous Thing: Mitigating Membership Inference "
             "Attacks by Enforcing Less Confident Prediction (NDSS 2024, arXiv 2307.01610)")
    formula = ("train on soft labels of entropy γ·log K with ℓ = KL(t ‖ p) − λ·H(p); release a fixed "
               "low-confidence score vector re-ordered by the model's ranking")
    soft_labels = True

    def soft_targets(self, t: torch.Tensor, values: tuple[float, ...]) -> torch.Tensor:
        """p(γ) on the true class, (1 − p(γ))/(K − 1) elsewhere, per model."""
        k = t.shape[-1]
        p = knobs(tuple(true_class_probability(g, k) for g in values), t)
        rest = (1.0 - p) / max(k - 1, 1)
        return t * (p - rest) + rest

    def objective(self, log_p: torch.Tensor, ce: torch.Tensor, y: torch.Tensor | None,
                  values: tuple[float, ...], epoch: int) -> torch.Tensor:
        """CE(z, t) − λ·mean_b H(softmax(z_b)), λ = K·:data:`ENTROPY_WEIGHT`."""
        return ce - log_p.shape[-1] * ENTROPY_WEIGHT * entropy_of(log_p).mean(-1)

    def release(self, logits: torch.Tensor, value: float) -> torch.Tensor:
        """Every row's scores replaced by the reference scores (:func:`reference_log_scores`),
        the r-th largest logit receiving the r-th largest reference score; as logits (the
        exact log-scores)."""
        import torch

        k = logits.shape[-1]
        ref = torch.tensor(reference_log_scores(float(value), k), dtype=torch.float64, device=logits.device)
        order = torch.argsort(logits, dim=-1, descending=True, stable=True)
        ranks = torch.empty_like(order).scatter_(-1, order, torch.arange(k, device=logits.device).expand_as(order))
        return ref[ranks].to(logits.dtype)


DEFENCE = Hamp()
