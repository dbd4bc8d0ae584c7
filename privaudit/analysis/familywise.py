"""Family-wise verdicts: one statement about several attacks (or defences) that holds at its
stated level as a whole, not only row by row.

A headline that looks at k intervals at once ("leaks: some attack's AUC lies above 0.5")
is the union of k statements; with each at 95 % the union is wrong more often than 5 %
(about 7.5 % for a scan's five attacks on data without any leak). The tests here make the
family the unit:

* :func:`holm`: Holm–Bonferroni (Holm 1979) adjusted p-values of k hypotheses: the i-th
  smallest p is multiplied by k − i + 1 and the products made non-decreasing. Valid for any
  dependence between the tests; rejecting where the adjusted p ≤ α controls the family-wise
  error rate at α. For the global question ("is any hypothesis false?") it is Bonferroni,
  k × the smallest p.
* :func:`max_statistic_test`: the max-statistic permutation test (Westfall & Young 1993) of
  "the attacks' scores are independent of membership" (members and non-members
  exchangeable: no leak). The statistic is the largest standardised AUC − 0.5 over the
  attacks, each AUC standardised by its exact standard deviation under permutation (the
  Mann–Whitney variance with its tie correction, a constant of the attack's scores); its
  null distribution is computed by permuting the membership labels B times (seeded), all at
  once: each attack's scores are ranked once and a permutation's AUCs are rank sums, one
  (B, N) × (N, A) product. p = (1 + #{permutations with a statistic ≥ the observed})/(B + 1)
  is exact (P(p ≤ α) ≤ α under the null) for any B and any sample size, and the maximum
  takes the attacks' correlation into account (four near-monotone transforms of the same
  posteriors cost little more than one), so it is more powerful than Holm over the same
  attacks. It needs the scores to be fixed functions of the model's outputs: permuting the
  labels must not change them.
* :func:`fold_test`: an attack whose scores are themselves fitted to the membership labels
  by cross-validation (the scan's classifier: fold k scored by a model fitted on the other
  folds). Its pooled AUC is not a fixed score's: a permutation would have to refit the
  model B times, and DeLong's interval is too narrow for it (the folds' models share their
  training samples, so the folds' AUCs are positively correlated: on data without a leak
  its one-sided 2.5 % test rejected in 7.3 % of 2,000 sets of 500 + 500,
  benchmarks/reference/familywise.md). Within one fold the scores come from one model that never saw the fold's labels,
  and under the null those labels are a uniformly random assignment of the fold's members
  (the folds are stratified), so a permutation test within the fold is exact; the attack's
  p-value is Bonferroni over its K folds, K × the smallest, valid whatever their dependence.
* :func:`family_test`: the scan's headline. Attacks whose scores are fixed functions of the
  outputs go into one max-statistic permutation test; each cross-validated attack gets its
  :func:`fold_test`; weighted Holm–Bonferroni over these tests, each weighted by the number
  of attacks in it, gives the family-wise p-value of "no attack beats chance". It is Holm over
  the k attacks, each carrying α/k, with the shares of the score attacks spent together on
  the one test that sees their correlation: for the scan's five, 4α/5 for the permutation
  test and α/5 for the classifier. Every part is exact, so the headline is: its false-alarm
  rate on data without a leak is at most α at any sample size
  (benchmarks/bench_familywise.py measures it).

The audit's summary (:mod:`privaudit.reporting.summary`) holds no scores, only each row's
estimate and its 95 % interval (Student's t over seeds, or one model's sampling interval);
:func:`interval_se` reads the standard error back from such an interval, and
:func:`excess_pvalue` and :func:`difference_pvalue` turn it into the p-values Holm needs.

Shapes: ``labels`` (N,) 1 = member, 0 = non-member; scores (N,) higher = more likely a
member, one array per attack.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from privaudit.analysis.metrics import auc_delong, check_scores, midranks

ALPHA = 0.05
#: permutations of each permutation test: p-values in steps of 1/1000; where the level a test
#: gets times B + 1 is a whole number (5 %, 4 %, 1 %, a fold's 0.2 %) its size is exactly that
#: level, otherwise a little below it
PERMUTATIONS = 999
#: the most entries of one block of the (B, N) permutation matrix (bounds memory for large N)
_BLOCK = 1 << 22

PERMUTATION = "max-statistic permutation test"
FOLDS = "within-fold permutation tests"
HOLM = "Holm–Bonferroni"
DELONG = "one-sided DeLong test"


def holm(p_values: Iterable[float], weights: Iterable[float] | None = None) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values, in the order given: sorted ascending, the i-th
    (from 1) times k − i + 1, made non-decreasing, capped at 1. NaN p-values count as 1.

    With ``weights`` (positive), the weighted Holm procedure (Holm 1979): hypothesis j spends
    the share w_j / Σw of the level; the hypotheses are taken in increasing p_j / w_j and the
    i-th is multiplied by the weights still in play (its own and those after it) over its
    own, Σ_{l ≥ i} w_l / w_i, then made non-decreasing. Equal weights give the plain procedure."""
    p = np.asarray(list(p_values), dtype=float)
    p = np.where(np.isfinite(p), p, 1.0)
    k = p.size
    if k == 0:
        return p
    w = np.ones(k) if weights is None else np.asarray(list(weights), dtype=float)
    if w.shape != p.shape or not np.all(w > 0):
        raise ValueError("holm: one positive weight per p-value")
    order = np.argsort(p / w, kind="stable")
    remaining = np.cumsum(w[order][::-1])[::-1]   # Σ of the weights from position i on
    adjusted = np.minimum(1.0, np.maximum.accumulate(remaining * p[order] / w[order]))
    out = np.empty(k)
    out[order] = adjusted
    return out


def auc_pvalue(labels: np.ndarray, scores: np.ndarray) -> float:
    """One-sided p-value of H0: AUC ≤ 0.5 from DeLong's standard error (the z of the scan's
    DeLong interval): 1 − Φ((AUC − 0.5)/se). With se = 0: 0 when AUC > 0.5, else 1."""
    auc, var = auc_delong(labels, scores)
    if var <= 0.0:
        return 0.0 if auc > 0.5 else 1.0
    return float(norm.sf((auc - 0.5) / math.sqrt(var)))


def interval_se(value: float, lo: float, hi: float, *, confidence: float = 0.95, df: float = math.inf,
                bounds: tuple[float, float] = (0.0, 1.0)) -> float:
    """The standard error behind an interval ``value ± q · se`` (q: Student's t quantile with
    ``df`` degrees of freedom at (1 + confidence)/2, the normal one for df = ∞) that may have
    been clipped to ``bounds``: the half-width of the side not clipped (the mean of both when
    neither is; for an asymmetric interval, such as Clopper–Pearson's, this is a normal
    approximation). NaN when a value is missing or both sides are clipped."""
    vals = np.array([value, lo, hi], dtype=float)
    if not np.all(np.isfinite(vals)) or not 0.0 < confidence < 1.0:
        return math.nan
    low_clipped, high_clipped = lo <= bounds[0], hi >= bounds[1]
    if low_clipped and high_clipped:
        return math.nan
    half = (hi - value) if low_clipped else (value - lo) if high_clipped else (hi - lo) / 2.0
    q = norm.ppf(0.5 + confidence / 2) if not math.isfinite(df) else student_t.ppf(0.5 + confidence / 2, df)
    return max(float(half), 0.0) / float(q)


def detectable_difference(se: float, df: float = math.inf, *, alpha: float = ALPHA, tests: int = 1,
                          power: float = 0.8) -> float:
    """The smallest true difference a two-sided test of "no difference" detects with
    probability ``power``: (q_{1 − α/(2·tests)} + q_power) · se, with q Student's t quantiles on
    ``df`` degrees of freedom (normal for ∞). ``tests`` > 1 takes the strictest step of
    Holm–Bonferroni over that many comparisons (level α/tests), so the stated power holds for
    the family-wise verdict. With se from the data itself this is the usual design-based
    approximation (it ignores that se is estimated). NaN when se is missing."""
    if not (math.isfinite(se) and se >= 0) or tests < 1:
        return math.nan
    if math.isfinite(df):
        q = student_t.ppf(1 - alpha / (2 * tests), df) + student_t.ppf(power, df)
    else:
        q = norm.ppf(1 - alpha / (2 * tests)) + norm.ppf(power)
    return float(q * se)


def _sf(x: float, df: float) -> float:
    return float(norm.sf(x) if not math.isfinite(df) else student_t.sf(x, df))


def excess_pvalue(value: float, se: float, null: float, df: float = math.inf) -> float:
    """One-sided p-value of H0: the true value ≤ ``null``, from an estimate and its standard
    error (Student's t with ``df`` degrees of freedom, normal for ∞). With se = 0: 0 when
    ``value`` > ``null``, else 1; NaN when either is missing."""
    if not (math.isfinite(value) and math.isfinite(se)):
        return math.nan
    if se <= 0.0:
        return 0.0 if value > null else 1.0
    return _sf((value - null) / se, df)


def two_sided_pvalue(value: float, se: float, null: float = 0.0, df: float = math.inf) -> float:
    """Two-sided p-value of H0: the true value is ``null``, from an estimate and its standard
    error (Student's t with ``df`` degrees of freedom, normal for ∞): twice the smaller tail.
    With se = 0: 0 when ``value`` ≠ ``null``, else 1; NaN when either is missing."""
    if not (math.isfinite(value) and math.isfinite(se)):
        return math.nan
    if se <= 0.0:
        return 0.0 if value != null else 1.0
    return min(1.0, 2.0 * _sf(abs(value - null) / se, df))


def difference_pvalue(a: float, se_a: float, df_a: float, b: float, se_b: float, df_b: float) -> float:
    """Two-sided p-value of H0: two independent estimates have the same true value: Welch's
    t-test (Welch–Satterthwaite degrees of freedom; the normal test when both are ∞). With
    both standard errors 0: 0 when the estimates differ, else 1; NaN when any is missing."""
    if not all(math.isfinite(v) for v in (a, se_a, b, se_b)):
        return math.nan
    var = se_a ** 2 + se_b ** 2
    if var <= 0.0:
        return 0.0 if a != b else 1.0
    # Welch–Satterthwaite; a side with ∞ degrees of freedom (a known variance) adds nothing
    spread = sum((se ** 2) ** 2 / d for se, d in ((se_a, df_a), (se_b, df_b)) if math.isfinite(d))
    df = var ** 2 / spread if spread > 0 else math.inf
    return min(1.0, 2.0 * _sf(abs(a - b) / math.sqrt(var), df))


def _tie_term(values: np.ndarray) -> float:
    """Σ (t³ − t) over the runs of t equal values (the Mann–Whitney tie correction)."""
    _, counts = np.unique(values, return_counts=True)
    t = counts.astype(np.float64)
    return float(np.sum(t ** 3 - t))


@dataclass(frozen=True)
class MaxStatistic:
    """A max-statistic permutation test: the observed ``statistic`` (the largest standardised
    AUC − 0.5), its ``p_value``, the number of ``permutations`` and the ``attacks`` in it."""

    statistic: float
    p_value: float
    permutations: int
    attacks: tuple[str, ...]


def max_statistic_test(labels: np.ndarray, scores: Mapping[str, np.ndarray], *, permutations: int = PERMUTATIONS,
                       seed: int | Sequence[int] = 0) -> MaxStatistic:
    """The max-statistic permutation test of "no attack in ``scores`` beats chance" (module
    docstring): ``scores`` maps attack → (N,) scores, each a fixed function of the outputs.
    Seeded by ``seed``; memory O(N × min(B, 4M / N))."""
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    names = tuple(scores)
    if not names:
        raise ValueError("the max-statistic test needs at least one attack")
    labels = check_scores(labels, scores[names[0]])[0]
    n_all = labels.size
    m = int(labels.sum())
    n = n_all - m
    ranks = np.empty((n_all, len(names)))
    sd = np.empty(len(names))
    for j, name in enumerate(names):
        s = check_scores(labels, scores[name])[1]
        ranks[:, j] = midranks(s)
        # Var of the members' rank sum under permutation: m n / 12 · ((N + 1) − Σ(t³ − t)/(N (N − 1)))
        var = m * n / 12.0 * ((n_all + 1) - _tie_term(s) / (n_all * (n_all - 1)))
        sd[j] = math.sqrt(var) if var > 0 else 0.0
    mean = m * (n_all + 1) / 2.0
    constant = sd == 0  # every score tied: its AUC is 0.5 under every permutation

    def stat(member_rows: np.ndarray) -> np.ndarray:
        # rank sums are sums of half-integers below 2^53: exact in any order, so the observed
        # statistic and the permuted ones are computed alike, ties included
        z = (member_rows @ ranks - mean) / np.where(constant, 1.0, sd)
        z[:, constant] = 0.0
        top: np.ndarray = z.max(axis=1)
        return top

    observed = float(stat(labels[None, :].astype(np.float64))[0])
    rng = np.random.default_rng(seed)
    block = max(1, min(permutations, _BLOCK // max(n_all, 1)))
    at_least, done = 0, 0
    base = labels.astype(np.float64)
    while done < permutations:
        b = min(block, permutations - done)
        perm = rng.permuted(np.tile(base, (b, 1)), axis=1)
        at_least += int(np.count_nonzero(stat(perm) >= observed))
        done += b
    return MaxStatistic(observed, (1 + at_least) / (permutations + 1), permutations, names)


def fold_test(labels: np.ndarray, scores: np.ndarray, fold: np.ndarray, *, permutations: int = PERMUTATIONS,
              seed: int = 0) -> tuple[float, list[float]]:
    """(p, per-fold p) of "a cross-validated attack does not beat chance" (module docstring):
    a permutation test of the scores' AUC within each fold (``fold`` (N,) the fold of each
    sample, each fold scored by one model fitted on the others), Bonferroni over the folds.
    A fold without both members and non-members gets p = 1 (and still counts)."""
    labels = np.asarray(labels).astype(int).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    fold = np.asarray(fold).ravel()
    if not labels.shape == scores.shape == fold.shape:
        raise ValueError(f"labels {labels.shape}, scores {scores.shape} and fold {fold.shape} differ in shape")
    per_fold = []
    for j, k in enumerate(np.unique(fold)):
        sel = fold == k
        if labels[sel].min() == labels[sel].max():
            per_fold.append(1.0)
            continue
        per_fold.append(max_statistic_test(labels[sel], {"fold": scores[sel]}, permutations=permutations,
                                           seed=(seed, 1 + j)).p_value)
    return min(1.0, len(per_fold) * min(per_fold)), per_fold


@dataclass(frozen=True)
class FamilyTest:
    """The family-wise test of a headline over ``attacks``: ``p_value`` is the family-wise
    p-value of "no attack beats chance", ``parts`` the tests it combines (each a dict: ``test``,
    ``attacks``, ``p_value``, ``permutations`` for a permutation test), ``correction`` how
    they were combined, ``alpha`` the level; ``p_values`` each attack's own one-sided DeLong
    p-value (per row, uncorrected)."""

    attacks: tuple[str, ...]
    alpha: float
    p_value: float
    correction: str
    parts: tuple[dict[str, Any], ...]
    p_values: dict[str, float] = field(default_factory=dict)

    @property
    def rejects(self) -> bool:
        """Whether the family-wise test rejects "no attack beats chance" at ``alpha``."""
        return bool(self.p_value <= self.alpha)

    @property
    def comparisons(self) -> int:
        return len(self.attacks)

    def text(self) -> str:
        """One line: ``family-wise 5 % over 5 attacks: …, p = 0.003``."""
        head = f"family-wise {_percent(self.alpha)} over {_count(self.comparisons, 'attack')}: "
        if len(self.parts) == 1 and self.parts[0]["test"] == PERMUTATION:
            part = self.parts[0]
            return head + f"{PERMUTATION}, {part['permutations']:,} permutations, {p_text(self.p_value)}"
        if len(self.parts) > 1 and all(part["test"] == DELONG for part in self.parts):
            return head + f"{HOLM} over their {DELONG}s, {p_text(self.p_value)}"
        if len(self.parts) == 1:
            return head + f"{_part_text(self.parts[0])}"
        k = self.comparisons
        weighted = len({part.get("weight", 1) for part in self.parts}) > 1
        pieces = [_part_text(part) + (f", weight {part.get('weight', 1)}/{k}" if weighted else "")
                  for part in self.parts]
        return head + (f"{'weighted ' if weighted else ''}{HOLM} over {len(self.parts)} tests ({'; '.join(pieces)}), "
                       f"family-wise {p_text(self.p_value)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able fields, ``text`` and ``rejects`` included."""
        return {"level": self.alpha, "comparisons": self.comparisons, "attacks": list(self.attacks),
                "correction": self.correction, "p_value": self.p_value, "rejects": self.rejects,
                "parts": [dict(p, attacks=list(p["attacks"])) for p in self.parts],
                "p_values_per_row": dict(self.p_values), "text": self.text()}


def p_text(p: float, name: str = "p") -> str:
    """A p-value in words, two significant digits: ``p = 0.003``, ``p = 0.041``, ``p = 1``,
    ``p < 0.0001`` (``name`` in place of p: ``adjusted p = 0.01``)."""
    if not math.isfinite(p):
        return f"{name} = —"
    return f"{name} = {p:.2g}" if p >= 1e-4 else f"{name} < 0.0001"


def _percent(alpha: float) -> str:
    return f"{100 * alpha:g} %"


def _count(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def _part_text(part: dict[str, Any]) -> str:
    names = ", ".join(part["attacks"])
    if part["test"] == PERMUTATION:
        return (f"{PERMUTATION} over {names} ({part['permutations']:,} permutations, "
                f"{p_text(part['p_value'])})")
    if part["test"] == FOLDS:
        return (f"{names}: {FOLDS} ({part['permutations']:,} permutations each), Bonferroni over its "
                f"{part['folds']} folds, {p_text(part['p_value'])}")
    return f"{names}: {DELONG}, {p_text(part['p_value'])}"


def family_test(labels: np.ndarray, scores: Mapping[str, np.ndarray], *,
                trained: Mapping[str, np.ndarray | None] | None = None, alpha: float = ALPHA,
                permutations: int = PERMUTATIONS, seed: int = 0) -> FamilyTest:
    """The family-wise test of "no attack in ``scores`` beats chance" (AUC ≤ 0.5 for each):
    the attacks not in ``trained`` (fixed functions of the outputs) in one max-statistic
    permutation test; each attack in ``trained`` (scores fitted to the membership labels by
    cross-validation, mapped to its (N,) fold ids) by its :func:`fold_test`, or, given no
    folds, by its one-sided DeLong p-value (a normal approximation); Holm–Bonferroni over these
    tests, each weighted by its number of attacks (the family-wise p-value of the global
    question: the smallest over the tests of p × k / its number of attacks). With
    ``permutations=0``, Holm–Bonferroni over every attack's DeLong p-value."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    names = tuple(scores)
    if not names:
        raise ValueError("a family-wise test needs at least one attack")
    trained = dict(trained or {})
    per_row = {a: auc_pvalue(labels, scores[a]) for a in names}
    fixed = [a for a in names if a not in trained] if permutations > 0 else []
    parts: list[dict[str, Any]] = []
    if fixed:
        mx = max_statistic_test(labels, {a: scores[a] for a in fixed}, permutations=permutations, seed=seed)
        parts.append({"test": PERMUTATION, "attacks": tuple(fixed), "p_value": mx.p_value,
                      "permutations": permutations, "statistic": mx.statistic})
    for j, a in enumerate(names):
        if a in fixed:
            continue
        fold = trained.get(a)
        if fold is None or permutations <= 0:
            parts.append({"test": DELONG, "attacks": (a,), "p_value": per_row[a]})
            continue
        p, per_fold = fold_test(labels, scores[a], fold, permutations=permutations, seed=seed + 1 + j)
        parts.append({"test": FOLDS, "attacks": (a,), "p_value": p, "permutations": permutations,
                      "folds": len(per_fold), "p_values_per_fold": per_fold})
    # each attack carries 1/k of the level: a test over several attacks spends their shares together
    for part in parts:
        part["weight"] = len(part["attacks"])
    adjusted = holm([part["p_value"] for part in parts], [part["weight"] for part in parts])
    for part, adj in zip(parts, adjusted):
        part["adjusted_p_value"] = float(adj)
    kinds = {p["test"] for p in parts}
    weighted = len({p["weight"] for p in parts}) > 1
    correction = parts[0]["test"] if len(parts) == 1 else HOLM if kinds == {DELONG} else (
        ("weighted " if weighted else "") + f"{HOLM} over " +
        " and ".join(k for k in (PERMUTATION, FOLDS, DELONG) if k in kinds))
    return FamilyTest(names, alpha, float(adjusted.min()), correction, tuple(parts), per_row)


__all__ = ["ALPHA", "PERMUTATIONS", "FamilyTest", "MaxStatistic", "auc_pvalue", "difference_pvalue", "excess_pvalue",
           "family_test", "fold_test", "holm", "interval_se", "max_statistic_test", "p_text"]
