"""Gaussian differential privacy: μ ↔ (ε, δ), and ε lower bounds from the whole trade-off curve
(docs/methods/d-attacks.md D.6).

Conventions as in :mod:`privaudit.analysis.empirical`: ``labels`` 1 = member, 0 = non-member,
``scores`` higher = more likely a member, an attack at threshold t predicts "member" iff
score >= t. Everything is float64 and numpy; functions that take counts broadcast over arrays.

**μ-GDP and (ε, δ).** A mechanism is μ-GDP (Dong, Roth, Su, *Gaussian Differential Privacy*,
arXiv 1905.02383) when every test between two neighbouring inputs is at most as good as
telling N(0, 1) from N(μ, 1): its trade-off function (the smallest FNR at each FPR α) is at
least

    f_μ(α) = Φ(Φ⁻¹(1 − α) − μ).

A μ-GDP mechanism is (ε, δ(ε))-DP for every ε ≥ 0 with (their Corollary 2.13)

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2),                                   (1)

:func:`gdp_delta`; :func:`gdp_epsilon` solves (1) for ε at a δ, :func:`gdp_mu_for_epsilon`
for μ at an (ε, δ).

**The GDP auditing estimate** (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis,
*Tight Auditing of Differentially Private Machine Learning*, arXiv 2302.07956). A threshold t
with FP false positives among n₀ non-members and FN false negatives among n₁ members;
FPR_hi and FNR_hi are one-sided Clopper–Pearson upper bounds at level 1 − α/2 each (α =
1 − confidence; union bound), :func:`privaudit.analysis.empirical._cp_upper`. If the mechanism
were μ'-GDP, FNR ≥ f_μ'(FPR) for the true rates, i.e. μ' ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR), and the
right side falls in both rates, so with probability ≥ confidence

    μ ≥ μ_lo = max( Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi), 0 ) = max( −Φ⁻¹(FPR_hi) − Φ⁻¹(FNR_hi), 0 )  (2)

(:func:`mu_from_counts`; symmetric in the two rates, so the reversed test "non-member iff
score < t" gives the same bound, as the symmetric (ε, δ) bound of empirical.py does with its
two terms). (2) holds for *any* mechanism: it says the mechanism is not μ'-GDP for μ' < μ_lo.
The ε it is reported with, ε_lo = :func:`gdp_epsilon` (μ_lo, δ), is a lower bound on the
mechanism's ε at δ *only if its trade-off curve is Gaussian* (some f_μ): a mechanism that is
not μ'-GDP can still be (ε', δ)-DP for ε' below ε(μ', δ) when its curve has another shape.

Same counts, never looser than the (ε, δ) bound: the point (FPR_hi, FNR_hi) lies on f_{μ_lo},
and f_μ lies above the (ε(μ, δ), δ)-DP region's boundary, so FPR_hi + e^{ε_lo} FNR_hi ≥ 1 − δ,
i.e. ε_lo ≥ ln((1 − δ − FPR_hi)/FNR_hi), and likewise for the other term: at the same
threshold, counts, confidence and δ, ε_lo ≥ :func:`privaudit.analysis.empirical
.epsilon_lower_bound` always (up to root-finding precision). It can be looser in practice
only through the threshold strategy: :func:`gdp_lower_bound_bonferroni` spends confidence on
its T candidates (each bound at 1 − α/T), so with small counts, where the Clopper–Pearson
widths dominate, a calibrated (ε, δ) bound at full confidence can beat it. δ must be > 0: a
μ-GDP mechanism with μ > 0 is not ε-DP for any finite ε.

Two honest threshold strategies (a threshold chosen on the counts it is evaluated on voids the
confidence statement):

- :func:`gdp_lower_bound` (``strategy="calibration"``): t maximises μ_lo on calibration data
  (other models' scores), the bound is evaluated at that one t on the audited data.
- :func:`gdp_lower_bound_bonferroni` (``strategy="bonferroni"``): no calibration data; T
  candidate thresholds are fixed from the pooled scores without the labels, each bound at
  confidence 1 − α/T, the largest returned.

**The f-DP one-run audit** (Mahloujifar, Melis, Chaudhuri, *Auditing f-Differential Privacy in
One Run*, arXiv 2410.22235). m canaries, each included independently with probability ½
(S_j ∈ {0, 1}); from the output the auditor guesses S_j for r of them and abstains on the
rest; W correct guesses, observed v. Steinke, Nasr, Jagielski's bound
(:func:`privaudit.analysis.empirical.one_run_epsilon_lower_bound`) rejects (ε, δ)-DP; this one
rejects f-DP for a trade-off function f, here f_μ, and reports the largest μ rejected.

*The constraints.* Write g(x) = 1 − f(x) (concave, increasing) and ψ = g⁻¹; for f_μ,
g(x) = Φ(Φ⁻¹(x) + μ) and ψ(x) = Φ(Φ⁻¹(x) − μ). For neighbours P₀, P₁ (canary j out, in,
the other bits fixed) and any event E, f-DP gives P₁(E) ≤ g(P₀(E)) and, f being symmetric,
P₀(E) ≤ g(P₁(E)). Let p_k = P[W = k] (k = 0..r) and, with J a canary drawn uniformly,

    X_i = P[J guessed right, W ≥ i] = Σ_{k≥i} k p_k / m,
    Y_i = P[J guessed wrong, W ≥ i] = Σ_{k≥i} (r − k) p_k / m.

Given J and the other bits, the output event E_b = {guess on J is b, W without J ≥ i − 1}
is "right with W ≥ i" when S_J = b and "wrong with W ≥ i − 1" when S_J = 1 − b. So
X_i = E[½ P(E₀ | S_J = 0) + ½ P(E₁ | S_J = 1)] ≤ E[½ g(P(E₀ | 1)) + ½ g(P(E₁ | 0))] ≤ g(Y_{i−1})
by f-DP and concavity (Jensen, twice), i.e.

    Y_{i−1} ≥ ψ(X_i)   for i = 1..r,       and       X_0 + Y_0 = r/m.                  (3)

*The recursion.* Start from τ ∈ [0, 1] at level v: r_v = τ v/m, h_v = τ (r − v)/m, and for
i = v − 1, ..., 0

    h_i = max(h_{i+1}, ψ(r_{i+1})),      r_i = r_{i+1} + i/(r − i) · (h_i − h_{i+1}).     (4)

Claim: if the mechanism is f-DP and τ ≤ P[W ≥ v], then r_0 + h_0 ≤ r/m. Proof: moving the
mass of {W > v} down to W = v keeps (3) (for i ≤ v, X_i shrinks and Y_{i−1} grows; above v,
X_i = 0), keeps the total mass, and gives X_v = vP/m, Y_v = (r − v)P/m with P = P[W ≥ v].
Below v, Y_i − Y_{i+1} = (r − i)p_i/m and X_i − X_{i+1} = i p_i/m, so X obeys the second
half of (4) exactly and Y_i ≥ max(Y_{i+1}, ψ(X_{i+1})). With D_i = Y_i − h_i and
E_i = X_i − r_i, the invariant D_i ≥ 0, E_i ≥ i/(r − i) · D_i holds at i = v (E_v =
v(P − τ)/m, D_v = (r − v)(P − τ)/m, zero when v = r) and passes from i + 1 to i:
D_{i+1} ≥ 0 and E_{i+1} ≥ 0 give D_i ≥ 0 (ψ increases), and E_i = E_{i+1} − i/(r − i) D_{i+1}
+ i/(r − i) D_i ≥ i/(r − i) D_i as (i + 1)/(r − i − 1) ≥ i/(r − i). At i = 0,
r_0 + h_0 ≤ X_0 + Y_0 = r/m. ∎ The same comparison shows that r_0 + h_0
grows with τ and falls with μ (ψ falls with μ), and at the largest τ with r_0 + h_0 ≤ r/m
the recursion's own increments p_i = m(h_i − h_{i+1})/(r − i) are a distribution meeting (3):
the bound is the exact maximum of P[W ≥ v] over (3) (this is the paper's algorithm for k = 2
labels, in our notation).

:func:`fdp_one_run_p_value` returns that maximum, sup{τ : r_0 + h_0 ≤ r/m}, a bound on
P[W ≥ v] for every f_μ-DP mechanism; :func:`fdp_one_run_mu_lower_bound` the largest μ whose
test at τ = 1 − confidence gives r_0 + h_0 > r/m (every μ' below it is rejected: with
probability ≥ confidence the mechanism is not μ'-GDP), 0 when μ = 0 is not rejected; and
:func:`fdp_one_run_epsilon_lower_bound` its ε at δ by (1), again assuming a Gaussian curve.

*Against Steinke et al.* For m = 1,000 canaries, r = 100..500 guesses, v/r = 0.7..0.95,
δ = 1e-5 and 95 % confidence, the f-DP ε is at least Steinke et al.'s everywhere (tested),
e.g. (r, v) = (100, 70): 0.653 against 0.469; (100, 95): 3.323 against 2.165; (500, 350):
1.194 against 0.683; (500, 475): 4.569 against 2.598. At δ = 1e-3 Steinke's δ term 2mδ = 2
swamps its binomial tail and it rejects nothing at (100, 80), where the f-DP ε is 0.93.
Where it is not larger: just above chance with few guesses, e.g. (100, 60): 0.044 against
0.050, and (300, 165): 0 against 0.003. At μ = 0, constraints (3) allow a larger tail than
Binomial(r, ½), which Steinke's bound uses exactly (they forget that the canaries are
independent: at (10, 8) the f-DP p-value is 0.058, the binomial tail 0.055), so the f-DP test
has less power at the edge of rejection. Both are bounds under their own null: Steinke's ε
holds for any (ε, δ)-DP mechanism, the f-DP ε only for a Gaussian trade-off curve (its μ for
any mechanism).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr, ndtri

# the label-free candidates, shared with the Clopper–Pearson ε bound, live in empirical.py
from privaudit.analysis.empirical import BONFERRONI_CANDIDATES as BONFERRONI_CANDIDATES
from privaudit.analysis.empirical import (
    _check_confidence,
    _counts,
    _cp_upper,
    _errors_at,
    _last_argmax,
    _split,
    candidate_counts,
)
from privaudit.analysis.empirical import bonferroni_thresholds as bonferroni_thresholds
from privaudit.analysis.metrics import check_scores

# ---------------------------------------------------------------- μ ↔ (ε, δ)


def _check_gdp_delta(delta: float) -> float:
    if not (isinstance(delta, (int, float, np.floating)) and math.isfinite(delta) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1) (got {delta}): a mu-GDP mechanism is not eps-DP at delta = 0")
    return float(delta)


@overload
def gdp_delta(epsilon: float, mu: float) -> float: ...


@overload
def gdp_delta(epsilon: npt.ArrayLike, mu: npt.ArrayLike) -> np.ndarray | float: ...


def gdp_delta(epsilon: npt.ArrayLike, mu: npt.ArrayLike) -> np.ndarray | float:
    """δ(ε) of a μ-GDP mechanism, formula (1) of the module docstring, with the second term
    as exp(ε + log Φ(·)) so that it stays finite for large ε. Broadcasts over arrays (a float
    for scalars); μ = 0 (perfect privacy) gives 0."""
    eps = np.asarray(epsilon, dtype=np.float64)
    mu_arr = np.asarray(mu, dtype=np.float64)
    safe = np.where(mu_arr > 0, mu_arr, 1.0)
    a, b = -eps / safe + safe / 2, -eps / safe - safe / 2
    out = np.where(mu_arr > 0, ndtr(a) - np.exp(eps + log_ndtr(b)), 0.0)
    return float(out) if out.ndim == 0 else out


def _gdp_epsilon(mu: float, delta: float) -> float:
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be finite and >= 0 (got {mu})")
    if mu == 0.0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


@overload
def gdp_epsilon(mu: float, delta: float) -> float: ...


@overload
def gdp_epsilon(mu: np.ndarray | float, delta: float) -> np.ndarray | float: ...


def gdp_epsilon(mu: np.ndarray | float, delta: float) -> np.ndarray | float:
    """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for a μ-GDP mechanism (0 for μ = 0).

    ``mu`` a float or an array (solved element by element); ``delta`` in (0, 1)."""
    delta = _check_gdp_delta(delta)
    if np.ndim(mu) == 0:
        return _gdp_epsilon(float(mu), delta)
    flat = np.asarray(mu, dtype=np.float64)
    return np.array([_gdp_epsilon(float(m), delta) for m in flat.ravel()]).reshape(flat.shape)


def gdp_mu_for_epsilon(epsilon: float, delta: float) -> float:
    """The μ whose GDP guarantee gives exactly ``epsilon`` at ``delta`` (ε increases with μ)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0 (got {epsilon})")
    delta = _check_gdp_delta(delta)
    lo, hi = 1e-6, 1.0
    while gdp_epsilon(hi, delta) < epsilon:
        hi *= 2
    return float(brentq(lambda m: gdp_epsilon(m, delta) - epsilon, lo, hi, xtol=1e-14, rtol=1e-12))


# ---------------------------------------------------------------- the GDP auditing estimate


@overload
def mu_from_counts(fp: float, n_neg: float, fn: float, n_pos: float, confidence: float = 0.95) -> float: ...


@overload
def mu_from_counts(fp: npt.ArrayLike, n_neg: npt.ArrayLike, fn: npt.ArrayLike, n_pos: npt.ArrayLike,
                   confidence: float = 0.95) -> np.ndarray | float: ...


def mu_from_counts(fp: npt.ArrayLike, n_neg: npt.ArrayLike, fn: npt.ArrayLike, n_pos: npt.ArrayLike,
                   confidence: float = 0.95) -> np.ndarray | float:
    """μ_lo of formula (2): the lower bound on μ from FP false positives among ``n_neg``
    non-members and FN false negatives among ``n_pos`` members, holding with probability
    ≥ ``confidence`` for a threshold fixed before the counts were drawn.

    Integer counts, scalars or arrays that broadcast; a float for scalar input, else an array.
    Never NaN: a rate whose upper bound is 1 gives μ_lo = 0."""
    confidence = _check_confidence(confidence)
    fp, n_neg = _counts(fp, n_neg)
    fn, n_pos = _counts(fn, n_pos)
    level = 1.0 - (1.0 - confidence) / 2.0
    fpr_hi = _cp_upper(fp, n_neg, level)
    fnr_hi = _cp_upper(fn, n_pos, level)
    with np.errstate(invalid="ignore"):
        mu = -ndtri(fpr_hi) - ndtri(fnr_hi)  # ndtri(1) = inf, and both rates are > 0
    mu = np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))
    return float(mu) if mu.ndim == 0 else mu


@dataclass(frozen=True)
class GDPBound:
    """One GDP auditing estimate: ``mu`` the lower bound on μ (formula (2)), ``epsilon`` its ε
    at ``delta`` (valid for a Gaussian trade-off curve), ``threshold`` the attack's threshold
    (member iff score >= threshold), ``strategy`` "calibration" or "bonferroni", ``candidates``
    the number of thresholds the confidence was split over (1 for calibration), ``fpr`` and
    ``fnr`` the rates achieved on the evaluated scores at the threshold, ``confidence``.
    Every field is a plain str, int or finite float: :meth:`to_dict` is JSON as it stands."""

    mu: float
    epsilon: float
    delta: float
    threshold: float
    strategy: str
    candidates: int
    fpr: float
    fnr: float
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def metrics(self) -> dict[str, float]:
        """The bound as an attack's metrics: ``gdp_mu``, ``gdp_epsilon``, ``gdp_threshold`` and
        ``gdp_fpr`` (the FPR the threshold reached on the evaluated scores)."""
        return {"gdp_mu": self.mu, "gdp_epsilon": self.epsilon, "gdp_threshold": self.threshold,
                "gdp_fpr": self.fpr}


def _check_set(labels: npt.ArrayLike, scores: npt.ArrayLike, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated (labels, scores) of one data set, errors naming the set and what is missing."""
    raw = np.asarray(labels).ravel()
    if raw.size == 0:
        raise ValueError(f"the {what} data are empty: need members and non-members with their scores")
    if raw.shape == np.asarray(scores).ravel().shape and np.all((raw == 0) | (raw == 1)):
        n_pos = int(np.sum(raw == 1))
        if n_pos == 0 or n_pos == raw.size:
            missing = "members (label 1)" if n_pos == 0 else "non-members (label 0)"
            raise ValueError(f"the {what} data have no {missing}: the GDP bound needs both classes")
    try:
        return check_scores(raw, scores)
    except ValueError as exc:
        raise ValueError(f"the {what} data: {exc}") from None


def _bound(labels: np.ndarray, scores: np.ndarray, threshold: float, *, delta: float, confidence: float, strategy: str,
           candidates: int, per_candidate: float) -> GDPBound:
    pos, neg = _split(labels, scores)
    fp, fn = _errors_at(pos, neg, threshold)
    mu = mu_from_counts(int(fp), neg.size, int(fn), pos.size, per_candidate)
    return GDPBound(mu=mu, epsilon=gdp_epsilon(mu, delta), delta=delta, threshold=float(threshold),
                    strategy=strategy, candidates=int(candidates), fpr=int(fp) / neg.size,
                    fnr=int(fn) / pos.size, confidence=confidence)


def gdp_at_threshold(labels: npt.ArrayLike, scores: npt.ArrayLike, threshold: float, *, delta: float,
                     confidence: float = 0.95) -> GDPBound:
    """Formula (2) at one ``threshold`` that nothing in (``labels``, ``scores``) chose (``strategy``
    "fixed", ``candidates`` 1): a threshold set without data, or decisions made elsewhere (0/1
    scores at 0.5). ValueError (one line) on bad input."""
    confidence = _check_confidence(confidence)
    delta = _check_gdp_delta(delta)
    labels, scores = _check_set(labels, scores, "evaluated")
    return _bound(labels, scores, float(threshold), delta=delta, confidence=confidence, strategy="fixed",
                  candidates=1, per_candidate=confidence)


def gdp_lower_bound(labels: npt.ArrayLike, scores: npt.ArrayLike, calib_labels: npt.ArrayLike,
                    calib_scores: npt.ArrayLike, *, delta: float,
                    confidence: float = 0.95) -> GDPBound:
    """The GDP auditing estimate with a threshold calibrated on other data (``strategy``
    "calibration", ``candidates`` 1).

    The threshold is the distinct calibration score that maximises μ_lo (formula (2)) on the
    calibration data, with the calibration rates scaled to the evaluated data's class sizes
    (rounded FPR·n₀ and FNR·n₁), so the choice weighs the Clopper–Pearson widths that the
    evaluated bound will have; ties go to the largest threshold. The bound is then formula (2)
    at that one threshold on (``labels``, ``scores``) at the full ``confidence``: valid when
    the calibration data (e.g. other pool or reference models' scores) are independent of the
    evaluated ones. ValueError (one line, naming the set and what is missing) on bad input.
    """
    confidence = _check_confidence(confidence)
    delta = _check_gdp_delta(delta)
    labels, scores = _check_set(labels, scores, "evaluated")
    calib_labels, calib_scores = _check_set(calib_labels, calib_scores, "calibration")
    cand = np.unique(calib_scores)  # ascending
    c_pos, c_neg = _split(calib_labels, calib_scores)
    fp, fn = _errors_at(c_pos, c_neg, cand)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    fp_scaled = np.rint(fp * (n_neg / c_neg.size))
    fn_scaled = np.rint(fn * (n_pos / c_pos.size))
    best = _last_argmax(mu_from_counts(fp_scaled, n_neg, fn_scaled, n_pos, confidence))
    return _bound(labels, scores, float(cand[best]), delta=delta, confidence=confidence,
                  strategy="calibration", candidates=1, per_candidate=confidence)


def gdp_lower_bound_bonferroni(labels: npt.ArrayLike, scores: npt.ArrayLike, *, delta: float, confidence: float = 0.95,
                               candidates: int = BONFERRONI_CANDIDATES) -> GDPBound:
    """The GDP auditing estimate without calibration data (``strategy`` "bonferroni").

    The candidate thresholds are :func:`~privaudit.analysis.empirical.bonferroni_thresholds` of
    the pooled scores (:func:`~privaudit.analysis.empirical.candidate_counts`, shared with the
    Clopper–Pearson ε bound :func:`~privaudit.analysis.empirical.epsilon_lower_bound_bonferroni`): chosen
    without the labels (the label-free part of the data; strictly, Clopper–Pearson assumes a
    threshold fixed in advance, and a quantile of the pooled scores moves by at most one
    order statistic when one sample changes, which tests/test_gdp_audit.py's coverage test
    measures to be harmless). With T the number of distinct candidates, each bound is
    formula (2) at confidence 1 − (1 − ``confidence``)/T (Bonferroni), and the largest is
    returned (ties to the largest threshold), so the maximum holds at ``confidence``.

    Default T = 100: the price of T grows only like sqrt(2 ln T) (the one-sided normal
    quantile at 0.025/T is 3.5 at T = 100 against 2.0 for one threshold), while 100
    probit-spaced quantiles step by 0.07 standard deviations down to tails of about 5
    samples, so a curve's best threshold is never far from a candidate. Measured on 5,000 +
    5,000 samples: on an exactly Gaussian curve (μ = 1, flat in the threshold, 400 sets) the
    mean μ_lo is 0.926 with the median alone, 0.905 with T = 10, 0.893 with T = 100, 0.884
    with T = 300; on a tail-heavy curve (3 % of members shifted by 6, the rest not at all;
    100 sets) it is 0.58 with T = 10, 0.83 with 30, 0.88 with 100 and 0.86 with 300. T = 100
    gives up about 1 % where the grid does not matter and gains most where it does.
    """
    confidence = _check_confidence(confidence)
    delta = _check_gdp_delta(delta)
    labels, scores = _check_set(labels, scores, "evaluated")
    c = candidate_counts(labels, scores, confidence=confidence, candidates=candidates)
    best = _last_argmax(mu_from_counts(c.fp, c.n_neg, c.fn, c.n_pos, c.per_candidate))
    return _bound(labels, scores, float(c.thresholds[best]), delta=delta, confidence=confidence,
                  strategy="bonferroni", candidates=c.thresholds.size, per_candidate=c.per_candidate)


# ---------------------------------------------------------------- the f-DP one-run audit


def _check_one_run(num_guesses: float, num_correct: float, num_canaries: float) -> tuple[int, int, int]:
    r, v, m = int(num_guesses), int(num_correct), int(num_canaries)
    if (r, v, m) != (num_guesses, num_correct, num_canaries) or not 0 <= v <= r <= m or m < 1:
        raise ValueError("need integers 0 <= num_correct <= num_guesses <= num_canaries and num_canaries >= 1, "
                         f"got {num_correct}, {num_guesses}, {num_canaries}")
    return r, v, m


def _fdp_excess(r: int, v: int, m: int, tau: float, mu: float) -> float:
    """m·(r_0 + h_0) − r of recursion (4) started from ``tau``, for f_μ: > 0 means that
    P[W ≥ v] ≥ tau is impossible for a μ-GDP mechanism."""
    if v == 0 or r == 0:
        return tau * r - r  # (4) has no step: r_0 + h_0 = τ r/m
    # in units of 1/m: R = m r_i, H = m h_i; ψ acts on the probabilities R/m
    big_r, big_h = tau * v, tau * (r - v)
    for i in range(v - 1, -1, -1):
        psi = m * float(ndtr(ndtri(min(big_r / m, 1.0)) - mu))
        if psi <= big_h:  # h and r stay as they are from here down (module docstring)
            break
        big_r += i / (r - i) * (psi - big_h)
        big_h = psi
        if big_r + big_h > r:  # both only grow: already rejected
            break
    return big_r + big_h - r


def fdp_one_run_p_value(num_guesses: int, num_correct: int, num_canaries: int, mu: float) -> float:
    """Bound on P[≥ v correct guesses] for a μ-GDP mechanism in the one-run audit (module
    docstring): the largest τ whose recursion (4) keeps r_0 + h_0 ≤ r/m, the exact maximum of
    P[W ≥ v] under constraints (3). ``num_guesses`` r, ``num_correct`` v, ``num_canaries``
    m, ``mu`` ≥ 0. 1 when v = 0; never below the binomial tail P[Bin(r, ½) ≥ v]. Bisection
    to 1e-12, rounded up."""
    r, v, m = _check_one_run(num_guesses, num_correct, num_canaries)
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be finite and >= 0 (got {mu})")
    if v == 0 or _fdp_excess(r, v, m, 1.0, mu) <= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        if _fdp_excess(r, v, m, mid, mu) > 0:
            hi = mid
        else:
            lo = mid
    return hi  # the maximum lies in [lo, hi]: the upper end keeps the bound on the safe side


def fdp_one_run_mu_lower_bound(num_guesses: int, num_correct: int, num_canaries: int, *,
                               confidence: float = 0.95) -> float:
    """The f-DP one-run lower bound on μ (Mahloujifar, Melis, Chaudhuri; module docstring).

    m = ``num_canaries`` canaries each included with probability ½, r = ``num_guesses``
    guesses (a number fixed before the guesses are scored, as :func:`privaudit.analysis
    .empirical.one_run_guesses` makes), v = ``num_correct`` right. Every μ' below the returned
    value is rejected at level 1 − ``confidence`` (recursion (4) from τ = 1 − confidence ends
    above r/m): with probability ≥ confidence the mechanism is not μ'-GDP. 0 when μ = 0 is not
    rejected. Monotone: the test's statistic falls with μ. Bisection, rounded down, to 1e-9.
    """
    r, v, m = _check_one_run(num_guesses, num_correct, num_canaries)
    confidence = _check_confidence(confidence)
    tau = 1.0 - confidence
    if r == 0 or _fdp_excess(r, v, m, tau, 0.0) <= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while _fdp_excess(r, v, m, tau, hi) > 0:
        lo, hi = hi, 2.0 * hi
        if hi > 64.0:  # Φ⁻¹ of a float64 probability is within ±38.5: nothing changes beyond
            return lo
    while hi - lo > 1e-9 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if _fdp_excess(r, v, m, tau, mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo


def fdp_one_run_epsilon_lower_bound(num_guesses: int, num_correct: int, num_canaries: int, *, delta: float,
                                    confidence: float = 0.95) -> float:
    """ε at ``delta`` (formula (1)) of :func:`fdp_one_run_mu_lower_bound`: a lower bound on the
    mechanism's ε if its trade-off curve is Gaussian."""
    delta = _check_gdp_delta(delta)
    return gdp_epsilon(fdp_one_run_mu_lower_bound(num_guesses, num_correct, num_canaries,
                                                  confidence=confidence), delta)
