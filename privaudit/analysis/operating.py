"""Operating points a reader can trust: thresholds set without the target's labels, PPV at a
membership prior, and how stable the most exposed members are across seeds (docs/methods/d-attacks.md D.9).

Pure functions over NumPy arrays, float64 throughout. Conventions as in
:mod:`privaudit.analysis.metrics`: ``labels`` (N,) with 1 = member, 0 = non-member; ``scores``
(N,) with higher = more likely a member; an attack at ``threshold`` predicts "member" iff
score >= threshold. An undefined number is ``None``, never NaN.

**TPR at a calibrated FPR** (:func:`tpr_at_calibrated_fpr`). The threshold is set on
calibration data (reference or shadow models' scores with their known membership, or
calibration non-member scores alone), never with the evaluated model's membership labels:
with n calibration non-members and k = ⌊f·n⌋ false positives allowed at the target FPR f, it
is the smallest calibration non-member score t with #{calibration non-members ≥ t} ≤ k (+inf
when ties leave none): without ties, the k-th largest calibration non-member score. For
exchangeable, continuous calibration and evaluated non-member scores, a new non-member then
scores ≥ t with probability exactly k/(n + 1) ≤ f (the conformal quantile), so the FPR on the
evaluated data is f in expectation up to the 1/n grid, and the reported TPR is a proportion at
a threshold that the evaluated labels did not choose: its Clopper–Pearson interval (Clopper &
Pearson 1934, :func:`privaudit.analysis.empirical.clopper_pearson`) is honest, which it is not
when the threshold is tuned on the same labels (Jebreel, Khalil, Sánchez, Domingo-Ferrer,
*Revisiting the LiRA Membership Inference Attack Under Realistic Assumptions*, PoPETs 2026,
arXiv:2603.07567). The achieved FPR on the evaluated non-members is reported with its own
Clopper–Pearson interval.

**When the data can state an FPR.** n non-members can state an FPR f only if the operating
point admits at least one false positive: ⌊f·n⌋ ≥ m, m = ``min_false_positives`` (default 1),
i.e. n ≥ ⌈m/f⌉ (:func:`min_non_members`). Below that the only threshold with FPR ≤ f is one
with *no* false positive, an operating point at FPR 0 of n that the data cannot tell from
FPR f or from FPR 1/(10 n); reporting it as "TPR at f" compares it with other attacks at a
different point. The rule holds for the calibration non-members (they set the threshold) and
for the evaluated non-members (they state the achieved FPR); where either falls short, the
status is "too few non-members", the TPR is None, and ``reason`` says how many there are and
how many are needed. m = 1 is the smallest rule that resolves one false positive: 100
non-members for 1 %, 1,000 for 0.1 %, 10,000 for 0.01 % (where 10,000 states 0.01 % only as
≤ 1 false positive). It leaves the calibrated threshold's true FPR noisy (with k = 1 it is
about Beta(1, n), relative spread ~100 %), which the achieved FPR's interval shows; a stricter
reader passes ``min_false_positives=10`` (n ≥ 10/f, relative spread ~1/√10 ≈ 32 %), at ten
times the data.

**PPV at a membership prior** (:func:`ppv_at_prior`, :func:`ppv_interval`). At a prior π (the
fraction of members among the records an attacker tests),

    PPV = π·TPR / (π·TPR + (1 − π)·FPR),

undefined (None) when TPR = FPR = 0 (no record is flagged). Jebreel et al. (arXiv:2603.07567)
report it at π = 1 % and 10 % (:data:`PPV_PRIORS`). The interval uses the Clopper–Pearson
intervals of TPR and of FPR, each at level 1 − α/2 (α = 1 − confidence; union bound: both
hold together with probability ≥ 1 − α); PPV increases in TPR and decreases in FPR, so
lo = PPV(TPR_lo, FPR_hi) and hi = PPV(TPR_hi, FPR_lo). These are always defined (FPR_hi > 0
and TPR_hi > 0 for finite counts).

**Stability of the most exposed members** (:func:`top_fraction_jaccard`). For each seed, the
top ``fraction`` of that seed's members by score (k = ⌈fraction·m⌉ of its m members, at least 1;
ties broken by sample index, lower first); the Jaccard index |A∩B|/|A∪B| of every pair of seeds
and their mean. Chance: A a uniform random k_i-subset of seed i's members, B an independent
k_j-subset of seed j's, c members in common: |A∩C| ~ Hypergeometric(m_i, c, k_i) and, given
|A∩C| = x, |A∩B| ~ Hypergeometric(m_j, x, k_j); E[J] = Σ P(I = t)·t/(k_i + k_j − t), summed
exactly (:func:`expected_jaccard`). With one common pool of N (m_i = m_j = c = N) and k_i = k_j
= k this is E|A∩B| = k²/N and E[J] ≈ (k²/N)/(2k − k²/N).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, overload

import numpy as np
import numpy.typing as npt
from scipy.stats import hypergeom

from privaudit.analysis.empirical import clopper_pearson, tpr_at_fpr_with_ci
from privaudit.analysis.metrics import LOW_FPRS

# TPR at 1 %, 0.1 % and 0.01 % FPR; the keys extend metrics.LOW_FPRS.
LOW_FPR: dict[str, float] = {**LOW_FPRS, "tpr_at_0p01pct_fpr": 1e-4}
# The membership priors at which PPV is reported (Jebreel et al., arXiv:2603.07567).
PPV_PRIORS: tuple[float, ...] = (0.01, 0.10)

OK = "ok"
TOO_FEW = "too few non-members"

_REL_TOL = 1e-12  # 0.001 · 1000 is 1 false positive whatever the float rounding


# ------------------------------------------------------------------ validation helpers


def _check_fpr(target_fpr: float) -> float:
    f = float(target_fpr)
    if not 0.0 < f < 1.0:
        raise ValueError(f"target_fpr must lie in (0, 1), got {target_fpr}")
    return f


def _check_min_fp(min_false_positives: int) -> int:
    m = int(min_false_positives)
    if m != min_false_positives or m < 1:
        raise ValueError(f"min_false_positives must be an integer >= 1, got {min_false_positives}")
    return m


def _check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return c


def _labels_scores(labels: npt.ArrayLike, scores: npt.ArrayLike, what: str) -> tuple[np.ndarray, np.ndarray]:
    raw = np.asarray(labels).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    if raw.shape != s.shape:
        raise ValueError(f"{what}: labels {raw.shape} and scores {s.shape} differ in shape")
    if not np.all((raw == 0) | (raw == 1)):
        raise ValueError(f"{what}: labels must be 0 (non-member) or 1 (member)")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{what}: scores must be finite")
    return raw.astype(bool), s


# ------------------------------------------------------------------ the counting rule


def allowed_false_positives(n_non_members: int, target_fpr: float) -> int:
    """k = ⌊f·n⌋: the false positives that an FPR of at most ``target_fpr`` allows among
    ``n_non_members`` (float rounding forgiven: 0.001 · 1000 is 1)."""
    f = _check_fpr(target_fpr)
    n = int(n_non_members)
    if n < 0:
        raise ValueError(f"n_non_members must be >= 0, got {n_non_members}")
    return min(n, int(math.floor(f * n * (1.0 + _REL_TOL))))


def min_non_members(target_fpr: float, min_false_positives: int = 1) -> int:
    """The fewest non-members that can state an FPR of ``target_fpr``: the smallest n with
    ⌊f·n⌋ ≥ ``min_false_positives`` (⌈m/f⌉: 100 for 1 %, 1,000 for 0.1 %, 10,000 for 0.01 %)."""
    f, m = _check_fpr(target_fpr), _check_min_fp(min_false_positives)
    n = max(1, int(math.ceil(m / f)))
    while n > 1 and allowed_false_positives(n - 1, f) >= m:
        n -= 1
    while allowed_false_positives(n, f) < m:
        n += 1
    return n


def can_state_fpr(n_non_members: int, target_fpr: float, min_false_positives: int = 1) -> bool:
    """Whether ``n_non_members`` can state an FPR of ``target_fpr`` (:func:`min_non_members`)."""
    return allowed_false_positives(n_non_members, target_fpr) >= _check_min_fp(min_false_positives)


def _pct(f: float) -> str:
    return f"{100.0 * f:g} %"


def _shortfall(which: str, n: int, f: float, m: int) -> str | None:
    """None when ``n`` non-members can state FPR ``f``, else the one-line reason."""
    if can_state_fpr(n, f, m):
        return None
    need = min_non_members(f, m)
    fps = "1 false positive" if m == 1 else f"{m} false positives"
    return (f"{which}: {n:,} non-members, need at least {need:,} to state FPR {_pct(f)} "
            f"(at least {fps} at that FPR)")


def calibrated_threshold(non_member_scores: npt.ArrayLike, target_fpr: float) -> tuple[float, int]:
    """(threshold, false positives among these scores) of the smallest threshold among the
    calibration non-member scores (and +inf) whose FPR on them is ≤ ``target_fpr``: without
    ties the k-th largest score, k = ⌊f·n⌋ (+inf when k = 0, or when the scores tie across
    the k-th and (k+1)-th largest and none above is free of the tie)."""
    f = _check_fpr(target_fpr)
    a = np.sort(np.asarray(non_member_scores, dtype=np.float64).ravel())
    n = a.size
    if n == 0:
        raise ValueError("need at least one calibration non-member")
    if not np.all(np.isfinite(a)):
        raise ValueError("calibration scores must be finite")
    k = allowed_false_positives(n, f)
    if k >= n:
        t = float(a[0])
    else:
        cut = a[n - k - 1]                         # the (k+1)-th largest must not be flagged
        j = int(np.searchsorted(a, cut, side="right"))
        t = float(a[j]) if j < n else math.inf
    fp = n - int(np.searchsorted(a, t, side="left"))
    return t, fp


# ------------------------------------------------------------------ PPV


@overload
def ppv_at_prior(tpr: float, fpr: float, prior: float) -> float | None: ...


@overload
def ppv_at_prior(tpr: npt.ArrayLike, fpr: npt.ArrayLike,
                 prior: npt.ArrayLike) -> float | None | np.ma.MaskedArray: ...


def ppv_at_prior(tpr: npt.ArrayLike, fpr: npt.ArrayLike, prior: npt.ArrayLike) -> float | None | np.ma.MaskedArray:
    """Positive predictive value at membership prior π: π·TPR / (π·TPR + (1 − π)·FPR).

    Vectorised: ``tpr``, ``fpr`` in [0, 1] and ``prior`` in (0, 1) broadcast. Undefined where
    TPR = FPR = 0 (nothing is flagged): scalars give ``None`` there (else a float), arrays a
    ``numpy.ma.MaskedArray`` (float64) with those entries masked (``.tolist()`` writes them as
    None); never NaN. Jebreel et al., arXiv:2603.07567, report it at π = 1 % and 10 %.
    """
    t = np.asarray(tpr, dtype=np.float64)
    f = np.asarray(fpr, dtype=np.float64)
    p = np.asarray(prior, dtype=np.float64)
    if np.any(~((t >= 0) & (t <= 1))) or np.any(~((f >= 0) & (f <= 1))):
        raise ValueError("tpr and fpr must lie in [0, 1]")
    if np.any(~((p > 0) & (p < 1))):
        raise ValueError("prior must lie in (0, 1)")
    t, f, p = np.broadcast_arrays(t, f, p)
    num = p * t
    den = num + (1.0 - p) * f
    undefined = den <= 0.0
    out = np.divide(num, den, out=np.zeros(den.shape, dtype=np.float64), where=~undefined)
    if out.ndim == 0:
        return None if bool(undefined) else float(out)
    return np.ma.MaskedArray(out, mask=undefined.copy())


def ppv_interval(tp: int, n_pos: int, fp: int, n_neg: int, prior: float,
                 confidence: float = 0.95) -> dict[str, float | None]:
    """PPV at ``prior`` from counts, with an interval that holds with probability ≥ ``confidence``.

    ``tp`` of ``n_pos`` members and ``fp`` of ``n_neg`` non-members flagged at a threshold
    chosen without these labels. TPR and FPR each get their two-sided Clopper–Pearson interval
    at level 1 − α/2 (α = 1 − confidence; union bound); PPV is increasing in TPR and
    decreasing in FPR, so lo = PPV(TPR_lo, FPR_hi) and hi = PPV(TPR_hi, FPR_lo).

    Returns ``{"ppv", "lo", "hi", "prior", "confidence"}``: ``ppv`` is None when tp = fp = 0
    (the interval is then [0, 1]); lo and hi are always floats.
    """
    confidence = _check_confidence(confidence)
    joint = 1.0 - (1.0 - confidence) / 2.0
    tpr_lo, tpr_hi = clopper_pearson(tp, n_pos, joint)
    fpr_lo, fpr_hi = clopper_pearson(fp, n_neg, joint)
    return {
        "ppv": ppv_at_prior(tp / n_pos, fp / n_neg, prior),
        "lo": ppv_at_prior(tpr_lo, fpr_hi, prior),   # fpr_hi > 0: defined
        "hi": ppv_at_prior(tpr_hi, fpr_lo, prior),   # tpr_hi > 0: defined
        "prior": float(prior),
        "confidence": confidence,
    }


def _prior_key(prior: float) -> str:
    return f"ppv_at_{100.0 * prior:g}pct_prior".replace(".", "p")


# ------------------------------------------------------------------ operating points


@dataclass(frozen=True)
class OperatingPoint:
    """TPR at a target FPR, with the evidence a reader needs to trust it.

    ``status`` is "ok" or "too few non-members" (then ``reason`` is one line saying how many
    non-members there are and how many are needed, and every evaluated rate is None).
    ``calibrated`` is True when the threshold was set on calibration data, False when on the
    evaluated labels themselves (:func:`tpr_at_fpr_checked`: optimistic). ``threshold`` is
    +inf when the calibration scores tie so that no finite threshold stays within the target.
    """

    target_fpr: float
    confidence: float
    status: str
    reason: str | None
    calibrated: bool
    min_false_positives: int
    threshold: float | None
    n_calib_non_members: int | None
    calib_fp: int | None
    calib_fpr: float | None
    n_members: int
    n_non_members: int
    tp: int | None
    tpr: float | None
    tpr_lo: float | None
    tpr_hi: float | None
    fp: int | None
    fpr_achieved: float | None
    fpr_lo: float | None
    fpr_hi: float | None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def ppv(self, prior: float) -> dict[str, float | None] | None:
        """:func:`ppv_interval` at ``prior`` from this point's counts; None unless ok."""
        if not self.ok:
            return None
        assert self.tp is not None and self.fp is not None  # counted when ok
        return ppv_interval(self.tp, self.n_members, self.fp, self.n_non_members, prior, self.confidence)

    def to_dict(self, priors: Iterable[float] = PPV_PRIORS) -> dict[str, Any]:
        """The fields, JSON-ready (no NaN; +inf threshold as None, see ``threshold_is_inf``),
        plus ``ppv_at_1pct_prior``/``_lo``/``_hi`` and the same at 10 % (one triple per prior)."""
        d = asdict(self)
        inf = d["threshold"] is not None and not math.isfinite(d["threshold"])
        d["threshold_is_inf"] = inf
        if inf:
            d["threshold"] = None
        for prior in priors:
            key = _prior_key(prior)
            res = self.ppv(prior)
            d[key] = None if res is None else res["ppv"]
            d[key + "_lo"] = None if res is None else res["lo"]
            d[key + "_hi"] = None if res is None else res["hi"]
        return d


def _evaluate(member: np.ndarray, scores: np.ndarray, threshold: float, confidence: float) -> dict[str, Any]:
    n_pos = int(member.sum())
    n_neg = member.size - n_pos
    pred = scores >= threshold
    tp = int(np.sum(pred & member))
    fp = int(np.sum(pred & ~member))
    tpr_lo, tpr_hi = clopper_pearson(tp, n_pos, confidence)
    fpr_lo, fpr_hi = clopper_pearson(fp, n_neg, confidence)
    return {"tp": tp, "tpr": tp / n_pos, "tpr_lo": float(tpr_lo), "tpr_hi": float(tpr_hi),
            "fp": fp, "fpr_achieved": fp / n_neg, "fpr_lo": float(fpr_lo), "fpr_hi": float(fpr_hi)}


_NO_RATES: dict[str, Any] = {"tp": None, "tpr": None, "tpr_lo": None, "tpr_hi": None,
             "fp": None, "fpr_achieved": None, "fpr_lo": None, "fpr_hi": None}


def _evaluated(labels: npt.ArrayLike, scores: npt.ArrayLike, target_fpr: float, confidence: float,
               min_false_positives: int) -> tuple[float, float, int, np.ndarray, np.ndarray]:
    """The checked arguments of an operating point: (FPR, confidence, m, member mask, scores)
    of the evaluated data, which must hold a member."""
    f, confidence, m = _check_fpr(target_fpr), _check_confidence(confidence), _check_min_fp(min_false_positives)
    member, s = _labels_scores(labels, scores, "evaluated data")
    if not member.any():
        raise ValueError("evaluated data: need at least one member")
    return f, confidence, m, member, s


def tpr_at_calibrated_fpr(labels: npt.ArrayLike, scores: npt.ArrayLike, calib_labels: npt.ArrayLike | None,
                          calib_scores: npt.ArrayLike, target_fpr: float, *,
                          confidence: float = 0.95, min_false_positives: int = 1) -> OperatingPoint:
    """TPR on the evaluated data at the threshold that calibration data set for ``target_fpr``.

    ``labels``/``scores`` (N,): the evaluated model's membership and scores (at least one
    member). ``calib_labels``/``calib_scores`` (M,): calibration data the evaluated labels
    played no part in (reference or shadow models' scores with their known membership); pass
    ``calib_labels=None`` when ``calib_scores`` are all non-members. Only the calibration
    non-members set the threshold (:func:`calibrated_threshold`): the smallest of their scores
    with calibration FPR ≤ ``target_fpr``.

    Reported on the evaluated data: ``tpr`` with its Clopper–Pearson interval at
    ``confidence`` (valid: the threshold is fixed before these labels are read), and
    ``fpr_achieved`` on the evaluated non-members with its Clopper–Pearson interval.

    ``status`` is "too few non-members" when the calibration or the evaluated non-members
    cannot state ``target_fpr``: fewer than :func:`min_non_members` (⌈m/f⌉,
    m = ``min_false_positives``); then the rates are None and ``reason`` says why.
    """
    f, confidence, m, member, s = _evaluated(labels, scores, target_fpr, confidence, min_false_positives)
    if calib_labels is None:
        cs = np.asarray(calib_scores, dtype=np.float64).ravel()
        if not np.all(np.isfinite(cs)):
            raise ValueError("calibration data: scores must be finite")
        calib_neg = cs
    else:
        cmember, cs = _labels_scores(calib_labels, calib_scores, "calibration data")
        calib_neg = cs[~cmember]
    n_cal, n_pos = calib_neg.size, int(member.sum())
    n_neg = member.size - n_pos
    calib_short = _shortfall("calibration data", n_cal, f, m)
    eval_short = _shortfall("evaluated data", n_neg, f, m)
    reasons = [r for r in (calib_short, eval_short) if r]
    threshold = calib_fp = calib_fpr = None
    if calib_short is None:
        threshold, calib_fp = calibrated_threshold(calib_neg, f)
        calib_fpr = calib_fp / n_cal
    rates = _NO_RATES if reasons or threshold is None else _evaluate(member, s, threshold, confidence)
    return OperatingPoint(
        target_fpr=f, confidence=confidence, status=TOO_FEW if reasons else OK,
        reason="; ".join(reasons) or None, calibrated=True, min_false_positives=m,
        threshold=threshold, n_calib_non_members=n_cal, calib_fp=calib_fp, calib_fpr=calib_fpr,
        n_members=n_pos, n_non_members=n_neg, **rates)


def tpr_at_fpr_checked(labels: npt.ArrayLike, scores: npt.ArrayLike, max_fpr: float, *, confidence: float = 0.95,
                       min_false_positives: int = 1) -> OperatingPoint:
    """The same-data operating point of :func:`privaudit.analysis.empirical.tpr_at_fpr_with_ci`
    (the threshold chosen on these labels: ``calibrated`` False, optimistic), under the same
    counting rule as :func:`tpr_at_calibrated_fpr`: "too few non-members" (TPR None) when
    the non-members cannot state ``max_fpr``. For when no calibration data exist."""
    f, confidence, m, member, s = _evaluated(labels, scores, max_fpr, confidence, min_false_positives)
    n_pos = int(member.sum())
    n_neg = member.size - n_pos
    reason = _shortfall("evaluated data", n_neg, f, m)
    threshold, rates = None, _NO_RATES
    if reason is None:
        threshold = tpr_at_fpr_with_ci(member.astype(int), s, f, confidence)["threshold"]
        rates = _evaluate(member, s, threshold, confidence)
    return OperatingPoint(
        target_fpr=f, confidence=confidence, status=OK if reason is None else TOO_FEW,
        reason=reason, calibrated=False, min_false_positives=m, threshold=threshold,
        n_calib_non_members=None, calib_fp=None, calib_fpr=None,
        n_members=n_pos, n_non_members=n_neg, **rates)


def tpr_at_low_fprs(labels: npt.ArrayLike, scores: npt.ArrayLike, calib_labels: npt.ArrayLike | None = None,
                    calib_scores: npt.ArrayLike | None = None, *, fprs: Mapping[str, float] | None = None,
                    confidence: float = 0.95, min_false_positives: int = 1) -> dict[str, OperatingPoint]:
    """TPR at each FPR of ``fprs`` (default :data:`LOW_FPR`: 1 %, 0.1 %, 0.01 %), keyed as
    ``fprs``: with calibration scores (``calib_labels`` None = all non-members)
    :func:`tpr_at_calibrated_fpr`, without them :func:`tpr_at_fpr_checked`. Each point is
    "too few non-members" where the data cannot state it, by the rule of :func:`min_non_members`."""
    fprs = LOW_FPR if fprs is None else fprs
    if calib_scores is None:
        if calib_labels is not None:
            raise ValueError("calib_labels given without calib_scores")
        return {key: tpr_at_fpr_checked(labels, scores, f, confidence=confidence,
                                        min_false_positives=min_false_positives)
                for key, f in fprs.items()}
    return {key: tpr_at_calibrated_fpr(labels, scores, calib_labels, calib_scores, f, confidence=confidence,
                                       min_false_positives=min_false_positives)
            for key, f in fprs.items()}


# ------------------------------------------------------------------ stability across seeds


def top_fraction_size(n_members: int, fraction: float) -> int:
    """k = ⌈fraction·m⌉ (float rounding forgiven: 1 % of 300 is 3), at least 1 when m ≥ 1."""
    m = int(n_members)
    if m < 1:
        raise ValueError("need at least one member")
    return max(1, min(m, int(math.ceil(fraction * m * (1.0 - _REL_TOL)))))


def expected_jaccard(n_i: int, n_j: int, n_common: int, k_i: int, k_j: int) -> tuple[float, float]:
    """(mean, standard deviation) of the Jaccard index |A∩B|/|A∪B| of two independent random
    sets: A uniform of size ``k_i`` among ``n_i`` items, B uniform of size ``k_j`` among ``n_j``
    items, ``n_common`` items in both pools. Exact: X = |A ∩ common| ~ Hypergeometric(n_i,
    n_common, k_i); given X = x, |A∩B| ~ Hypergeometric(n_j, x, k_j); the sum over both runs
    over every term with probability above 1e-18 of the largest (the rest is < 1e-15)."""
    n_i, n_j, c, k_i, k_j = (int(v) for v in (n_i, n_j, n_common, k_i, k_j))
    if not (0 <= c <= min(n_i, n_j) and 1 <= k_i <= n_i and 1 <= k_j <= n_j):
        raise ValueError("need 0 <= n_common <= min(n_i, n_j), 1 <= k_i <= n_i, 1 <= k_j <= n_j")
    x = np.arange(0, min(c, k_i) + 1)
    px = hypergeom.pmf(x, n_i, c, k_i)
    keep = px > 1e-18 * px.max()
    x, px = x[keep], px[keep]
    t = np.arange(0, min(k_i, k_j) + 1)
    pt = px @ hypergeom.pmf(t[None, :], n_j, x[:, None], k_j)   # P(|A∩B| = t)
    j = t / (k_i + k_j - t)
    mean = float(pt @ j)
    var = float(pt @ (j * j)) - mean * mean
    return mean, math.sqrt(max(var, 0.0))


@dataclass(frozen=True)
class TopFractionStability:
    """How stable the most exposed members are across seeds (:func:`top_fraction_jaccard`).

    ``mean``: the mean pairwise Jaccard index; ``pairs``: per pair of seeds (i < j) a dict
    ``{"i", "j", "jaccard", "intersection", "common_members", "chance", "chance_sd",
    "chance_approx"}``; ``sizes``: k per seed; ``n_members``: members per seed;
    ``chance_mean``: the mean over pairs of the exact chance expectation;
    ``top``: the top sample indices per seed, most exposed first.
    """

    fraction: float
    mean: float
    chance_mean: float
    sizes: tuple[int, ...]
    n_members: tuple[int, ...]
    pairs: tuple[dict[str, Any], ...]
    top: tuple[tuple[int, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sizes"], d["n_members"] = list(self.sizes), list(self.n_members)
        d["pairs"] = [dict(p) for p in self.pairs]
        d["top"] = [list(t) for t in self.top]
        return d


def top_fraction_jaccard(score_matrix: npt.ArrayLike, member_matrix: npt.ArrayLike,
                         fraction: float = 0.01) -> TopFractionStability:
    """Jaccard stability of each seed's top ``fraction`` of members by score.

    ``score_matrix`` (S, N): seed s's score of sample n (columns are the same samples in every
    row); ``member_matrix`` (S, N) bool: whether sample n is a member in seed s's run (members
    may differ per seed). Per seed, the top k_s = ⌈fraction·m_s⌉ of its m_s members by score
    (at least 1), ties broken by sample index (lower first); non-members' scores are ignored
    (they may be NaN). Chance: :func:`expected_jaccard` of two random sets of those sizes drawn
    from the two seeds' members (one common pool when every seed has the same members).
    """
    scores = np.asarray(score_matrix, dtype=np.float64)
    raw = np.asarray(member_matrix)
    if scores.ndim != 2 or scores.shape != raw.shape:
        raise ValueError(f"score_matrix {scores.shape} and member_matrix {raw.shape} must be equal (S, N)")
    if scores.shape[0] < 2:
        raise ValueError("need at least two seeds (rows)")
    if not np.all((raw == 0) | (raw == 1)):
        raise ValueError("member_matrix must be boolean (or 0/1)")
    fraction = float(fraction)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    member = raw.astype(bool)
    if not np.all(np.isfinite(scores[member])):
        raise ValueError("members' scores must be finite")
    tops, sizes, counts = [], [], []
    for s_row, m_row in zip(scores, member):
        idx = np.flatnonzero(m_row)
        if idx.size == 0:
            raise ValueError("every seed needs at least one member")
        k = top_fraction_size(idx.size, fraction)
        order = np.lexsort((idx, -s_row[idx]))   # score descending, then sample index
        tops.append(idx[order[:k]])
        sizes.append(k)
        counts.append(int(idx.size))
    pairs = []
    for i in range(len(tops)):
        for j in range(i + 1, len(tops)):
            inter = int(np.intersect1d(tops[i], tops[j]).size)
            jac = inter / (sizes[i] + sizes[j] - inter)
            common = int(np.sum(member[i] & member[j]))
            chance, sd = expected_jaccard(counts[i], counts[j], common, sizes[i], sizes[j])
            e_inter = sizes[i] * sizes[j] * common / (counts[i] * counts[j])
            pairs.append({"i": i, "j": j, "jaccard": jac, "intersection": inter, "common_members": common,
                          "chance": chance, "chance_sd": sd,
                          "chance_approx": e_inter / (sizes[i] + sizes[j] - e_inter)})
    return TopFractionStability(
        fraction=fraction,
        mean=float(np.mean([p["jaccard"] for p in pairs])),
        chance_mean=float(np.mean([p["chance"] for p in pairs])),
        sizes=tuple(sizes), n_members=tuple(counts), pairs=tuple(pairs),
        top=tuple(tuple(int(v) for v in t) for t in tops))
