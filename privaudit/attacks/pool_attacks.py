"""Attacks that use a reference pool: LiRA, RMIA, the many-shadow attack, and their
leave-one-out evaluation with empirical ε lower bounds.

Every function here works on saved arrays (:class:`privaudit.pipeline.pools.Pool`), so adding an
attack retrains nothing. Conventions: member = positive class, higher score = more likely
a member; shapes (M reference models, n audited samples, z population samples, A queries,
C classes) as in :mod:`privaudit.pipeline.pools`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from privaudit.analysis.empirical import best_threshold, epsilon_lower_bound, tpr_at_fpr_with_ci
from privaudit.analysis.gdp import gdp_lower_bound, mu_from_counts
from privaudit.analysis.metrics import advantage_threshold, attack_metrics, auc_score, low_fpr_tprs, roc
from privaudit.analysis.operating import tpr_at_low_fprs
from privaudit.attacks.features import Features, compute_features
from privaudit.attacks.lira import lira_bayes_scores, lira_scores, lira_shrunk_scores
from privaudit.attacks.registry import POOL_BASELINES, REFERENCE_ATTACKS, Scorer, pool_scorer
from privaudit.attacks.rmia import calibrate_a, rmia_scores
from privaudit.attacks.scores import confidence_scores, loss_scores
from privaudit.attacks.shadow import ShadowAttack

#: how an attack's ε thresholds and operating points were chosen: on other models' scores
#: with their known membership (the shadow model, or another pool model), never on the target's
CALIBRATED = "calibration: chosen on another model's scores"
#: the quantile-regression attack (docs/methods/d-attacks.md D.8): fit on the population, no reference
#: model; its thresholds are chosen on a pool model's scores, so it runs with the pool
QUANTILE_ATTACK = "quantile"
#: what each pool model, attacked with the others as references, contributes as a replicate of
#: its setting (docs/methods/e-replicates.md E): the measures the verdicts compare, and μ's ε
REPLICATED = ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "gdp_mu", "gdp_epsilon", "eps_lower_bound")
#: the replicated measures whose pool mean gets a jackknife standard error (μ's ε is read from
#: μ and its interval's ends)
JACKKNIFED = tuple(k for k in REPLICATED if k != "gdp_epsilon")
RMIA_PSEUDO_TARGETS = 2
# The many-shadow attack's logistic regression has 3 inputs; beyond this many rows per class
# (seeded subsample) more data changes its fit by less than its sampling error while the fit
# time keeps growing (3.8 M rows for 64 models × 60,000 samples).
SHADOW_POOL_FIT_ROWS = 1 << 17


def _at_most(rows: np.ndarray, limit: int) -> np.ndarray:
    """``rows`` itself, or a seeded subsample of ``limit`` of them (order kept)."""
    if len(rows) <= limit:
        return rows
    keep = np.sort(np.random.default_rng(len(rows)).choice(len(rows), size=limit, replace=False))
    return rows[keep]


def pool_scores(target_logits: np.ndarray, target_pop_logits: np.ndarray, labels: np.ndarray,
                pop_labels: np.ndarray, ref_logits: np.ndarray, ref_pop_logits: np.ndarray,
                ref_keep: np.ndarray, *, attacks: tuple[str, ...] = REFERENCE_ATTACKS + POOL_BASELINES,
                gamma: float = 1.0) -> dict[str, np.ndarray]:
    """Scores (n,) of each attack against one target, the pool models ``ref_*`` as references.

    target_logits (n, A, C), target_pop_logits (z, A, C), ref_logits (M, n, A, C),
    ref_pop_logits (M, z, A, C), ref_keep (M, n) bool, the references in complementary
    pairs (0, 1), (2, 3), ... as a pool stores them. See :func:`scores_from_features`.
    """
    return scores_from_features(
        compute_features(target_logits, labels), compute_features(target_pop_logits, pop_labels),
        target_logits[:, 0], labels, compute_features(ref_logits, labels),
        compute_features(ref_pop_logits, pop_labels), ref_keep, attacks=attacks, gamma=gamma)


def scores_from_features(target: Features, target_pop: Features, target_plain_logits: np.ndarray,
                         labels: np.ndarray, refs: Features, ref_pop: Features, ref_keep: np.ndarray, *,
                         attacks: tuple[str, ...] = REFERENCE_ATTACKS + POOL_BASELINES,
                         gamma: float = 1.0, ref_pop_keep: np.ndarray | None = None,
                         rmia_a: float | None = None) -> dict[str, np.ndarray]:
    """Scores (n,) of each attack from precomputed statistics (:mod:`privaudit.attacks.features`).

    LiRA (per-sample, global, shrunk-variance and shrunk-mean variants) uses the
    logit-scaled confidence of every query (the plain image; also its mirror with
    ``--augment flip``) and averages the per-query scores; RMIA uses p_y averaged over
    queries, its ``a`` calibrated on the reference models alone, and counts without ties
    (:func:`~privaudit.attacks.rmia.interpolated_count`: the plain count gives every sample
    above the population's largest ratio the score 1); the many-shadow attack fits the
    ML-Leaks logistic regression on every reference model's members vs non-members; loss
    and confidence use the target's
    plain-query logits ``target_plain_logits`` (n, C).

    ``ref_pop_keep`` (M, z) bool: which reference models trained on each population sample,
    when the population is not held out from every reference (``privaudit scan`` without
    population arrays uses the audited samples themselves; RMIA's Pr(z) then averages the
    OUT references only, as for x, and ``a`` is calibrated on each pseudo-target's
    non-members). With γ = 1 an RMIA score is the rank of LR(x) among the LR(z), so this
    choice of population does not change its ROC curve. ``rmia_a``: RMIA's ``a`` when already
    chosen (:func:`leave_one_out` chooses each target's once), else calibrated here.
    """
    inputs = PoolInputs(target, target_pop, target_plain_logits, labels, refs, ref_pop, ref_keep, gamma=gamma,
                        ref_pop_keep=ref_pop_keep, rmia_a=rmia_a)
    out: dict[str, np.ndarray] = {}
    for name in attacks:  # each by its registry scorer (privaudit.attacks.registry); a name without one is left out
        scorer = pool_scorer(name)
        if scorer is not None and name not in out:
            out[name] = scorer_function(scorer)(inputs, **dict(scorer.options))
    return out


def scorer_function(scorer: Scorer) -> Callable[..., np.ndarray]:
    """The function of this module a registry :class:`~privaudit.attacks.registry.Scorer`
    names (a ``score_*`` function of :class:`PoolInputs`)."""
    fn = globals().get(scorer.function) if scorer.function.startswith("score_") else None
    if not callable(fn):
        raise LookupError(f"privaudit.attacks.pool_attacks has no scorer {scorer.function!r}")
    return cast(Callable[..., np.ndarray], fn)


@dataclass(frozen=True)
class PoolInputs:
    """What a pool attack's scorer (:class:`privaudit.attacks.registry.Scorer`) reads against one
    target: :func:`scores_from_features`'s arguments."""

    target: Features
    target_pop: Features
    target_plain_logits: np.ndarray
    labels: np.ndarray
    refs: Features
    ref_pop: Features
    ref_keep: np.ndarray
    gamma: float = 1.0
    ref_pop_keep: np.ndarray | None = None
    rmia_a: float | None = None


def score_lira(r: PoolInputs, *, online: bool, global_variance: bool) -> np.ndarray:
    """LiRA on the logit-scaled confidences (:func:`~privaudit.attacks.lira.lira_scores`)."""
    return lira_scores(r.target.phi, r.refs.phi, r.ref_keep, online=online, global_variance=global_variance)


def score_lira_shrunk(r: PoolInputs, *, online: bool) -> np.ndarray:
    """LiRA with shrunk variances (:func:`~privaudit.attacks.lira.lira_shrunk_scores`)."""
    return lira_shrunk_scores(r.target.phi, r.refs.phi, r.ref_keep, online=online)


def score_lira_bayes(r: PoolInputs, *, online: bool) -> np.ndarray:
    """LiRA with shrunk means and variances (:func:`~privaudit.attacks.lira.lira_bayes_scores`)."""
    return lira_bayes_scores(r.target.phi, r.refs.phi, r.ref_keep, online=online)


def score_rmia(r: PoolInputs) -> np.ndarray:
    """RMIA, its ``a`` given (``rmia_a``) or calibrated on the references alone, counted without ties."""
    a = r.rmia_a if r.rmia_a is not None else _calibrate_rmia_a(
        r.refs.p_y, r.ref_keep, None if r.ref_pop_keep is not None else r.ref_pop.p_y, r.gamma)
    return rmia_scores(r.target.p_y, r.refs.p_y, r.target_pop.p_y, r.ref_pop.p_y, a=a, gamma=r.gamma,
                       ref_keep_x=r.ref_keep, ref_keep_z=r.ref_pop_keep, interpolate=True)


def score_shadow_pool(r: PoolInputs) -> np.ndarray:
    """The ML-Leaks regression fitted on every reference's members vs non-members."""
    members, nonmembers = (_at_most(r.refs.top3[sel], SHADOW_POOL_FIT_ROWS) for sel in (r.ref_keep, ~r.ref_keep))
    return ShadowAttack().fit_features(members, nonmembers).scores_features(r.target.top3)


def score_loss(r: PoolInputs) -> np.ndarray:
    """The loss baseline on the target's plain-query logits."""
    return loss_scores(np.asarray(r.target_plain_logits, dtype=np.float64), r.labels)


def score_confidence(r: PoolInputs) -> np.ndarray:
    """The confidence baseline on the target's plain-query logits."""
    return confidence_scores(np.asarray(r.target_plain_logits, dtype=np.float64))


def quantile_scores(x: np.ndarray, labels: np.ndarray, phi: np.ndarray, x_pop: np.ndarray, pop_labels: np.ndarray,
                    phi_pop: np.ndarray, *, seed: int) -> np.ndarray:
    """The quantile-regression attack's scores (n,) on one model: its non-member score φ
    (plain query) regressed on the population's inputs (``x_pop``, ``pop_labels``, ``phi_pop``:
    samples the model never trained on, disjoint from the audited ones), then each audited
    sample's φ standardised by the prediction (:class:`privaudit.attacks.quantile.QuantileAttack`)."""
    from privaudit.attacks.quantile import QuantileAttack

    attack = QuantileAttack(seed=seed, n_classes=int(max(labels.max(), pop_labels.max())) + 1)
    return attack.fit(x_pop, pop_labels, phi_pop).scores(x, labels, phi)


def _calibrate_rmia_a(p_ref_x: np.ndarray, ref_keep: np.ndarray, p_ref_z: np.ndarray | None, gamma: float) -> float:
    """RMIA's ``a`` from the reference models alone (the audited target plays no part).

    The references come in complementary pairs (0, 1), (2, 3), ...; pseudo-target j is
    attacked with every reference but j and its partner, as in :func:`leave_one_out`, on
    the first :data:`RMIA_PSEUDO_TARGETS` pairs, and the a chosen for each (by
    :func:`privaudit.attacks.rmia.calibrate_a`) is averaged: a vote per pair, so that one
    model's noise does not set a. With fewer than two pairs there is nothing to calibrate on
    and a = 1 (no offline correction: Pr(x) is the OUT models' mean); so too when no reference
    trained on an audited sample (``privaudit audit-model``'s offline references). ``p_ref_z`` None: each
    pseudo-target's population is its own non-members (:func:`~privaudit.attacks.rmia.calibrate_a`).

    This is not the authors' procedure: ``tune_offline_a`` in ml_privacy_meter tunes a once,
    on the audited model's paired model, attacked with one reference model per sample.
    """
    m = len(ref_keep)
    if m < 4 or not np.asarray(ref_keep).any():  # too few, or offline references: nothing to calibrate on
        return 1.0
    votes = []
    for j in range(0, min(2 * RMIA_PSEUDO_TARGETS, m), 2):
        sel = np.array([j] + [i for i in range(m) if i not in (j, j + 1)])
        votes.append(calibrate_a(p_ref_x[sel], ref_keep[sel], gamma=gamma,
                                 p_ref_z_by_model=None if p_ref_z is None else p_ref_z[sel],
                                 pseudo_targets=np.array([0])))
    return float(np.mean(votes))


def empirical_privacy(labels: np.ndarray, scores: np.ndarray, calib_labels: np.ndarray, calib_scores: np.ndarray,
                      *, delta: float, confidence: float = 0.95) -> dict[str, float | str | None]:
    """The empirical privacy of one attack on one target, every threshold set on ``calib_*``
    (the scores of other models with their known membership), never on the evaluated target's
    labels (docs/methods/d-attacks.md D.4, D.6, D.9):

    - ``threshold_strategy``: how every threshold below was chosen (:data:`CALIBRATED`);
    - ``eps_lower_bound`` at ``delta``: the Clopper–Pearson bound at the threshold that
      maximises it on the calibration data (``eps_threshold``), and ``eps_fpr``, the FPR that
      threshold reached on the target;
    - ``gdp_mu`` and ``gdp_epsilon`` (at ``delta``): the Gaussian-DP estimate of Nasr et al.,
      its threshold chosen on the calibration data the same way (``gdp_threshold``, ``gdp_fpr``);
    - TPR at 1 % / 0.1 % FPR with Clopper–Pearson intervals (of the ROC's operating points);
    - the calibrated operating points: ``tpr_at_1pct_fpr_cal`` … ``tpr_at_0p01pct_fpr_cal``
      with the FPR each reached on the target (``fpr_at_1pct_cal`` …), None where the
      non-members are too few to state that FPR; PPV at membership priors of 1 % and 10 % at
      the calibrated 1 % point (``ppv_at_1pct_prior``, ``ppv_at_10pct_prior``, with ``_lo``/``_hi``).

    Every bound holds with probability ``confidence``.
    """
    out: dict[str, float | str | None] = {
        "threshold_strategy": CALIBRATED,
        **calibrated_bounds(labels, scores, calib_labels, calib_scores, delta=delta, confidence=confidence),
        **tpr_intervals(labels, scores, confidence)}
    points = tpr_at_low_fprs(labels, scores, calib_labels, calib_scores, confidence=confidence)
    for key, point in points.items():
        level = key.removeprefix("tpr_at_").removesuffix("_fpr")
        out[f"{key}_cal"], out[f"fpr_at_{level}_cal"] = point.tpr, point.fpr_achieved
        if key == "tpr_at_1pct_fpr":
            d = point.to_dict()
            out.update({k: d[k] for k in d if k.startswith("ppv_at_")})
    return out


def calibrated_bounds(labels: np.ndarray, scores: np.ndarray, calib_labels: np.ndarray, calib_scores: np.ndarray,
                      *, delta: float, confidence: float = 0.95) -> dict[str, float]:
    """The two bounds of :func:`empirical_privacy`, their thresholds chosen on ``calib_*``:
    ``eps_lower_bound`` (``eps_threshold``, ``eps_fpr``) and the GDP estimate's ``gdp_mu``,
    ``gdp_epsilon``, ``gdp_threshold``, ``gdp_fpr``."""
    thr = best_threshold(calib_labels, calib_scores, delta=delta, confidence=confidence)
    neg = np.asarray(labels) == 0
    gdp = gdp_lower_bound(labels, scores, calib_labels, calib_scores, delta=delta, confidence=confidence)
    return {"eps_threshold": float(thr),
            "eps_lower_bound": float(epsilon_lower_bound(labels, scores, thr, delta=delta, confidence=confidence)),
            "eps_fpr": float(np.mean(np.asarray(scores)[neg] >= thr)), **gdp.metrics()}


def replicate_metrics(labels: np.ndarray, scores: np.ndarray, eps_threshold: float, gdp_threshold: float,
                      *, delta: float, confidence: float = 0.95) -> dict[str, float]:
    """The measures of :data:`JACKKNIFED` of one target at thresholds already chosen (the
    ``eps_threshold`` and ``gdp_threshold`` that :func:`evaluate_scores` chose for it on its
    calibration model), each computed as there: what :func:`pair_jackknife` evaluates."""
    labels = np.asarray(labels)
    fpr, tpr = roc(labels, scores)
    pos, neg = scores[labels == 1], scores[labels == 0]
    fp, fn = int(np.sum(neg >= gdp_threshold)), int(np.sum(pos < gdp_threshold))
    return {"auc": float(auc_score(labels, scores)), **low_fpr_tprs(fpr, tpr),
            "gdp_mu": float(mu_from_counts(fp, neg.size, fn, pos.size, confidence)),
            "eps_lower_bound": float(epsilon_lower_bound(labels, scores, eps_threshold, delta=delta,
                                                         confidence=confidence))}


def tpr_intervals(labels: np.ndarray, scores: np.ndarray, confidence: float = 0.95) -> dict[str, float]:
    """Clopper–Pearson intervals of the TPR at 1 % and 0.1 % FPR: ``tpr_at_1pct_fpr_lo`` …
    ``tpr_at_0p1pct_fpr_hi`` (:func:`privaudit.analysis.empirical.tpr_at_fpr_with_ci`)."""
    out = {}
    for key, level in (("tpr_at_1pct_fpr", 0.01), ("tpr_at_0p1pct_fpr", 0.001)):
        ci = tpr_at_fpr_with_ci(labels, scores, level, confidence=confidence)
        out[f"{key}_lo"], out[f"{key}_hi"] = float(ci["lo"]), float(ci["hi"])
    return out


def evaluate_scores(labels: np.ndarray, scores: np.ndarray, calib_labels: np.ndarray, calib_scores: np.ndarray,
                    *, delta: float, confidence: float = 0.95) -> dict[str, float | str | None]:
    """Metrics of one attack on one target, with thresholds chosen on calibration data.

    The decision threshold (for accuracy, precision, recall) maximises TPR − FPR on
    ``calib_*`` (other pool models): nothing is selected on the evaluated target. Adds
    :func:`empirical_privacy`.
    """
    m = attack_metrics(labels, scores, advantage_threshold(calib_labels, calib_scores))
    return {**m, **empirical_privacy(labels, scores, calib_labels, calib_scores, delta=delta, confidence=confidence)}


def leave_one_out(logits: np.ndarray, pop_logits: np.ndarray | None, keep: np.ndarray, labels: np.ndarray,
                  pop_labels: np.ndarray | None, *, attacks: tuple[str, ...], delta: float,
                  confidence: float = 0.95, paired: bool = True, evaluate: Any = None,
                  features: tuple[Features, Features] | None = None,
                  rmia_a: list[float] | None = None) -> tuple[dict[str, list[dict[str, Any]]],
                                                                              dict[str, np.ndarray]]:
    """Each pool model in turn as the target, the other pairs as references.

    Pool models come in complementary pairs (2j, 2j+1). Target t's references are every
    model but t and its partner t ^ 1: then each sample is IN for exactly half of the
    references whatever its membership in t. Keeping the partner would leak t's membership
    through the reference set itself (a member of t would have one IN reference fewer), which
    inflates scores and ε bounds. Needs M >= 4. With ``paired=False`` (references with no
    such structure, e.g. each trained on a random half as in the LiRA authors' code) only t
    itself is left out (and M >= 3 suffices). ``pop_logits`` None: the population is the
    audited samples themselves (see :func:`scores_from_features`'s ``ref_pop_keep``).

    Returns (per attack: one metrics dict per target model, where model t's thresholds are
    chosen on model (t+2) mod M, from another pair; per attack: the scores, shape (M, n)).
    ``evaluate``: the metrics function of each target (default :func:`evaluate_scores`);
    ``features``: the models' and their population's :func:`compute_features`, when already
    computed. RMIA's metrics carry the ``rmia_a`` each target's references chose; ``rmia_a``
    (one per target) gives them instead of calibrating.
    """
    evaluate = evaluate_scores if evaluate is None else evaluate
    m = len(keep)
    if m < (4 if paired else 3):
        raise ValueError(f"leave-one-out needs a pool of at least {4 if paired else 3} models (got {m})")
    scores = {a: np.zeros(keep.shape) for a in attacks}
    feats, pop_feats = features if features is not None else _features(logits, pop_logits, labels, pop_labels)
    chosen_a = [math.nan] * m
    for t in range(m):
        others = (np.arange(m) != t) & (np.arange(m) != ((t ^ 1) if paired else t))
        ref_pop_keep = keep[others] if pop_logits is None else None
        if "rmia" in attacks:
            chosen_a[t] = rmia_a[t] if rmia_a is not None else _calibrate_rmia_a(
                feats[others].p_y, keep[others], None if ref_pop_keep is not None else pop_feats[others].p_y, 1.0)
        s = scores_from_features(feats[t], pop_feats[t], logits[t][:, 0], labels, feats[others],
                                 pop_feats[others], keep[others], attacks=attacks, ref_pop_keep=ref_pop_keep,
                                 rmia_a=chosen_a[t] if "rmia" in attacks else None)
        for a in attacks:
            scores[a][t] = s[a]
    per_target: dict[str, list[dict[str, Any]]] = {a: [] for a in attacks}
    for a in attacks:
        for t in range(m):
            c = (t + 2) % m
            per_target[a].append(evaluate(keep[t].astype(int), scores[a][t], keep[c].astype(int),
                                          scores[a][c], delta=delta, confidence=confidence))
            if a == "rmia":
                per_target[a][t]["rmia_a"] = float(chosen_a[t])
    return per_target, scores


def _features(logits: np.ndarray, pop_logits: np.ndarray | None, labels: np.ndarray,
              pop_labels: np.ndarray | None) -> tuple[Features, Features]:
    """:func:`compute_features` of the models and of their population (the audited samples
    themselves when ``pop_logits`` is None)."""
    feats = compute_features(logits, labels)
    if pop_logits is None:
        return feats, feats
    assert pop_labels is not None, "pop_logits need their pop_labels"
    return feats, compute_features(pop_logits, pop_labels)


def pair_jackknife(logits: np.ndarray, pop_logits: np.ndarray | None, keep: np.ndarray, labels: np.ndarray,
                   pop_labels: np.ndarray | None, per_target: dict[str, list[dict[str, Any]]], *,
                   attacks: tuple[str, ...], delta: float,
                   confidence: float = 0.95) -> dict[str, list[dict[str, float]]]:
    """The delete-one-pair jackknife of the pool's leave-one-out means (docs/methods/e-replicates.md E).

    For each complementary pair j of the M pool models, the attacks' scores are computed
    again (:func:`leave_one_out`) on the pool without pair j, which then serves neither as a
    target nor as a reference, and the mean over its M − 2 targets of each measure of
    :data:`REPLICATED` is kept. Each target keeps the thresholds its calibration model chose
    in the whole pool (``per_target``: :func:`leave_one_out`'s metrics of every attack,
    ``eps_threshold`` and ``gdp_threshold``), and RMIA the ``a`` its references chose
    (``rmia_a``): the jackknife then varies the references, not the tuning choices. A
    threshold jumps between distant candidates as scores move and would swell the jackknife's
    spread far beyond the pool mean's (a non-smooth statistic); ``a``, calibrated again on
    each reduced pool, would double the jackknife's time.
    Returns, per attack, one dict per pair (M/2 of them); empty when M < 6 or odd.

    Recomputing the scores, not only dropping pair j's rows, is what makes the spread
    honest: every target is read against the same references, so the M per-model values
    are positively correlated through them and the plain standard error of their mean is too
    small (benchmarks/bench_pool_replicates.py measures both on simulated pools).
    """
    m = len(keep)
    if m < 6 or m % 2:
        return {}
    out: dict[str, list[dict[str, float]]] = {a: [] for a in attacks}
    feats, pop_feats = _features(logits, pop_logits, labels, pop_labels)
    for j in range(m // 2):
        rest = np.flatnonzero(np.arange(m) // 2 != j)
        kept_a = [per_target["rmia"][t].get("rmia_a", math.nan) for t in rest] if "rmia" in attacks else []
        _, scores = leave_one_out(logits[rest], None if pop_logits is None else pop_logits[rest], keep[rest], labels,
                                  pop_labels, attacks=attacks, delta=delta, confidence=confidence,
                                  evaluate=_no_metrics, features=(feats[rest], pop_feats[rest]),
                                  rmia_a=None if not kept_a or any(map(math.isnan, kept_a)) else kept_a)
        for a in attacks:
            rows = [replicate_metrics(keep[t].astype(int), scores[a][i], per_target[a][t]["eps_threshold"],
                                      per_target[a][t]["gdp_threshold"], delta=delta, confidence=confidence)
                    for i, t in enumerate(rest)]
            out[a].append({k: float(np.mean([r[k] for r in rows])) for k in JACKKNIFED})
    return out


def _no_metrics(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {}


def summarise(per_target: dict[str, list[dict[str, float | str | None]]]) -> dict[str, dict[str, float]]:
    """Mean and standard deviation over targets of each metric, per attack (thresholds, which
    are per target and may be infinite, are left out)."""
    out: dict[str, dict[str, float]] = {}
    for attack, rows in per_target.items():
        keys = [k for k in rows[0] if isinstance(rows[0][k], float) and "threshold" not in k]
        out[attack] = {"n_targets": len(rows)}
        for k in keys:
            vals = np.array([r[k] for r in rows], dtype=float)
            out[attack][f"{k}_mean"] = float(vals.mean())
            out[attack][f"{k}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
    return out


def exposure(labels01: np.ndarray, scores: np.ndarray, classes: np.ndarray, sample_ids: np.ndarray,
             top: int = 10) -> dict[str, Any]:
    """Which classes and samples an attack exposes most: per-class AUC (members vs
    non-members of that class) and the ``top`` members with the highest scores."""
    from privaudit.analysis.metrics import auc_score

    per_class = {}
    for c in np.unique(classes):
        sel = classes == c
        if 0 < labels01[sel].sum() < sel.sum():
            per_class[int(c)] = auc_score(labels01[sel], scores[sel])
    members = np.flatnonzero(labels01 == 1)
    order = members[np.argsort(-scores[members], kind="stable")[:top]]
    return {"per_class_auc": per_class,
            "top_samples": [{"index": int(sample_ids[i]), "class": int(classes[i]), "score": float(scores[i])}
                            for i in order]}
