"""RMIA: the relative membership-inference attack, offline version (docs/methods/d-attacks.md D).

Zarifzadeh, Liu, Shokri, *Low-Cost High-Power Membership Inference Attacks*, ICML 2024.
The signal is the probability the model gives to a sample's true label, p = softmax(z)_y.
For an audited sample x and a population sample z (known non-members of every model),

    LR(x) = p_target(x) / Pr(x),   LR(z) = p_target(z) / Pr(z),
    score(x) = Pr_z[ LR(x) / LR(z) ≥ γ ]  (fraction of population samples z),

where Pr(·) is the reference models' average probability of the sample. Offline, the
reference models did not train on x, and the paper approximates the IN probability by a
linear function of the OUT one, Pr_IN(x) ≈ a·Pr_OUT(x) + (1 − a), so that

    Pr(x) = ½ (Pr_IN(x) + Pr_OUT(x)) ≈ ½ ((1 + a)·Pr_OUT(x) + (1 − a)),

with Pr_OUT(x) the mean of p over the OUT reference models (the paper's offline
approximation). a = 1 trusts the references fully (Pr = Pr_OUT); a = 0 assumes members are
fit perfectly (Pr_IN = 1). The same formula gives Pr(z), with Pr_OUT(z) the mean over
*every* reference model (no model trained on z).

Where the authors' code (privacytrustlab/ml_privacy_meter) differs: it applies
``(1 + a)/2 * mean_out + (1 - a)/2`` to x and z alike, but its ``mean_out`` for a population
sample z is not the mean over all references. Its helper zeroes the signals of models that
trained on a sample, sorts, and keeps as many of the largest values as there are OUT models
per audited sample (half of the references); for z, which no model trained on, that keeps
the *larger half* of the reference probabilities. privaudit averages all of them, the
paper's definition of Pr_OUT(z): keeping the larger half raises Pr(z), lowers LR(z) and
so shifts every score, by an amount that depends on how spread the references are.

Shapes: ``p_target_x`` (n,), ``p_ref_x`` (M, n), ``p_target_z`` (Z,), ``p_ref_z`` (M, Z),
probabilities in [0, 1]; optional ``ref_keep_x`` (M, n) / ``ref_keep_z`` (M, Z) bool,
True = that reference model trained on the sample (such entries are left out of Pr_OUT).
Scores are in [0, 1], higher = more likely a member.
"""

from __future__ import annotations

import numpy as np

from privaudit.analysis.metrics import auc_score
from privaudit.attacks.membership import membership_mask

# Pr(·) is floored here so that a sample every OUT model gives probability 0 (softmax
# underflow) yields a huge but finite likelihood ratio instead of a division by zero.
PR_FLOOR = 1e-30

# Default candidate values of the offline coefficient a for :func:`calibrate_a`.
A_GRID = np.linspace(0.0, 1.0, 11)


def _prob_vector(p: np.ndarray, name: str) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"{name} must have shape (n,), got {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):  # also rejects nan
        raise ValueError(f"{name} must be probabilities in [0, 1]")
    return p


def _prob_matrix(p: np.ndarray, n: int, name: str) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != n or p.shape[0] < 1:
        raise ValueError(f"{name} must have shape (M, {n}) with M >= 1, got {p.shape}")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"{name} must be probabilities in [0, 1]")
    return p


def _out_mean(p_ref: np.ndarray, keep: np.ndarray | None, name: str) -> np.ndarray:
    """Pr_OUT: mean over the reference models that did not train on each sample. A sample that
    every reference trained on (with one reference, half the samples) takes the mean over all
    its references instead, RMIA's online average (Zarifzadeh et al.'s Pr(x) with the IN models
    in it); ValueError when no sample has an OUT model at all."""
    if keep is None:
        mean: np.ndarray = p_ref.mean(axis=0)
        return mean
    out = ~membership_mask(keep, p_ref.shape, name)
    count = out.sum(axis=0)
    if not np.any(count):
        raise ValueError(f"no sample has an OUT reference model in {name}; offline RMIA needs reference models "
                         "that did not train on the audited samples")
    none = count == 0
    out[:, none] = True  # every reference trained on it: the mean over all of them
    pr_out: np.ndarray = np.where(out, p_ref, 0.0).sum(axis=0) / out.sum(axis=0)
    return pr_out


def rmia_likelihood_ratios(p_target: np.ndarray, pr_out: np.ndarray, a: float) -> np.ndarray:
    """LR = p_target / Pr with Pr = ½((1 + a)·Pr_OUT + (1 − a)) floored at ``PR_FLOOR``.

    Shapes: both (n,); result (n,). Zarifzadeh et al. (2024), offline approximation.
    """
    pr = 0.5 * ((1.0 + a) * pr_out + (1.0 - a))
    return p_target / np.maximum(pr, PR_FLOOR)


def rmia_scores(
    p_target_x: np.ndarray,
    p_ref_x: np.ndarray,
    p_target_z: np.ndarray,
    p_ref_z: np.ndarray,
    *,
    a: float = 1.0,
    gamma: float = 1.0,
    ref_keep_x: np.ndarray | None = None,
    ref_keep_z: np.ndarray | None = None,
    interpolate: bool = False,
) -> np.ndarray:
    """Offline RMIA scores, shape (n,), in [0, 1]; higher = more likely a member.

    score(x) = (1/Z)·#{z : LR(x)/LR(z) ≥ γ}, evaluated as #{z : LR(z) ≤ LR(x)/γ}
    (the same for positive LR; LR(z) = 0 always counts). LR and Pr as in the module
    docstring, Pr_OUT over all reference models, or over those with ``ref_keep_* == False``
    when a mask is given (a sample with no OUT model raises ValueError).

    γ ≥ 1 (paper's threshold on the pairwise ratio); the default γ = 1 is what the authors'
    code uses (it counts ratios > 1; here ≥ 1, as the paper writes it, which only differs on
    exact ties). ``a`` in [0, 1]; tune it with :func:`calibrate_a`.

    Cost: sorting the Z population ratios once and one ``np.searchsorted`` per audited
    sample, O((n + Z) log Z) time and O(M·(n + Z)) memory for the inputs, O(n + Z) extra;
    no n × Z matrix.

    ``interpolate``: the count without its ties (:func:`interpolated_count`). For one target
    the count is a step function of LR(x), so every x whose LR exceeds the largest LR(z)
    scores 1: with Z = 5,000 population samples, the members above that share one score
    and the ROC below FPR 1/Z is a straight line. Interpolating log LR between neighbouring
    population values keeps the count's scale (comparable across targets) and ranks x by
    LR(x) within each step: the ROC on one target is then LR(x)'s own.
    """
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"a must lie in [0, 1], got {a}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be positive and finite, got {gamma}")
    p_target_x = _prob_vector(p_target_x, "p_target_x")
    p_target_z = _prob_vector(p_target_z, "p_target_z")
    if p_target_z.size == 0:
        raise ValueError("need at least one population sample")
    p_ref_x = _prob_matrix(p_ref_x, p_target_x.size, "p_ref_x")
    p_ref_z = _prob_matrix(p_ref_z, p_target_z.size, "p_ref_z")
    lr_x = rmia_likelihood_ratios(p_target_x, _out_mean(p_ref_x, ref_keep_x, "ref_keep_x"), a)
    lr_z = rmia_likelihood_ratios(p_target_z, _out_mean(p_ref_z, ref_keep_z, "ref_keep_z"), a)
    sorted_z = np.sort(lr_z)
    if interpolate:
        return interpolated_count(sorted_z, lr_x / gamma)
    counts = np.searchsorted(sorted_z, lr_x / gamma, side="right")
    return counts / sorted_z.size


def interpolated_count(sorted_z: np.ndarray, v: np.ndarray) -> np.ndarray:
    """#{z ≤ v}/Z made continuous and strictly increasing in v (shape of ``v``).

    With L = log of the values, for v between the sorted population values z₍c₎ ≤ v < z₍c+1₎
    (c of them at or below v): (c − 1 + (L(v) − L(z₍c₎))/(L(z₍c+1₎) − L(z₍c₎)))/Z, which runs
    from (c − 1)/Z to c/Z; above the largest, (Z − 1 + 1 − e^{−(L(v) − L(z₍Z₎))})/Z < 1; below
    the smallest, −(1 − e^{−(L(z₍1₎) − L(v))})/Z > −1/Z. Values are floored at 1e-300 before
    the log.
    """
    z = np.log(np.maximum(np.asarray(sorted_z, dtype=np.float64), 1e-300))
    lv = np.log(np.maximum(np.asarray(v, dtype=np.float64), 1e-300))
    size = z.size
    c = np.searchsorted(z, lv, side="right")
    lo = z[np.clip(c - 1, 0, size - 1)]
    hi = z[np.clip(c, 0, size - 1)]
    with np.errstate(invalid="ignore", divide="ignore"):
        inner = np.where(hi > lo, (lv - lo) / (hi - lo), 0.0)
    frac = np.where(c >= size, 1.0 - np.exp(-(lv - z[-1])), inner)
    below = -(1.0 - np.exp(-(z[0] - lv)))
    scores: np.ndarray = np.where(c == 0, below, c - 1 + frac) / size
    return scores


def calibrate_a(
    p_ref_x_by_model: np.ndarray,
    keep: np.ndarray,
    *,
    grid: np.ndarray = A_GRID,
    gamma: float = 1.0,
    p_ref_z_by_model: np.ndarray | None = None,
    pseudo_targets: np.ndarray | None = None,
) -> float:
    """Choose the offline coefficient ``a`` by attacking reference models with the others.

    For each pseudo-target j (default: every model), model j plays the audited model and
    ``keep[j]`` gives the true membership labels; the other M − 1 models are the references
    (their ``keep`` rows mask out the samples they trained on, so Pr_OUT is truly offline).
    The population is:
      - the samples that are OUT for model j (default), with the other models' ``keep``
        as their mask; or
      - ``p_ref_z_by_model`` (M, Z), all M models' probabilities on population samples that
        no model trained on, when given.
    Samples with no OUT model among the references are left out of that simulation. The
    AUC (:func:`privaudit.analysis.metrics.auc_score`, scikit-learn's ``roc_auc_score``) of :func:`rmia_scores` with
    every candidate a is averaged over pseudo-targets, and the a with the largest mean AUC is returned (the
    smallest such a on ties).

    Where the authors' code differs: its ``tune_offline_a`` (ml_privacy_meter) attacks one
    model only, the audited model's paired reference, with the signal of a single other
    reference model per sample, over a ∈ {0, 0.1, …, 1}, and keeps the a of the highest AUC.
    Here any set of pseudo-targets can be used, each attacked with all the other models, and
    their AUCs are averaged before the best a is chosen; privaudit's caller
    (``privaudit.attacks.pool_attacks``) averages the a of a few such pseudo-targets.

    Shapes: ``p_ref_x_by_model`` (M, n) probabilities of the true label, M ≥ 2; ``keep``
    (M, n) bool. Returns one value of ``grid``.
    """
    p = np.asarray(p_ref_x_by_model, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"p_ref_x_by_model must have shape (M, n), got {p.shape}")
    p = _prob_matrix(p, p.shape[1], "p_ref_x_by_model")
    n_models = p.shape[0]
    if n_models < 2:
        raise ValueError("calibrate_a needs at least 2 models (one pseudo-target, one reference)")
    keep = membership_mask(keep, p.shape, "keep")
    grid = np.asarray(grid, dtype=np.float64).ravel()
    if grid.size == 0 or np.any((grid < 0) | (grid > 1)):
        raise ValueError("grid must be a non-empty set of values in [0, 1]")
    pop = None
    if p_ref_z_by_model is not None:
        pop = np.asarray(p_ref_z_by_model, dtype=np.float64)
        if pop.ndim != 2 or pop.shape[0] != n_models:
            raise ValueError(f"p_ref_z_by_model must have shape ({n_models}, Z), got {pop.shape}")
        pop = _prob_matrix(pop, pop.shape[1], "p_ref_z_by_model")
    targets = np.arange(n_models) if pseudo_targets is None else np.asarray(pseudo_targets, dtype=int).ravel()
    if targets.size == 0 or np.any((targets < 0) | (targets >= n_models)):
        raise ValueError(f"pseudo_targets must be indices in [0, {n_models})")

    auc_sum = np.zeros(grid.size)
    used = 0
    for j in targets:
        others = np.arange(n_models) != j
        ref_p, ref_keep = p[others], keep[others]
        usable = (~ref_keep).any(axis=0)
        labels = keep[j, usable]
        if labels.all() or not labels.any():
            continue
        x_t, x_ref, x_keep = p[j, usable], ref_p[:, usable], ref_keep[:, usable]
        if pop is None:
            z_sel = usable & ~keep[j]
            z_t, z_ref, z_keep = p[j, z_sel], ref_p[:, z_sel], ref_keep[:, z_sel]
        else:
            z_t, z_ref, z_keep = pop[j], pop[others], None
        for g, a in enumerate(grid):
            s = rmia_scores(x_t, x_ref, z_t, z_ref, a=float(a), gamma=gamma, ref_keep_x=x_keep, ref_keep_z=z_keep)
            auc_sum[g] += auc_score(labels, s)
        used += 1
    if used == 0:
        raise ValueError("no pseudo-target has both members and non-members among usable samples")
    return float(grid[int(np.argmax(auc_sum))])


#: the soft-margin Taylor softmax of RMIA's published CIFAR-10 runs (ml_privacy_meter's
#: configuration: margin m = 0.6, expansion order n = 4, temperature T = 2)
TAYLOR_MARGIN, TAYLOR_ORDER, TAYLOR_TEMPERATURE = 0.6, 4, 2.0


def taylor_soft_margin(logits: np.ndarray, labels: np.ndarray, *, margin: float = TAYLOR_MARGIN,
                       order: int = TAYLOR_ORDER, temperature: float = TAYLOR_TEMPERATURE) -> np.ndarray:
    """RMIA's published signal: the soft-margin Taylor softmax of the true label, shape
    ``logits.shape[:-1]``.

    With u = z/T and the exponential replaced by its Taylor polynomial
    e_n(u) = Σ_{i≤n} uⁱ/i!, the true label's share is

        e_n(u_y − m) / (e_n(u_y − m) + Σ_{j≠y} e_n(u_j)).

    The order must be even: an even-order e_n is positive everywhere (its minimum, at its
    only critical point u₀, is u₀ⁿ/n! > 0), an odd one goes negative for negative logits.
    Zarifzadeh, Liu, Shokri, *Low-Cost High-Power Membership Inference Attacks* (ICML 2024);
    the margin m penalises the true label as a soft-margin loss does. ``logits`` (..., C);
    ``labels`` broadcast against ``logits.shape[:-1]`` (e.g. (n, 1) for (M, n, A, C)... as
    :func:`privaudit.attacks.lira.logit_scaled_confidence`).
    """
    if order < 2 or order % 2:
        raise ValueError(f"the Taylor order must be even and at least 2, got {order}")
    u = np.asarray(logits, dtype=np.float64) / temperature
    y = np.broadcast_to(np.asarray(labels, dtype=np.int64), u.shape[:-1])[..., None]

    def taylor(v: np.ndarray) -> np.ndarray:
        total, power = np.ones_like(v), np.ones_like(v)
        for i in range(1, order + 1):
            power = power * v / i
            total = total + power
        return total

    true = taylor(np.take_along_axis(u, y, axis=-1)[..., 0] - margin)
    others = taylor(u).sum(axis=-1) - taylor(np.take_along_axis(u, y, axis=-1)[..., 0])
    share: np.ndarray = true / (true + others)
    return share
