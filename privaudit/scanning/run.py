"""Every attack a scan input allows, with its metrics, intervals and per-group results.

Which attacks run (docs/scan.md):

* the audited model's logits or probabilities alone: ``loss`` (Yeom et al. 2018),
  ``confidence``, ``entropy`` and ``modified-entropy`` (Song & Mittal 2021), and
  ``classifier`` (gradient-boosted trees on the sorted posteriors); with losses only,
  ``loss``. Their decision thresholds are chosen by stratified K-fold cross-validation on
  the audited samples (:mod:`privaudit.attacks.crossval`), their ε and μ bounds by
  Bonferroni over label-free candidate thresholds (:func:`fixed_score_bounds`; the
  classifier's within its folds, :func:`fold_bounds`);
* with a shadow model's outputs: the ML-Leaks ``shadow`` attack, and the loss and
  confidence attacks thresholded as ``privaudit attack`` does (computed by the same
  function, so the numbers are the same); entropy and modified entropy take their
  thresholds from the shadow model;
* with reference models: LiRA (online/offline, per-sample/global variance), RMIA and the
  many-shadow attack, thresholds chosen by leave-one-out over the references, as
  ``privaudit attack`` does with its pools (with offline or too few references: as the
  score attacks above).

Every attack gets AUC with its DeLong interval, TPR at 1 % and 0.1 % FPR with
Clopper–Pearson intervals, precision, recall, accuracy and advantage at its decision
threshold, and the empirical ε lower bound at δ; then AUC per class and per slice. Each of
these intervals is a 95 % statement about its own row.

The headline ("leaks" or "no detectable leakage") is one family-wise test over all the
attacks (:func:`privaudit.analysis.familywise.family_test`): the attacks whose scores are
fixed functions of the outputs (every attack but ``classifier``) in one max-statistic
permutation test of the membership labels, the cross-validated ``classifier`` by permutation
tests within its folds (Bonferroni over them), and Holm–Bonferroni over the two; it says
"leaks" only when that test rejects "no attack beats chance" at 5 %.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privaudit.analysis.empirical import EpsilonBound, epsilon_lower_bound_bonferroni
from privaudit.analysis.familywise import PERMUTATIONS, family_test
from privaudit.analysis.gdp import GDPBound, gdp_lower_bound_bonferroni
from privaudit.analysis.metrics import attack_metrics, auc_interval, rank_attacks, strongest_attack
from privaudit.attacks.crossval import (
    DEFAULT_FOLDS,
    Decisions,
    classifier_decisions,
    fold_ids,
    sorted_posteriors,
    threshold_decisions,
)
from privaudit.attacks.features import compute_features
from privaudit.attacks.pool_attacks import evaluate_scores, leave_one_out, scores_from_features, tpr_intervals
from privaudit.attacks.registry import ATTACKS, REFERENCE_ATTACKS, description
from privaudit.attacks.scores import confidence_scores, entropy_scores, loss_scores, modified_entropy_scores
from privaudit.errors import DataError, brief
from privaudit.scanning.inputs import ScanInput

CALIBRATION = {"cv": "cross-validation", "shadow": "the shadow model", "references": "references (leave-one-out)"}
#: attacks whose scores are fitted to the audited membership labels by cross-validation: the
#: family-wise test permutes their labels within each fold instead of refitting them
TRAINED = ("classifier",)


@dataclass
class ScanResult:
    """What a scan found: ``metrics`` attack → metrics (with ``calibration``), ``groups``
    one row per (attack, grouping, group), the ``scores`` per attack and ``membership``
    (N,) (members first), ``skipped`` attack → why, ``inputs`` (what was read) and
    ``familywise``, the headline's family-wise test over every attack
    (:meth:`privaudit.analysis.familywise.FamilyTest.to_dict`)."""

    metrics: dict[str, dict]
    groups: pd.DataFrame
    scores: dict[str, np.ndarray]
    membership: np.ndarray
    inputs: dict
    skipped: dict[str, str] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    familywise: dict = field(default_factory=dict)

    @property
    def strongest(self) -> str | None:
        return strongest_attack(self.metrics)

    def table(self) -> pd.DataFrame:
        """One row per attack: every metric, the strongest first (:func:`privaudit.analysis.metrics.rank_attacks`:
        TPR at 0.1 % FPR, then AUC)."""
        rows = [{"attack": name, "description": description(name), **self.metrics[name]}
                for name in rank_attacks(self.metrics)]
        return pd.DataFrame(rows)


def _decision_metrics(labels: np.ndarray, d: Decisions, confidence: float) -> dict:
    """Precision, recall, accuracy and advantage at the cross-validated decisions (point
    estimates), AUC and the TPRs at low FPR with their intervals."""
    m: dict[str, Any] = attack_metrics(labels, d.scores, float("nan"), predicted=d.member)
    return {**m, **tpr_intervals(labels, d.scores, confidence)}


def _bounds(eps: EpsilonBound, gdp: GDPBound, strategy: str) -> dict:
    return {"threshold_strategy": strategy, "eps_lower_bound": eps.epsilon, "eps_threshold": eps.threshold,
            "eps_fpr": eps.fpr, **gdp.metrics()}


def fixed_score_bounds(labels: np.ndarray, scores: np.ndarray, *, delta: float, confidence: float) -> dict:
    """The ε and μ lower bounds of an attack whose score is a fixed function of the audited
    model's outputs: ``eps_lower_bound`` (:func:`privaudit.analysis.empirical
    .epsilon_lower_bound_bonferroni`) and ``gdp_mu``, ``gdp_epsilon``
    (:func:`privaudit.analysis.gdp.gdp_lower_bound_bonferroni`), on the same T label-free
    candidate thresholds (quantiles of the pooled scores), each candidate's bound at
    confidence 1 − α/T and the largest reported, so each bound holds at ``confidence``
    (docs/methods/d-attacks.md D.6); ``eps_fpr`` / ``gdp_fpr`` the FPR at the chosen candidate,
    ``eps_threshold`` / ``gdp_threshold`` the candidate, ``threshold_strategy`` says so."""
    eps = epsilon_lower_bound_bonferroni(labels, scores, delta=delta, confidence=confidence)
    gdp = gdp_lower_bound_bonferroni(labels, scores, delta=delta, confidence=confidence)
    return _bounds(eps, gdp, f"bonferroni: {eps.candidates} label-free candidate thresholds, each at confidence "
                             f"1 − α/{eps.candidates}")


def fold_bounds(labels: np.ndarray, scores: np.ndarray, fold: np.ndarray, *, delta: float, confidence: float) -> dict:
    """The ε and μ lower bounds of the cross-validated ``classifier`` (same keys as
    :func:`fixed_score_bounds`), each fold's own scores bounded on their own.

    Fold k is scored by a model fitted on the other folds only. Given those folds' samples
    it is a fixed function, and fold k's members and non-members are draws independent of
    it, so at a threshold fixed without fold k's labels its errors are binomial, as for a
    fixed score; the candidates are label-free quantiles of fold k's pooled scores (D.6).
    Each of the K folds is bounded by :func:`fixed_score_bounds`' two functions at confidence
    1 − α/K (its T candidates each at 1 − α/(K·T)); given the other folds each fails with
    probability ≤ α/K, so, by the union bound over the folds, all hold at once with
    probability ≥ 1 − α and the largest (reported) does. Counts pooled over the folds are
    not binomial: fold j's model trained on fold k's samples, so the folds' errors depend
    on each other.
    """
    ks = np.unique(fold)
    per_fold = 1.0 - (1.0 - confidence) / ks.size
    eps = [epsilon_lower_bound_bonferroni(labels[fold == k], scores[fold == k], delta=delta, confidence=per_fold)
           for k in ks]
    gdp = [gdp_lower_bound_bonferroni(labels[fold == k], scores[fold == k], delta=delta, confidence=per_fold)
           for k in ks]
    e, g = int(np.argmax([b.epsilon for b in eps])), int(np.argmax([b.mu for b in gdp]))
    t = max(b.candidates for b in eps)
    return _bounds(eps[e], gdp[g], f"bonferroni within folds: each of {ks.size} folds' out-of-fold scores, up to "
                                   f"{t} label-free candidate thresholds each, at confidence 1 − α/({ks.size}·T)")


def fixed_score_metrics(labels: np.ndarray, scores: np.ndarray, fold: np.ndarray, *, delta: float,
                        confidence: float) -> dict:
    """Every metric of an attack whose score is a fixed function of the outputs: decisions by
    cross-validation (:func:`privaudit.attacks.crossval.threshold_decisions`), bounds by
    :func:`fixed_score_bounds`."""
    d = threshold_decisions(labels, scores, fold)
    return {**_decision_metrics(labels, d, confidence),
            **fixed_score_bounds(labels, scores, delta=delta, confidence=confidence), "calibration": "cv"}


def _target_scores(inp: ScanInput) -> dict[str, np.ndarray]:
    """The score attacks on the audited model's plain outputs, (N,) each."""
    if inp.kind == "loss":
        return {"loss": -np.concatenate([inp.members.loss, inp.nonmembers.loss])}
    logits = np.concatenate([inp.members.plain, inp.nonmembers.plain])
    y = inp.labels
    assert y is not None  # logits come with labels (inputs._read_outputs, inputs._shared_labels)
    return {"loss": loss_scores(logits, y), "confidence": confidence_scores(logits),
            "entropy": entropy_scores(logits), "modified-entropy": modified_entropy_scores(logits, y)}


def _shadow_scores(logits: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    return {"entropy": entropy_scores(logits), "modified-entropy": modified_entropy_scores(logits, labels)}


def scan(inp: ScanInput, *, delta: float = 1e-5, folds: int = DEFAULT_FOLDS, seed: int = 0,
         confidence: float = 0.95, permutations: int = PERMUTATIONS) -> ScanResult:
    """Run every attack ``inp`` allows (module docstring) and evaluate each; the headline's
    family-wise test at level 1 − ``confidence`` with ``permutations`` permutations."""
    labels = inp.membership
    if min(inp.members.n, inp.nonmembers.n) < 2:
        raise DataError("logits_in: a scan needs at least 2 members and 2 non-members")
    fold = fold_ids(labels, folds, seed)
    metrics: dict[str, dict] = {}
    scores: dict[str, np.ndarray] = {}
    skipped: dict[str, str] = {}

    base = _target_scores(inp)
    shadow_done = set()
    if inp.shadow is not None:
        shadow_done = _shadow_attacks(inp, labels, base, metrics, scores, delta, confidence)
    for name, s in base.items():
        if name in shadow_done:
            continue
        metrics[name] = fixed_score_metrics(labels, s, fold, delta=delta, confidence=confidence)
        scores[name] = s
    if inp.kind == "logits":
        features = sorted_posteriors(np.concatenate([inp.members.plain, inp.nonmembers.plain]))
        d = classifier_decisions(features, labels, fold, seed=seed)
        metrics["classifier"] = {**_decision_metrics(labels, d, confidence),
                                 **fold_bounds(labels, d.scores, fold, delta=delta, confidence=confidence),
                                 "calibration": "cv"}
        scores["classifier"] = d.scores
    else:
        for name in ("confidence", "entropy", "modified-entropy", "classifier"):
            skipped[name] = "needs logits or probabilities (the input has losses only)"
    if inp.references is not None:
        _reference_attacks(inp, labels, fold, metrics, scores, skipped, delta, confidence)
    else:
        for name in REFERENCE_ATTACKS:
            skipped[name] = "needs reference models (reference_logits and keep)"
    if inp.shadow is None:
        skipped["shadow"] = "needs a shadow model's outputs (shadow_logits_in/out)"

    order = sorted(metrics, key=lambda a: (-_key(metrics[a], "tpr_at_0p1pct_fpr"), -_key(metrics[a], "auc")))
    metrics = {a: metrics[a] for a in order}
    groups = per_group(inp, labels, {a: scores[a] for a in order}, confidence)
    settings = {"delta": delta, "folds": int(fold.max()) + 1, "seed": seed, "confidence": confidence,
                "permutations": permutations}
    family = family_test(labels, {a: scores[a] for a in order}, trained={a: fold for a in TRAINED if a in scores},
                         alpha=round(1.0 - confidence, 12), permutations=permutations, seed=seed)
    return ScanResult(metrics, groups, {a: scores[a] for a in order}, labels, inp.describe(), skipped, settings,
                      family.to_dict())


def _key(m: dict, k: str) -> float:
    v = m.get(k)
    return float(v) if v is not None and np.isfinite(v) else -np.inf


def _shadow_attacks(inp: ScanInput, labels, base, metrics, scores, delta, confidence) -> set[str]:
    """The ML-Leaks trio exactly as ``privaudit attack`` computes it, and entropy /
    modified entropy thresholded on the shadow model. Returns the attacks done."""
    from privaudit.pipeline.attacking import run_attacks

    assert inp.shadow is not None  # called only with a shadow model (scan)
    s_in, s_out = inp.shadow
    target = (inp.members.plain, inp.members.labels, inp.nonmembers.plain, inp.nonmembers.labels)
    shadow = (s_in.plain, s_in.labels, s_out.plain, s_out.labels)
    m, arrays = run_attacks(target, shadow, delta=delta)
    for name, vals in m.items():
        metrics[name] = {**vals, "calibration": "shadow"}
        scores[name] = arrays[f"score_{name}"]
    s_logits = np.concatenate([s_in.plain, s_out.plain])
    s_labels = np.concatenate([np.ones(s_in.n, np.int8), np.zeros(s_out.n, np.int8)])
    calib = _shadow_scores(s_logits, np.concatenate([s_in.labels, s_out.labels]))
    for name, c in calib.items():
        metrics[name] = {**evaluate_scores(labels, base[name], s_labels, c, delta=delta, confidence=confidence),
                         "calibration": "shadow"}
        scores[name] = base[name]
    return set(m) | set(calib)


def _reference_attacks(inp: ScanInput, labels, fold, metrics, scores, skipped, delta, confidence) -> None:
    """LiRA, RMIA and the many-shadow attack, with leave-one-out calibration over the
    references; by cross-validation when the references are offline (none trained on an
    audited sample, as ``privaudit audit-model`` trains them) or fewer than 3 (4 in pairs)."""
    refs = inp.references
    y = inp.labels
    assert refs is not None and y is not None  # called only with references, which need labels (inputs._references)
    target_logits = np.concatenate([inp.members.logits, inp.nonmembers.logits])
    own_pop = refs.pop_logits is None
    target = compute_features(target_logits, y)
    ref_feats = compute_features(refs.logits, y)
    if own_pop:
        target_pop, ref_pop, pop_keep = target, ref_feats, refs.keep
    else:  # a population comes whole (inputs._population)
        assert refs.pop_logits is not None and refs.target_pop_logits is not None and refs.pop_labels is not None
        target_pop = compute_features(refs.target_pop_logits, refs.pop_labels)
        ref_pop, pop_keep = compute_features(refs.pop_logits, refs.pop_labels), None
    done = []
    offline_only = not refs.keep.any()  # references that never trained on an audited sample
    for name in REFERENCE_ATTACKS:
        if offline_only and ATTACKS[name].needs_in:
            skipped[name] = "needs references trained on some of the audited samples (these are all OUT: offline)"
            continue
        try:
            s = scores_from_features(target, target_pop, target_logits[:, 0], y, ref_feats, ref_pop, refs.keep,
                                     attacks=(name,), ref_pop_keep=pop_keep)[name]
        except ValueError as exc:
            skipped[name] = brief(exc)
            continue
        scores[name] = s
        done.append(name)
    if not done:
        return
    paired = refs.paired
    if offline_only or len(refs.keep) < (4 if paired else 3):
        # no reference has members among the audited samples to be attacked with the others
        # (offline references), or too few references: as the score attacks on the outputs
        for name in done:
            metrics[name] = fixed_score_metrics(labels, scores[name], fold, delta=delta, confidence=confidence)
        return
    try:
        _, loo = leave_one_out(refs.logits, refs.pop_logits, refs.keep, y, refs.pop_labels, attacks=tuple(done),
                               delta=delta, confidence=confidence, paired=paired)
    except ValueError as exc:  # a reference left out leaves a sample without OUT models
        for name in done:
            skipped[name] = f"leave-one-out calibration failed: {brief(exc)}"
            scores.pop(name)
        return
    calib_labels = refs.keep.astype(int).ravel()
    for name in done:
        metrics[name] = {**evaluate_scores(labels, scores[name], calib_labels, loo[name].ravel(), delta=delta,
                                           confidence=confidence), "calibration": "references"}


def per_group(inp: ScanInput, labels: np.ndarray, scores: dict[str, np.ndarray], confidence: float) -> pd.DataFrame:
    """AUC with its DeLong interval per class and per slice, for every attack; a group
    with no member or no non-member is left out (its AUC is undefined)."""
    groupings = []
    if inp.labels is not None:
        groupings.append(("class", inp.labels.astype(str)))
    if inp.slices is not None:
        groupings.append(("slice", inp.slices))
    rows = []
    for grouping, values in groupings:
        for g in sorted(np.unique(values), key=_natural):
            sel = values == g
            n_in, n_out = int(labels[sel].sum()), int((labels[sel] == 0).sum())
            if n_in == 0 or n_out == 0:
                continue
            for attack, s in scores.items():
                auc, lo, hi = auc_interval(labels[sel], s[sel], confidence)
                rows.append({"attack": attack, "grouping": grouping, "group": str(g), "members": n_in,
                             "non_members": n_out, "auc": auc, "auc_lo": lo, "auc_hi": hi})
    return pd.DataFrame(rows, columns=["attack", "grouping", "group", "members", "non_members", "auc", "auc_lo",
                                       "auc_hi"])


def _natural(v: str):
    return (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v)
