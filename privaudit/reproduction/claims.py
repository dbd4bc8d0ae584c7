"""The paper's statements about its CIFAR-10 figures, each checked against a reproduction.

A statement becomes one number with a 95 % interval and a reading:

* **agrees**: the interval lies on the side the paper states;
* **disagrees**: it lies on the other side;
* **undecided**: it contains the boundary (the runs cannot tell).

The numbers (docs/methods/a-mg-noise.md A.6):

* a **trend** (accuracy or leakage against κ, leakage against epochs) is the least-squares
  slope. With two or more seeds each seed gives one slope and the interval is Student's t
  over seeds (so it covers training randomness and the draw of the data split); with one
  seed it is the slope's own t interval from the residuals (n − 2 degrees of freedom), which
  covers only the scatter around the line;
* a **difference** between two settings (κ = 0.2 against the baseline) is paired by seed, t
  over seeds; with one seed it is the normal interval of a difference of two accuracies,
  each binomial on its test part;
* "holds its baseline" is an equivalence statement: it agrees when the accuracy lost at
  κ = 0.2 is below :data:`HOLD_MARGIN` with 95 % confidence, disagrees when the loss is above
  it with 95 % confidence;
* the MG-vs-DP figures are the summary layer's comparison at equal accuracy
  (:func:`privaudit.reporting.summary.comparisons`, DP − MG), whose reading is the report's.

Each claim's own reading is a 95 % statement about that claim alone. The run's headline
counts ("k agree, m disagree") pool every claim, so they are read family-wise
(:func:`familywise`): each claim's two-sided p-value of "the value is the boundary" is read
back from its interval (Student's t with the interval's degrees of freedom; a normal standard
error for a one-seed sampling or bootstrap interval, an approximation), Holm–Bonferroni over
all the claims of the run, and a claim agrees or disagrees (or names a defence) only where its
adjusted p is at most 5 %; ``row_verdict`` keeps its own reading.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t

from privaudit.analysis.familywise import HOLM, holm, interval_se, two_sided_pvalue
from privaudit.reporting.summary import CONFIDENCE, VERDICT_DP, VERDICT_MG, VERDICT_TIE, comparisons, t_interval

AGREES, DISAGREES, UNDECIDED = "agrees", "disagrees", "undecided"
#: a statement shown beside its measurement but not read at this scale: no p-value, and not
#: counted among the claims the family-wise correction is over
NOT_CHECKED = "not checked at this scale"
#: accuracy a model may lose at κ = 0.2 and still "hold its baseline" (2 percentage points)
HOLD_MARGIN = 0.02
METRIC_NAMES = {"test_accuracy": "test accuracy", "auc": "attack AUC", "precision": "attack precision",
                "recall": "attack recall"}
MODEL_NAMES = {"mlp": "MLP", "cnn": "Standard CNN", "cnn-improved": "Improved CNN",
               "cnn-improved-small": "Improved CNN (two blocks)"}


@dataclass(frozen=True)
class Estimate:
    """A number with its 95 % interval; ``n`` seeds; ``method`` says how the interval was made;
    ``df`` the degrees of freedom of its Student's t interval (∞: a normal interval)."""

    value: float
    lo: float
    hi: float
    n: int
    method: str
    df: float = math.inf


@dataclass(frozen=True)
class Claim:
    """One statement of the paper next to what this run measured."""

    figure: str
    model: str
    label: str         # a few words for the terminal, e.g. "AUC slope on κ"
    statement: str     # what the paper states
    measure: str       # what was measured, in words
    value: float
    lo: float
    hi: float
    n_seeds: int
    method: str
    verdict: str       # agrees / disagrees / undecided, or the comparison's reading (family-wise after familywise())
    detail: str = ""
    boundary: float = 0.0   # the value the paper's statement is read against (0, or −HOLD_MARGIN)
    df: float = math.inf    # the interval's degrees of freedom (∞: normal)
    p_value: float = math.nan     # two-sided p of "the value is the boundary", from the interval
    p_adjusted: float = math.nan  # Holm–Bonferroni over every claim of the run (familywise())
    comparisons: int = 0          # how many claims that correction is over
    row_verdict: str = ""         # what the claim's own 95 % interval reads

    def to_dict(self) -> dict:
        return asdict(self)


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its standard error (NaN with < 3 points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0:
        return math.nan, math.nan
    xc = x - x.mean()
    b = float((xc * (y - y.mean())).sum() / (xc ** 2).sum())
    if len(x) < 3:
        return b, math.nan
    resid = y - y.mean() - b * xc
    return b, float(math.sqrt((resid ** 2).sum() / (len(x) - 2) / (xc ** 2).sum()))


def trend(frame: pd.DataFrame, x: str, y: str, confidence: float = CONFIDENCE) -> Estimate:
    """The slope of ``y`` on ``x`` with its interval (per-seed slopes and t over seeds, or,
    with one seed, the slope's own t interval). ``frame`` has a ``seed`` column."""
    df = frame[[x, y, "seed"]].apply(pd.to_numeric, errors="coerce").dropna()
    # only seeds with at least two distinct x give a slope (a run still under way may not)
    df = df[df.groupby("seed")[x].transform("nunique") >= 2]
    seeds = sorted(df["seed"].unique())
    if len(seeds) >= 2:
        slopes = [_slope(g[x].to_numpy(), g[y].to_numpy())[0] for _, g in df.groupby("seed")]
        mean, lo, hi, n = t_interval(slopes, confidence)
        return Estimate(mean, lo, hi, n, "slope per seed, t over seeds", n - 1)
    b, se = _slope(df[x].to_numpy(), df[y].to_numpy())
    if not math.isfinite(se):
        return Estimate(b, math.nan, math.nan, len(seeds), "one seed, too few points for an interval")
    half = float(student_t.ppf(0.5 + confidence / 2, len(df) - 2) * se)
    return Estimate(b, b - half, b + half, len(seeds), "one seed: the slope's t interval from its residuals",
                    len(df) - 2)


def paired_difference(frame: pd.DataFrame, key: str, a: float, b: float, y: str, n_col: str | None = None,
                      confidence: float = CONFIDENCE) -> Estimate:
    """``y`` at ``key == a`` minus ``y`` at ``key == b``, paired by seed (t over seeds); with
    one seed, the normal interval of a difference of two proportions observed on ``n_col``
    samples each (NaN bounds without ``n_col``)."""
    rows = frame[np.isclose(frame[key].astype(float), a) | np.isclose(frame[key].astype(float), b)]
    wide = rows.assign(side=np.where(np.isclose(rows[key].astype(float), a), "a", "b")).pivot_table(
        index="seed", columns="side", values=y, aggfunc="mean")
    if not {"a", "b"} <= set(wide.columns):
        return Estimate(math.nan, math.nan, math.nan, 0, "missing setting")
    diffs = (wide["a"] - wide["b"]).dropna()
    if len(diffs) >= 2:
        mean, lo, hi, n = t_interval(diffs.to_numpy(), confidence)
        return Estimate(mean, lo, hi, n, "paired by seed, t over seeds", n - 1)
    if len(diffs) == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, "missing setting")
    d = float(diffs.iloc[0])
    if n_col is None or n_col not in rows:
        return Estimate(d, math.nan, math.nan, 1, "one seed")
    pa, pb = float(wide["a"].iloc[0]), float(wide["b"].iloc[0])
    n_samples = float(pd.to_numeric(rows[n_col], errors="coerce").mean())
    se = math.sqrt(max(pa * (1 - pa), 0) / n_samples + max(pb * (1 - pb), 0) / n_samples)
    half = float(norm.ppf(0.5 + confidence / 2) * se)
    return Estimate(d, d - half, d + half, 1, "one seed: binomial sampling of both accuracies")


def reading(est: Estimate, sign: int, margin: float = 0.0) -> str:
    """agrees / disagrees / undecided: ``sign`` +1 claims the value lies above ``margin``,
    −1 that it lies below; the interval decides (undecided when it contains ``margin``)."""
    if not (math.isfinite(est.lo) and math.isfinite(est.hi)):
        return UNDECIDED
    if sign > 0:
        return AGREES if est.lo > margin else DISAGREES if est.hi < margin else UNDECIDED
    return AGREES if est.hi < margin else DISAGREES if est.lo > margin else UNDECIDED


def _claim(figure, model, label, statement, measure, est: Estimate, verdict, detail="", boundary: float = 0.0) -> Claim:
    return Claim(figure, model, label, statement, measure, est.value, est.lo, est.hi, est.n, est.method, verdict,
                 detail, boundary, est.df)


def _monotone_note(frame: pd.DataFrame, x: str, y: str) -> str:
    means = frame.groupby(x)[y].mean().sort_index()
    ups = [(a, b) for (a, ya), (b, yb) in zip(means.items(), list(means.items())[1:]) if yb > ya]
    if not ups:
        return f"the mean falls at every step of {x.replace('_', ' ')}"
    steps = ", ".join(f"{a:g}→{b:g}" for a, b in ups)
    return f"the mean rises at {len(ups)} of {len(means) - 1} steps ({steps})"


def accuracy_claims(acc: pd.DataFrame) -> list[Claim]:
    """Figure 4: small κ can help the MLP; the CNN holds its baseline up to κ ≈ 0.2; beyond,
    accuracy falls with κ (every model). ``acc``: model, kappa, seed, test_accuracy, n_test."""
    out: list[Claim] = []
    for model, g in acc.groupby("model", sort=False):
        name = MODEL_NAMES.get(model, model)
        has_small = bool(np.isclose(g["kappa"], 0.2).any() and np.isclose(g["kappa"], 0.0).any())
        if has_small and model == "mlp":
            est = paired_difference(g, "kappa", 0.2, 0.0, "test_accuracy", "n_test")
            out.append(_claim("Figure 4", model, "accuracy at κ 0.2 − baseline",
                              "A small κ (≈ 0.2) can help the MLP (it regularises).",
                              "test accuracy at κ = 0.2 minus the baseline's", est, reading(est, +1)))
        elif has_small:
            est = paired_difference(g, "kappa", 0.2, 0.0, "test_accuracy", "n_test")
            out.append(_claim("Figure 4", model, "accuracy at κ 0.2 − baseline",
                              f"The {name} holds its baseline accuracy up to κ ≈ 0.2.",
                              f"test accuracy at κ = 0.2 minus the baseline's (holds: a loss below "
                              f"{HOLD_MARGIN * 100:g} points)", est, reading(est, +1, -HOLD_MARGIN),
                              boundary=-HOLD_MARGIN))
        beyond = g[g["kappa"] >= 0.2 - 1e-12]
        if beyond["kappa"].nunique() >= 2:
            est = trend(beyond, "kappa", "test_accuracy")
            out.append(_claim("Figure 4", model, "accuracy slope on κ ≥ 0.2",
                              f"Beyond κ ≈ 0.2 the {name}'s accuracy degrades monotonically.",
                              "slope of test accuracy against κ over κ ≥ 0.2 (per unit κ)", est, reading(est, -1),
                              _monotone_note(beyond, "kappa", "test_accuracy")))
    return out


def leakage_claims(sweep: pd.DataFrame) -> list[Claim]:
    """Figures 5–7: attack AUC, precision and recall fall as κ grows (MG-noise targets and
    the baseline of each model). ``sweep``: the shadow attack's rows."""
    out: list[Claim] = []
    mg = sweep[~sweep["dp"].astype(bool)]
    for model, g in mg.groupby("model", sort=False):
        if g["kappa"].nunique() < 2:
            continue
        for metric, fig in (("auc", "Figure 5"), ("precision", "Figure 6"), ("recall", "Figure 7")):
            est = trend(g, "kappa", metric)
            out.append(_claim(fig, model, f"{metric if metric != 'auc' else 'AUC'} slope on κ",
                              f"Leakage falls as κ grows: the {METRIC_NAMES[metric]} against the "
                              f"{MODEL_NAMES.get(model, model)} decreases with κ.",
                              f"slope of the {METRIC_NAMES[metric]} against κ (per unit κ)", est, reading(est, -1),
                              _monotone_note(g, "kappa", metric)))
    return out


def epoch_claims(epochs: pd.DataFrame) -> list[Claim]:
    """The epoch sweep: leakage (attack AUC) grows with epochs at every κ, and more slowly for
    a larger κ (the largest κ's slope minus the baseline's, paired by seed)."""
    out: list[Claim] = []
    if epochs.empty or epochs["epochs"].nunique() < 2:
        return out
    slopes = {}
    for kappa, g in epochs.groupby("kappa"):
        est = trend(g, "epochs", "auc")
        slopes[float(kappa)] = g
        out.append(_claim("Epoch sweep (Figures 5–7)", "cnn", f"AUC slope on epochs, κ {kappa:g}",
                          f"Leakage grows with the epochs trained (κ = {kappa:g}).",
                          "slope of the attack AUC against epochs (per 100 epochs)",
                          Estimate(est.value * 100, est.lo * 100, est.hi * 100, est.n, est.method, est.df),
                          reading(est, +1), _monotone_note(g, "epochs", "auc")))
    if len(slopes) >= 2:
        lo_k, hi_k = min(slopes), max(slopes)
        per_seed = []
        for seed in sorted(set(slopes[lo_k]["seed"]) & set(slopes[hi_k]["seed"])):
            a = slopes[hi_k][slopes[hi_k]["seed"] == seed]
            b = slopes[lo_k][slopes[lo_k]["seed"] == seed]
            per_seed.append(_slope(a["epochs"], a["auc"])[0] - _slope(b["epochs"], b["auc"])[0])
        if len(per_seed) >= 2:
            mean, lo, hi, n = t_interval(np.asarray(per_seed) * 100)
            est = Estimate(mean, lo, hi, n, "paired by seed, t over seeds", n - 1)
        else:
            est = Estimate(per_seed[0] * 100 if per_seed else math.nan, math.nan, math.nan, len(per_seed),
                           "one seed: no interval for a difference of slopes")
        out.append(_claim("Epoch sweep (Figures 5–7)", "cnn", f"AUC slope, κ {hi_k:g} − κ {lo_k:g}",
                          f"Leakage grows more slowly for a larger κ (κ = {hi_k:g} against κ = {lo_k:g}).",
                          f"AUC slope at κ = {hi_k:g} minus at κ = {lo_k:g} (per 100 epochs)", est,
                          reading(est, -1)))
    return out


def tradeoff_claims(sweep: pd.DataFrame) -> list[Claim]:
    """Figures 9–10: precision and recall (and AUC) of the paper's attack at equal test
    accuracy, DP-SGD − MG noise, for each CNN (the summary layer's comparison and reading)."""
    out: list[Claim] = []
    if sweep.empty or not sweep["dp"].astype(bool).any():
        return out
    with_dp = sweep.groupby("model")["dp"].transform(lambda d: d.astype(bool).any())
    comp = comparisons(sweep[with_dp.astype(bool)])
    for _, r in comp.iterrows():
        if r["metric"] not in ("precision", "recall", "auc"):
            continue
        fig = {"precision": "Figure 9", "recall": "Figure 10", "auc": "Figures 9–10"}[r["metric"]]
        n = int(r["n_seeds"] or 0)
        how = str(r.get("interval", "")) or "iso-accuracy gap"
        est = Estimate(float(r["gap"]), float(r["gap_lo"]), float(r["gap_hi"]), n, how,
                       n - 1 if how.startswith("t over") and n >= 2 else math.inf)
        verdict = str(r["verdict"]) if isinstance(r["verdict"], str) and r["verdict"] else str(r.get("reason", ""))
        out.append(_claim(fig, r["model"], f"DP − MG {r['metric'] if r['metric'] != 'auc' else 'AUC'}",
                          f"The paper sets MG noise (over κ) beside DP-SGD (over σ): {METRIC_NAMES[r['metric']]} "
                          "against test accuracy, compared at equal accuracy.",
                          f"{METRIC_NAMES[r['metric']]}, DP-SGD − MG noise at equal accuracy "
                          f"({r['acc_low']:.3f}–{r['acc_high']:.3f})" if np.isfinite(r["acc_low"]) else
                          f"{METRIC_NAMES[r['metric']]}, DP-SGD − MG noise at equal accuracy", est, verdict))
    return out


def familywise(claims: list[Claim], confidence: float = CONFIDENCE) -> list[Claim]:
    """The claims with their readings made family-wise over the whole run (module docstring):
    ``p_value``, ``p_adjusted`` (Holm–Bonferroni over the claims that have an interval),
    ``comparisons``; ``verdict`` keeps a reading that names a side (agrees, disagrees, or a
    defence) only where the adjusted p is at most 1 − ``confidence``, else it becomes
    undecided (no significant difference); ``row_verdict`` is the claim's own reading."""
    alpha = round(1.0 - confidence, 12)
    p = []
    for c in claims:
        se = interval_se(c.value, c.lo, c.hi, confidence=confidence, df=c.df, bounds=(-math.inf, math.inf))
        p.append(math.nan if c.verdict == NOT_CHECKED else two_sided_pvalue(c.value, se, c.boundary, c.df))
    tested = [i for i, v in enumerate(p) if math.isfinite(v)]
    adjusted = dict(zip(tested, holm([p[i] for i in tested])))
    out = []
    for i, c in enumerate(claims):
        adj = float(adjusted.get(i, math.nan))
        verdict = c.verdict
        if not (math.isfinite(adj) and adj <= alpha):
            verdict = {AGREES: UNDECIDED, DISAGREES: UNDECIDED, VERDICT_MG: VERDICT_TIE,
                       VERDICT_DP: VERDICT_TIE}.get(verdict, verdict)
        out.append(replace(c, verdict=verdict, row_verdict=c.verdict, p_value=p[i], p_adjusted=adj,
                           comparisons=len(tested)))
    return out


def correction_text(claims: list[Claim], confidence: float = CONFIDENCE) -> str:
    """How the counts were made family-wise, in words."""
    k = max((c.comparisons for c in claims), default=0)
    return f"{HOLM} over the {k} claims with an interval, {100 * (1 - confidence):g} % family-wise"
