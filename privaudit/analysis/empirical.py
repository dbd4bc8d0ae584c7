"""Empirical lower bounds on differential-privacy ε from attack outcomes (docs/methods/d-attacks.md D).

Conventions as in :mod:`privaudit.analysis.metrics`: ``labels`` (N,) with 1 = member (the positive
class), 0 = non-member; ``scores`` (N,) with higher = more likely a member; an attack at
``threshold`` predicts "member" iff score >= threshold.

Two kinds of bound:

- ROC-based (Jagielski, Ullman, Oprea, *Auditing Differentially Private Machine Learning*,
  NeurIPS 2020; Nasr et al., *Adversary Instantiation*, S&P 2021): any test between the
  two neighbouring inputs of an (ε, δ)-DP mechanism has FPR + e^ε·FNR ≥ 1 − δ and
  FNR + e^ε·FPR ≥ 1 − δ; Clopper–Pearson upper bounds on FPR and FNR turn this into an ε
  lower bound that holds with a stated confidence. The counts must come from independent
  trials of the mechanism on a fixed pair of neighbours (e.g. one canary per training run,
  or the LiRA-style "each sample in half of the models" game); applied to many samples of
  one model it is the usual heuristic, not a proof.
- One training run (Steinke, Nasr, Jagielski, *Privacy Auditing with One (1) Training Run*,
  NeurIPS 2023): m canaries, each included independently with probability ½, r guesses,
  v correct.

All bounds are "with probability ≥ confidence over the randomness of the experiment, the
mechanism is not (ε', δ)-DP for any ε' below the returned value".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt
from scipy.special import betaincinv, expit, ndtr, ndtri
from scipy.stats import binom

from privaudit.analysis.metrics import check_scores as _check
from privaudit.analysis.metrics import roc_points

#: default number of label-free candidate thresholds of the Bonferroni bounds
#: (:func:`epsilon_lower_bound_bonferroni`, :func:`privaudit.analysis.gdp.gdp_lower_bound_bonferroni`)
BONFERRONI_CANDIDATES = 100


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return float(confidence)


def _check_delta(delta: float) -> float:
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta}")
    return float(delta)


def _counts(k: npt.ArrayLike, n: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)) or np.any(n != np.round(n)):
        raise ValueError("need integer counts with 0 <= k <= n and n >= 1")
    return k, n


def _cp_lower(k: np.ndarray, n: np.ndarray, level: float) -> np.ndarray:
    """One-sided Clopper–Pearson lower bound: P[p >= bound] >= level; 0 when k = 0."""
    safe_k = np.maximum(k, 1.0)
    return np.where(k == 0, 0.0, betaincinv(safe_k, n - safe_k + 1.0, 1.0 - level))


def _cp_upper(k: np.ndarray, n: np.ndarray, level: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound: P[p <= bound] >= level; 1 when k = n.

    For k < n it is the ``level`` quantile of Beta(k + 1, n − k), which is > 0 for every
    finite n (k = 0 gives 1 − (1 − level)^(1/n)).

    Many counts out of one n (every candidate threshold of :func:`best_threshold`) are looked up
    in the bounds of k = 0..n, computed once per (n, level): the same values, elementwise.
    """
    if np.ndim(n) == 0 and np.size(k) > 16 and np.size(k) * 8 >= n:
        return _cp_upper_table(int(n), float(level))[np.asarray(k, dtype=np.int64)]
    safe_k = np.minimum(k, n - 1.0)
    return np.where(k == n, 1.0, betaincinv(safe_k + 1.0, n - safe_k, level))


@functools.lru_cache(maxsize=64)
def _cp_upper_table(n: int, level: float) -> np.ndarray:
    """:func:`_cp_upper` of k = 0, 1, ..., n out of ``n`` (read-only)."""
    table = _cp_upper(np.arange(n + 1, dtype=np.float64), np.full(n + 1, float(n)), level)
    table.flags.writeable = False
    return table


@overload
def clopper_pearson(k: float, n: float, confidence: float = 0.95) -> tuple[float, float]: ...


@overload
def clopper_pearson(k: npt.ArrayLike, n: npt.ArrayLike,
                    confidence: float = 0.95) -> tuple[np.ndarray | float, np.ndarray | float]: ...


def clopper_pearson(k: npt.ArrayLike, n: npt.ArrayLike,
                    confidence: float = 0.95) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Two-sided exact (Clopper–Pearson, 1934) confidence interval of a binomial proportion.

    With α = 1 − confidence: lo = Beta(α/2; k, n − k + 1) quantile (0 if k = 0), hi =
    Beta(1 − α/2; k + 1, n − k) quantile (1 if k = n). Same as
    ``scipy.stats.binomtest(k, n).proportion_ci(confidence, method="exact")``.

    ``k`` successes out of ``n`` trials, scalars or arrays that broadcast; returns
    ``(lo, hi)`` as floats for scalar input, else arrays of the broadcast shape.
    """
    confidence = _check_confidence(confidence)
    k_arr, n_arr = _counts(k, n)
    k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    level = 1.0 - (1.0 - confidence) / 2.0
    lo, hi = _cp_lower(k_arr, n_arr, level), _cp_upper(k_arr, n_arr, level)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def tpr_at_fpr_with_ci(labels: np.ndarray, scores: np.ndarray, max_fpr: float,
                       confidence: float = 0.95) -> dict[str, float]:
    """Largest TPR of a threshold with FPR ≤ ``max_fpr``, with its Clopper–Pearson interval.

    Same threshold set and convention as :func:`privaudit.analysis.metrics.tpr_at_fpr` (every
    distinct score, plus +inf = "predict no member"; member iff score >= threshold); among
    thresholds with the largest TPR, the one with the smallest FPR is reported.

    Returns ``{"tpr", "lo", "hi", "threshold", "fpr"}``: ``lo``/``hi`` are the two-sided
    Clopper–Pearson interval at ``confidence`` for the TPR at that threshold, from TP out
    of the number of members (the interval treats the threshold as fixed; it was chosen on
    the same data, so it is slightly optimistic for the chosen operating point).
    """
    labels, scores = _check(labels, scores)
    confidence = _check_confidence(confidence)
    fpr, tpr, thresholds = roc_points(labels, scores)
    allowed = np.flatnonzero(fpr <= max_fpr + 1e-12)
    best = allowed[np.argmax(tpr[allowed])]  # first maximum = smallest FPR (fpr is sorted)
    n_pos = int(labels.sum())
    threshold = float(thresholds[best])
    tp = int(np.sum(scores[labels == 1] >= threshold))
    lo, hi = clopper_pearson(tp, n_pos, confidence)
    return {"tpr": tp / n_pos, "lo": lo, "hi": hi, "threshold": threshold, "fpr": float(fpr[best])}


def _epsilon_from_counts(fp: npt.ArrayLike, n_neg: npt.ArrayLike, fn: npt.ArrayLike, n_pos: npt.ArrayLike, delta: float,
                        confidence: float) -> np.ndarray:
    """ε lower bound from false-positive and false-negative counts (arrays broadcast)."""
    # Union bound: each one-sided upper bound fails with probability ≤ (1 − confidence)/2.
    level = 1.0 - (1.0 - confidence) / 2.0
    fpr_hi = _cp_upper(np.asarray(fp, dtype=np.float64), np.asarray(n_neg, dtype=np.float64), level)
    fnr_hi = _cp_upper(np.asarray(fn, dtype=np.float64), np.asarray(n_pos, dtype=np.float64), level)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps1 = np.log((1.0 - delta - fpr_hi) / fnr_hi)
        eps2 = np.log((1.0 - delta - fnr_hi) / fpr_hi)
    eps1 = np.where(1.0 - delta - fpr_hi > 0, eps1, 0.0)
    eps2 = np.where(1.0 - delta - fnr_hi > 0, eps2, 0.0)
    return np.maximum(np.maximum(eps1, eps2), 0.0)


def epsilon_lower_bound(
    labels: np.ndarray, scores: np.ndarray, threshold: float, *, delta: float = 0.0, confidence: float = 0.95
) -> float:
    """Lower bound on ε from the attack "member iff score >= threshold", holding w.p. ≥ confidence.

    With FP false positives among n₀ non-members and FN false negatives among n₁ members,
    FPR_hi and FNR_hi are one-sided Clopper–Pearson upper bounds at level 1 − α/2 each
    (α = 1 − confidence; by a union bound both hold with probability ≥ 1 − α). If the
    mechanism were (ε, δ)-DP, FPR + e^ε·FNR ≥ 1 − δ and FNR + e^ε·FPR ≥ 1 − δ (Kairouz,
    Oh, Viswanath 2015, hypothesis-testing view of DP), so

        ε ≥ max( ln((1 − δ − FPR_hi)/FNR_hi), ln((1 − δ − FNR_hi)/FPR_hi), 0 ),

    a term counting as 0 when its numerator is ≤ 0. The upper bounds are never 0 for finite
    counts (k = 0 gives 1 − (α/2)^(1/n)), so the bound is finite.

    ``threshold`` must not be chosen on these labels and scores (that voids the
    confidence statement); use :func:`best_threshold` on other data.
    """
    labels, scores = _check(labels, scores)
    delta, confidence = _check_delta(delta), _check_confidence(confidence)
    pred = scores >= threshold
    fp = int(np.sum(pred & (labels == 0)))
    fn = int(np.sum(~pred & (labels == 1)))
    n_pos = int(labels.sum())
    return float(_epsilon_from_counts(fp, labels.size - n_pos, fn, n_pos, delta, confidence))


def best_threshold(labels: np.ndarray, scores: np.ndarray, *, delta: float = 0.0, confidence: float = 0.95) -> float:
    """The threshold that maximises :func:`epsilon_lower_bound` on these (calibration) data.

    Contract: a bound is valid only on data that did not choose its threshold. Choose the
    threshold here on calibration data (e.g. the scores of other pool / reference models
    than the evaluated one, or a held-out half of the trials), then call
    :func:`epsilon_lower_bound` with it on the evaluated model's data.

    Candidates are every distinct score and +inf (predict no member); ties in the bound are
    broken towards the largest threshold (fewest predicted members). Returns a float
    (possibly inf, e.g. when no threshold gives a positive bound).
    """
    labels, scores = _check(labels, scores)
    delta, confidence = _check_delta(delta), _check_confidence(confidence)
    cand = np.append(np.unique(scores), np.inf)  # ascending
    pos, neg = _split(labels, scores)
    fp, fn = _errors_at(pos, neg, cand)
    eps = _epsilon_from_counts(fp, neg.size, fn, pos.size, delta, confidence)
    return float(cand[_last_argmax(eps)])


def _split(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted member scores, sorted non-member scores)."""
    return np.sort(scores[labels == 1]), np.sort(scores[labels == 0])


def _errors_at(pos: np.ndarray, neg: np.ndarray, thresholds: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(FP, FN) at each threshold, from sorted member and non-member scores (member iff >= t)."""
    fn = np.searchsorted(pos, thresholds, side="left")             # members with score < t
    fp = neg.size - np.searchsorted(neg, thresholds, side="left")  # non-members with score >= t
    return fp, fn


def _last_argmax(values: npt.ArrayLike) -> int:
    """The index of the largest value, the last one among ties (thresholds ascending: the
    largest threshold, fewest predicted members)."""
    flat = np.atleast_1d(np.asarray(values))
    return flat.size - 1 - int(np.argmax(flat[::-1]))


def bonferroni_thresholds(scores: npt.ArrayLike, candidates: int = BONFERRONI_CANDIDATES) -> np.ndarray:
    """The label-free candidate thresholds of the Bonferroni bounds (:func:`epsilon_lower_bound_bonferroni`,
    :func:`privaudit.analysis.gdp.gdp_lower_bound_bonferroni`): quantiles of the pooled ``scores`` at
    ``candidates`` levels spaced evenly in probit scale between 5/N and 1 − 5/N (N scores), so
    that both tails, where a strong attack's best threshold lies, are covered as finely as the
    middle; duplicates (ties) dropped, ascending.
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    t = int(candidates)
    if t != candidates or t < 1:
        raise ValueError(f"candidates must be an integer >= 1 (got {candidates})")
    edge = min(0.5, 5.0 / scores.size)
    z = ndtri(edge)
    levels = ndtr(np.linspace(z, -z, t)) if t > 1 else np.array([0.5])
    return np.unique(np.quantile(scores, levels, method="inverted_cdf"))


@dataclass(frozen=True)
class CandidateCounts:
    """The errors of every label-free candidate threshold on one data set: ``thresholds`` (T,)
    ascending (:func:`bonferroni_thresholds`), ``fp`` and ``fn`` (T,) the false positives
    among ``n_neg`` non-members and false negatives among ``n_pos`` members at each, and
    ``per_candidate`` the confidence each candidate's bound is taken at, 1 − (1 − confidence)/T
    (Bonferroni: the largest of the T bounds then holds at ``confidence``)."""

    thresholds: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    n_neg: int
    n_pos: int
    per_candidate: float

    def fpr(self, i: int) -> float:
        return int(self.fp[i]) / self.n_neg

    def fnr(self, i: int) -> float:
        return int(self.fn[i]) / self.n_pos


def candidate_counts(labels: np.ndarray, scores: np.ndarray, *, confidence: float,
                     candidates: int = BONFERRONI_CANDIDATES) -> CandidateCounts:
    """:class:`CandidateCounts` of checked ``labels`` and ``scores`` (both classes present): the
    one candidate set that the ε and the μ Bonferroni bounds share."""
    cand = bonferroni_thresholds(scores, candidates)
    pos, neg = _split(labels, scores)
    fp, fn = _errors_at(pos, neg, cand)
    return CandidateCounts(cand, np.asarray(fp), np.asarray(fn), neg.size, pos.size,
                           1.0 - (1.0 - confidence) / cand.size)


@dataclass(frozen=True)
class EpsilonBound:
    """A Clopper–Pearson ε lower bound over label-free candidates: ``epsilon`` at ``delta``,
    ``threshold`` the candidate that gave it (member iff score >= threshold), ``candidates`` T,
    ``fpr`` and ``fnr`` the rates at that threshold on the evaluated scores, ``confidence``."""

    epsilon: float
    delta: float
    threshold: float
    candidates: int
    fpr: float
    fnr: float
    confidence: float


def epsilon_lower_bound_bonferroni(labels: np.ndarray, scores: np.ndarray, *, delta: float = 0.0,
                                   confidence: float = 0.95,
                                   candidates: int = BONFERRONI_CANDIDATES) -> EpsilonBound:
    """The (ε, δ) bound of :func:`epsilon_lower_bound` without calibration data.

    The candidate thresholds are :func:`bonferroni_thresholds` of the pooled scores, chosen
    without the labels, the same candidates as :func:`privaudit.analysis.gdp
    .gdp_lower_bound_bonferroni` (docs/methods/d-attacks.md D.6). With T distinct candidates each bound
    is :func:`epsilon_lower_bound`'s at confidence 1 − (1 − ``confidence``)/T, and the largest
    is returned (ties to the largest threshold): by the union bound, with probability
    ≥ ``confidence`` every candidate's bound holds at once, so the largest does.
    """
    labels, scores = _check(labels, scores)
    delta, confidence = _check_delta(delta), _check_confidence(confidence)
    c = candidate_counts(labels, scores, confidence=confidence, candidates=candidates)
    eps = _epsilon_from_counts(c.fp, c.n_neg, c.fn, c.n_pos, delta, c.per_candidate)
    best = _last_argmax(eps)
    return EpsilonBound(epsilon=float(np.atleast_1d(eps)[best]), delta=delta, threshold=float(c.thresholds[best]),
                        candidates=int(c.thresholds.size), fpr=c.fpr(best), fnr=c.fnr(best), confidence=confidence)


def one_run_p_value(num_guesses: int, num_correct: int, num_canaries: int, epsilon: float, delta: float = 0.0) -> float:
    """Bound on P[≥ v correct guesses] for an (ε, δ)-DP mechanism in the one-run audit.

    Steinke, Nasr, Jagielski (NeurIPS 2023): their approximate-DP main result (Section 5),
    evaluated as in the authors' code of Appendix D: with q = e^ε/(1 + e^ε) and
    f(u) = P[Binomial(r, q) ≥ u],

        P[W ≥ v] ≤ f(v) + 2·m·δ · max_{i = 1..v} (f(v − i) − f(v)) / i,

    where f(v − i) − f(v) = P[v − i ≤ Binomial(r, q) < v]. For δ = 0 it is f(v) (the
    number of correct guesses is stochastically dominated by Binomial(r, q)). Capped at 1.
    """
    r, v, m = int(num_guesses), int(num_correct), int(num_canaries)
    if not 0 <= v <= r <= m or epsilon < 0 or not 0 <= delta <= 1:
        raise ValueError("need 0 <= num_correct <= num_guesses <= num_canaries, epsilon >= 0, delta in [0, 1]")
    q = float(expit(epsilon))
    p = float(binom.sf(v - 1, r, q))
    if delta > 0 and v > 0:
        below = binom.pmf(np.arange(v - 1, -1, -1), r, q)  # pmf(v−1), pmf(v−2), ..., pmf(0)
        window = np.cumsum(below) / np.arange(1, v + 1)
        p += 2.0 * m * delta * float(window.max())
    return min(p, 1.0)


def one_run_epsilon_lower_bound(
    num_guesses: int, num_correct: int, num_canaries: int, *, delta: float = 0.0, confidence: float = 0.95
) -> float:
    """ε lower bound of the one-training-run audit (Steinke, Nasr, Jagielski, NeurIPS 2023).

    Setting: ``num_canaries`` m canaries, each included in training independently with
    probability ½; the auditor guesses in/out for ``num_guesses`` r of them (abstaining on
    the rest) and ``num_correct`` v guesses are right. The returned ε is (up to bisection
    precision, rounded down) the largest ε whose p-value :func:`one_run_p_value` is below
    1 − confidence: every ε' below it is rejected, so with probability ≥ confidence the
    mechanism is not (ε', δ)-DP. 0 when even ε = 0 is not rejected.

    δ = 0: p-value P[Binomial(r, e^ε/(1 + e^ε)) ≥ v]. δ > 0: the paper's approximate-DP
    p-value, exactly as in :func:`one_run_p_value` (Section 5's theorem for (ε, δ)-DP, as
    evaluated by the paper's Appendix D code); it is never smaller, so the bound never
    grows with δ. Note the δ term scales with 2·m·δ: m is all canaries, not only guessed.
    """
    r, v, m = int(num_guesses), int(num_correct), int(num_canaries)
    if (r, v, m) != (num_guesses, num_correct, num_canaries) or not 0 <= v <= r <= m:
        raise ValueError(f"need integers 0 <= num_correct <= num_guesses <= num_canaries, got {v}, {r}, {m}")
    delta, confidence = _check_delta(delta), _check_confidence(confidence)
    alpha = 1.0 - confidence
    if r == 0 or one_run_p_value(r, v, m, 0.0, delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(r, v, m, hi, delta) < alpha:
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:  # q = expit(ε) is 1.0 in float64 long before this
            return lo
    while hi - lo > 1e-9 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(r, v, m, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_guesses(
    scores: np.ndarray, canary_in: np.ndarray, num_guesses_pos: int, num_guesses_neg: int
) -> tuple[int, int]:
    """Guess IN for the ``num_guesses_pos`` highest scores, OUT for the ``num_guesses_neg`` lowest.

    ``scores`` (m,), higher = more likely included; ``canary_in`` (m,) bool, the true
    inclusion of each canary. Returns (r, v) = (number of guesses, number correct) for
    :func:`one_run_epsilon_lower_bound`. Ties are broken by canary index (a stable sort),
    which is independent of inclusion. The two guess sets must not overlap:
    num_guesses_pos + num_guesses_neg <= m.
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    raw = np.asarray(canary_in).ravel()
    if raw.shape != scores.shape:
        raise ValueError(f"scores {scores.shape} and canary_in {raw.shape} differ in shape")
    if not np.all((raw == 0) | (raw == 1)):
        raise ValueError("canary_in must be boolean (or 0/1)")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    k_pos, k_neg = int(num_guesses_pos), int(num_guesses_neg)
    if k_pos < 0 or k_neg < 0 or k_pos + k_neg > scores.size:
        raise ValueError(f"need 0 <= guesses and num_guesses_pos + num_guesses_neg <= {scores.size}")
    inc = raw.astype(bool)
    order = np.argsort(scores, kind="stable")  # ascending
    v_pos = int(inc[order[scores.size - k_pos :]].sum()) if k_pos else 0
    v_neg = int((~inc[order[:k_neg]]).sum())
    return k_pos + k_neg, v_pos + v_neg


def canary_tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, canary: np.ndarray, max_fpr: float,
                      confidence: float = 0.95) -> dict[str, float]:
    """The TPR on planted canaries at the population's operating point: the threshold of
    :func:`tpr_at_fpr_with_ci` (FPR ≤ ``max_fpr`` over *all* non-members, canaries among
    them), applied to the canaries that are members (``canary`` & ``labels == 1``), with its
    Clopper–Pearson interval. The worst case beside the average (Aerni, Zhang, Tramèr,
    *Evaluations of Machine Learning Privacy Defenses are Misleading*, arXiv 2404.17399).
    Returns ``{"tpr", "lo", "hi", "n"}`` (NaN without canary members)."""
    labels, scores = _check(labels, scores)
    canary = np.asarray(canary, dtype=bool)
    if canary.shape != labels.shape:
        raise ValueError(f"canary mask shape {canary.shape} differs from the labels' {labels.shape}")
    confidence = _check_confidence(confidence)
    threshold = tpr_at_fpr_with_ci(labels, scores, max_fpr, confidence)["threshold"]
    members = canary & (labels == 1)
    n = int(members.sum())
    if n == 0:
        return {"tpr": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0}
    tp = int(np.sum(scores[members] >= threshold))
    lo, hi = clopper_pearson(tp, n, confidence)
    return {"tpr": tp / n, "lo": float(lo), "hi": float(hi), "n": n}
