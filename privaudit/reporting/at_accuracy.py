"""Which defence at your accuracy: each defence searched to each target test accuracy
(``audit --target-accuracies``), judged by the audit's strongest attack and by the weak
one-shadow evaluation other tools use, with 95 % intervals and verdicts from them.

Input: the summary's per-(setting, attack) rows and per-setting overview
(:mod:`privaudit.reporting.summary`), and the search's outcome, ``reports/accuracy_targets.json``
(:func:`privaudit.executor.auditing.save_target_matches`): per recipe, defence and target
accuracy, the knob found (or why none was) and the run trained at it.

Per target accuracy and defence, one row: the setting that reached it, its test accuracy with
its interval (over seeds, or binomial for one seed), the strongest attack's TPR at 0.1 % and
1 % FPR with their intervals, its Gaussian-DP μ over the setting's pool models with its
interval (``strong_mu``, ``n_models``; docs/methods/e-replicates.md E), the weak attack's (the ML-Leaks
one-shadow attack, ``shadow``), and how much the weak evaluation overstated privacy (strong −
weak TPR at 0.1 % FPR, in percentage points). The verdict among the k defences that reached
one target compares μ over models where every defence has it (``measure``), else the
strongest attack's TPR at 0.1 % FPR on the target: the lowest *leaks least*; another *leaks
more* when its difference from the least one is significant family-wise at 5 %, and *cannot
be told apart* otherwise.

The family is every pair of the k defences, k (k − 1)/2 comparisons, not only the k − 1
against the least one: which defence leaks least is read from the same data, and comparing
the others with the observed minimum alone would test the largest gaps at the level of one
(with 5 equal defences it would name one "leaks more" in about 10 % of audits). Each pair's
two-sided p-value comes from the rows' own intervals (:func:`privaudit.analysis.familywise.interval_se`):
Welch's t-test where both rows are means over seeds (their intervals are Student's t, so
the standard errors are read back exactly), a normal test otherwise (one seed: the
Clopper–Pearson interval's width as a normal standard error, an approximation); Holm–Bonferroni
over the pairs (``p_adjusted``; ``comparisons`` and ``correction`` say over how many). The
bracketed intervals stay 95 % intervals of each row on its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privaudit.analysis.familywise import ALPHA, HOLM, difference_pvalue, holm, interval_se
from privaudit.analysis.matching import ABOVE_TARGET
from privaudit.defences import other as other_defence
from privaudit.errors import ConfigError

WEAK_ATTACK = "shadow"
METRICS = ("tpr_at_0p1pct_fpr", "tpr_at_1pct_fpr")
LEAST, MORE, TIED = "leaks least", "leaks more", "cannot be told apart"
COLUMNS = ["model", "dataset", "target_accuracy", "defence", "setting", "status", "knob", "n_seeds", "test_accuracy",
           "test_accuracy_lo", "test_accuracy_hi", "strong_attack",
           *(f"strong_{m}{s}" for m in METRICS for s in ("", "_lo", "_hi")),
           *(f"weak_{m}{s}" for m in METRICS for s in ("", "_lo", "_hi")),
           *(f"canary_{m}{s}" for m in METRICS for s in ("", "_lo", "_hi")),
           "strong_mu", "strong_mu_lo", "strong_mu_hi", "n_models", "measure",
           "overstated_pp", "verdict", "p_value", "p_adjusted", "comparisons", "correction",
           "accuracy_range_lo", "accuracy_range_hi", "search_trainings"]


def _title(name: str) -> str:
    from privaudit.defences import get

    return get(name).title


def _matches(st: pd.DataFrame, model: str, dataset: str, name: str, knob: float) -> pd.DataFrame:
    """The summary rows of one defence setting."""
    rows = st[(st["model"].astype(str) == model) & (st["dataset"].astype(str) == dataset)]
    value = pd.to_numeric(rows["knob"], errors="coerce").to_numpy(float)
    keep = (rows["defence"].astype(str) == name).to_numpy() & np.isclose(value, knob, rtol=1e-6)
    return rows[keep]


def at_accuracy(settings: pd.DataFrame, overview: pd.DataFrame, entries: Sequence[dict]) -> pd.DataFrame:
    """The section's rows (:data:`COLUMNS`), one per target accuracy and defence searched."""
    out: list[dict[str, Any]] = []
    for e in entries:
        try:
            model, dataset, name = str(e["model"]), str(e["dataset"]), str(e["defence"])
            target = float(e["target_accuracy"])
            title = _title(name)
        except (KeyError, TypeError, ValueError, OverflowError, ConfigError):  # a foreign entry is skipped
            continue
        rng = e.get("accuracy_range") or [math.nan, math.nan]
        row: dict[str, Any] = {c: math.nan for c in COLUMNS}
        row.update(model=model, dataset=dataset, target_accuracy=target, defence=title, status=str(e.get("status")),
                   setting="—", verdict="", correction="", measure="", comparisons=0, accuracy_range_lo=rng[0],
                   accuracy_range_hi=rng[1],
                   search_trainings=len(e.get("steps") or []), strong_attack="")
        knob = e.get("knob")
        rows = _matches(settings, model, dataset, name, float(knob)) if knob is not None else settings[:0]
        if len(rows):
            assert knob is not None  # rows is empty without a knob
            first = rows.iloc[0]
            ov = overview[overview["setting_id"] == first["setting_id"]]
            strong = ov["strongest"].iloc[0] if len(ov) else None
            by_attack = rows.set_index("attack")
            other = other_defence(name)
            setting = other.knob.text(float(knob)) if other is not None and other.knob is not None else first["setting"]
            row.update(setting=str(setting), knob=float(knob), n_seeds=int(rows["n_seeds"].max()))
            for c in ("test_accuracy", "test_accuracy_lo", "test_accuracy_hi"):
                row[c] = float(ov[c].iloc[0]) if len(ov) and c in ov else math.nan
            for side, attack in (("strong", strong), ("weak", WEAK_ATTACK)):
                if attack is not None and attack in by_attack.index:
                    r = by_attack.loc[attack]
                    for m in METRICS:
                        for s in ("", "_lo", "_hi"):
                            row[f"{side}_{m}{s}"] = float(r.get(f"{m}{s}", math.nan))
            if strong is not None and strong in by_attack.index:  # planted canaries, strongest attack
                r = by_attack.loc[strong]
                for m in METRICS:
                    for s in ("", "_lo", "_hi"):
                        row[f"canary_{m}{s}"] = float(r.get(f"canary_{m}{s}", math.nan))
            if strong is not None and strong in by_attack.index:  # μ over the setting's pool models
                r = by_attack.loc[strong]
                for s in ("", "_lo", "_hi"):
                    row[f"strong_mu{s}"] = float(r.get(f"pool_gdp_mu{s}", math.nan))
                row["n_models"] = float(r.get("pool_n", math.nan))
            row["strong_attack"] = strong or ""
            row["overstated_pp"] = 100 * (row["strong_tpr_at_0p1pct_fpr"] - row["weak_tpr_at_0p1pct_fpr"])
        elif row["status"] == "reached":
            row["status"] = "reached, not audited yet"
        out.append(row)
    frame = pd.DataFrame(out, columns=COLUMNS)
    return _verdicts(frame)


#: the measure a target's verdicts compare: the strongest attack's μ over the settings' pool
#: models where every compared row has it, else its TPR at 0.1 % FPR on the targets
MU, TPR = "strong_mu", "strong_tpr_at_0p1pct_fpr"
MEASURES = {MU: "μ over pool models", TPR: "TPR at 0.1 % FPR"}


def _se(r: pd.Series, m: str) -> tuple[float, float]:
    """(standard error, degrees of freedom) of a row's measure ``m``, from its interval: μ over
    one seed's pool on its pairs − 1 degrees of freedom, over seeds Student's t on n − 1, a
    target's TPR with one seed a normal approximation."""
    n = r["n_seeds"]
    df = float(n - 1) if math.isfinite(n) and n >= 2 else math.inf
    if m == MU and not n >= 2:
        df = float(r["n_models"] // 2 - 1)
    return interval_se(r[m], r[f"{m}_lo"], r[f"{m}_hi"], df=df, bounds=(0.0, math.inf) if m == MU else (0.0, 1.0)), df


def _measure(ok: pd.DataFrame) -> str:
    """:data:`MU` when every row of ``ok`` has μ over at least 6 pool models with an interval."""
    cols = ok[[MU, f"{MU}_lo", f"{MU}_hi", "n_models"]].to_numpy(float)
    return MU if np.isfinite(cols).all() and (cols[:, 3] >= 6).all() else TPR


def _verdicts(frame: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Each target's verdicts, family-wise over every pair of its defences (module docstring)."""
    if frame.empty:
        return frame
    frame = frame.copy()
    for c in (MU, f"{MU}_lo", f"{MU}_hi", "n_models"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce") if c in frame else math.nan
    frame["measure"] = frame["measure"].astype(object) if "measure" in frame else ""
    for _, g in frame.groupby(["model", "dataset", "target_accuracy"], sort=False):
        above = g.index[g["status"] == ABOVE_TARGET]
        frame.loc[above, "verdict"] = "not compared: above the target at its strongest setting"
        ok = g[np.isfinite(g[TPR].to_numpy(float)) & (g["status"] != ABOVE_TARGET).to_numpy()]
        if ok.empty:
            continue
        m = _measure(ok)
        frame.loc[ok.index, "measure"] = MEASURES[m]
        best = ok[m].idxmin()
        if len(ok) == 1:
            frame.loc[best, "verdict"] = ""
            continue
        se = {i: _se(r, m) for i, r in ok.iterrows()}
        pairs = [(i, j) for a, i in enumerate(ok.index) for j in ok.index[a + 1:]]
        raw = [difference_pvalue(ok.loc[i, m], *se[i], ok.loc[j, m], *se[j]) for i, j in pairs]
        adjusted = dict(zip(pairs, holm(raw)))
        raw_of = dict(zip(pairs, raw))
        correction = (f"{HOLM} over the {len(pairs)} pairwise comparisons of the {len(ok)} defences at this "
                      f"accuracy, {100 * alpha:g} % family-wise")
        name = ok.loc[best, "defence"]
        for i in ok.index:
            frame.loc[i, ["comparisons", "correction"]] = [len(pairs), correction]
            if i == best:
                frame.loc[i, "verdict"] = LEAST
                continue
            key = (i, best) if (i, best) in adjusted else (best, i)
            frame.loc[i, ["p_value", "p_adjusted"]] = [raw_of[key], adjusted[key]]
            more = adjusted[key] <= alpha and ok.loc[i, m] > ok.loc[best, m]
            frame.loc[i, "verdict"] = f"{MORE} than {name}" if more else f"{TIED} from {name}"
    order = frame["target_accuracy"].rank(method="dense", ascending=False)
    compared = np.where(frame["measure"] == MEASURES[MU], frame[MU], frame[TPR])  # each target by what it compares
    return (frame.assign(_o=order, _m=compared).sort_values(["model", "dataset", "_o", "_m"], kind="stable",
                                                            na_position="last")
            .drop(columns=["_o", "_m"]).reset_index(drop=True))


def pareto_series(overview: pd.DataFrame, settings: pd.DataFrame, model: str, dataset: str) -> list[dict]:  # noqa: D401
    """The Pareto plot's curves of one (model, dataset) group: per defence family, its
    settings' strongest-attack TPR at 0.1 % FPR (with intervals) against test accuracy, the
    undefended baseline drawn as its own point."""
    ov = overview[(overview["model"].astype(str) == model) & (overview["dataset"].astype(str) == dataset)]
    series = []
    for family, g in ov.groupby("family", sort=False):
        xs, ys, lo, hi = [], [], [], []
        for _, o in g.iterrows():
            s = settings[(settings["setting_id"] == o["setting_id"]) & (settings["attack"] == o["strongest"])]
            if s.empty:
                continue
            r = s.iloc[0]
            xs.append(float(o["test_accuracy"]))
            ys.append(100 * float(r["tpr_at_0p1pct_fpr"]))
            lo.append(100 * float(r.get("tpr_at_0p1pct_fpr_lo", math.nan)))
            hi.append(100 * float(r.get("tpr_at_0p1pct_fpr_hi", math.nan)))
        if xs:
            order = np.argsort(xs)
            series.append({"label": str(family), "x": np.asarray(xs)[order], "y": np.asarray(ys)[order],
                           "y_lo": np.asarray(lo)[order], "y_hi": np.asarray(hi)[order],
                           "line": family != "baseline"})
    return series


def other_defences_audited(overview: pd.DataFrame) -> bool:
    """Whether the audit holds any defence beside the baseline, MG noise and DP."""
    return bool(len(overview)) and overview["family"].map(lambda f: f not in (
        "baseline", "MG noise", "DP-SGD", "MG + DP-SGD")).any()


__all__ = ["at_accuracy", "pareto_series", "other_defences_audited", "COLUMNS"]
