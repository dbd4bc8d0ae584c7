"""The mg-noise reproduction's outputs under ``reports/reproduce/mg-noise/``: CSVs, figures, a page.

* ``accuracy.csv``, ``sweep.csv``, ``epochs.csv``: one row per model (and attack);
* ``claims.csv``: every statement of the paper beside the measured number, its 95 %
  interval and the reading (:mod:`privaudit.reproduction.claims`);
* ``figure-*.svg``: the paper's figures redrawn, means over seeds with 95 % t intervals;
* ``summary.json``: the protocol, the wall time, the claims; ``index.html``: all of it on one
  self-contained page (figures inlined, nothing loaded from the network).

Every file is written atomically, so an interrupted run never leaves a half-written one.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from privaudit.reporting.plots import line_plot
from privaudit.reporting.summary import t_interval
from privaudit.reproduction.claims import (
    MODEL_NAMES,
    Claim,
    accuracy_claims,
    epoch_claims,
    leakage_claims,
    tradeoff_claims,
)
from privaudit.reproduction.outputs import Figure, Outcome
from privaudit.reproduction.outputs import write_outputs as write
from privaudit.reproduction.protocol import Protocol
from privaudit.reproduction.run import Frames

KEY = "mg-noise"  # the folder under reports/reproduce/
SECTION_ORDER = ("Figure 4", "Figure 5", "Figure 6", "Figure 7", "Epoch sweep (Figures 5–7)", "Figure 9",
                 "Figure 10", "Figures 9–10")
PAPER = ("Kolomvaki, Liao, Dramko, Guang, Kyrillidis, Convergence Analysis of Two-Layer Neural Networks under "
         "Gaussian Input Masking, arXiv:2602.17423")


def _means(frame: pd.DataFrame, by: list[str], metric: str) -> pd.DataFrame:
    """Mean of ``metric`` per ``by`` with its 95 % t interval over seeds (NaN with one seed)."""
    rows = []
    for key, g in frame.groupby(by, sort=True):
        mean, lo, hi, n = t_interval(g[metric])
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "mean": mean, "lo": lo, "hi": hi,
                     "n": n, "x_mean": float(pd.to_numeric(g.get("test_accuracy"), errors="coerce").mean())
                     if "test_accuracy" in g else math.nan})
    return pd.DataFrame(rows)


def _bars(means: pd.DataFrame) -> dict:
    """Error bars of a plotted rate (accuracy, AUC, precision, recall): the t interval drawn
    within [0, 1], where every such rate lies (the CSVs keep the interval as computed)."""
    return {"y_lo": means["lo"].clip(0, 1).to_numpy(), "y_hi": means["hi"].clip(0, 1).to_numpy()}


def _series(means: pd.DataFrame, group: str, x: str, labels: dict | None = None) -> list:
    out = []
    for key, g in means.groupby(group, sort=False):
        g = g.sort_values(x)
        out.append({"label": (labels or {}).get(key, str(key)), "x": g[x].to_numpy(),
                    "y": g["mean"].to_numpy(), **_bars(g)})
    return out


def figures(frames: Frames) -> list[Figure]:
    """The paper's figures redrawn from ``frames``: 4 (accuracy vs κ), 5–7 (AUC, precision,
    recall vs κ), the epoch sweep (AUC vs epochs per κ), 9–10 (precision and recall vs test
    accuracy, MG noise and DP-SGD, per CNN)."""
    out: list[Figure] = []
    acc = frames.accuracy
    if len(acc):
        m = _means(acc, ["model", "kappa"], "test_accuracy")
        title = "Figure 4: test accuracy against κ"
        out.append(Figure("figure-4-accuracy", title, line_plot(
            _series(m, "model", "kappa", MODEL_NAMES), title=title, xlabel="κ (MG-noise mask std)",
            ylabel="test accuracy", standalone=True), "Figure 4"))
    mg = frames.sweep[~frames.sweep["dp"].astype(bool)] if len(frames.sweep) else frames.sweep
    for metric, num, word in (("auc", 5, "AUC"), ("precision", 6, "precision"), ("recall", 7, "recall")):
        if not len(mg):
            break
        m = _means(mg, ["model", "kappa"], metric)
        title = f"Figure {num}: attack {word} against κ"
        out.append(Figure(f"figure-{num}-{metric}", title, line_plot(
            _series(m, "model", "kappa", MODEL_NAMES), title=title, xlabel="κ (MG-noise mask std)",
            ylabel=f"shadow-model attack {word}", standalone=True), f"Figure {num}"))
    if len(frames.epochs):
        m = _means(frames.epochs, ["kappa", "epochs"], "auc")
        title = "Epoch sweep: attack AUC against epochs (Standard CNN)"
        out.append(Figure("figure-epochs-auc", title, line_plot(
            _series(m, "kappa", "epochs", {k: f"κ = {k:g}" for k in m["kappa"].unique()}), title=title,
            xlabel="epochs trained", ylabel="shadow-model attack AUC", standalone=True), "Epoch sweep (Figures 5–7)"))
    sweep = frames.sweep
    for model in (sweep["model"].unique() if len(sweep) else []):
        g = sweep[sweep["model"] == model]
        if not g["dp"].astype(bool).any():
            continue
        base = g[(~g["dp"].astype(bool)) & (g["kappa"] == 0)]
        curves = {"MG noise (over κ)": pd.concat([base, g[(~g["dp"].astype(bool)) & (g["kappa"] > 0)]]),
                  "DP-SGD (over σ)": pd.concat([base, g[g["dp"].astype(bool)]])}
        for metric, num in (("precision", 9), ("recall", 10)):
            series = []
            for label, rows in curves.items():
                # one point per setting (κ, σ); the baseline and MG rows have no σ
                m = _means(rows.assign(noise_multiplier=rows["noise_multiplier"].fillna(0.0)),
                           ["kappa", "noise_multiplier"], metric)
                m = m.sort_values("x_mean")
                series.append({"label": label, "x": m["x_mean"].to_numpy(), "y": m["mean"].to_numpy(), **_bars(m)})
            title = f"Figure {num}: attack {metric} against test accuracy, {MODEL_NAMES.get(model, model)}"
            out.append(Figure(f"figure-{num}-{metric}-{model}", title, line_plot(
                series, title=title, xlabel="test accuracy", ylabel=f"shadow-model attack {metric}",
                standalone=True), f"Figure {num}"))
    return out


def claims_of(frames: Frames) -> list[Claim]:
    """Every checkable statement of the paper, in figure order."""
    out = accuracy_claims(frames.accuracy) if len(frames.accuracy) else []
    if len(frames.sweep):
        out += leakage_claims(frames.sweep) + tradeoff_claims(frames.sweep)
    if len(frames.epochs):
        out += epoch_claims(frames.epochs)
    return out


def outcome(protocol: Protocol, frames: Frames) -> Outcome:
    """The mg-noise reproduction's statements, figures and tables, ready to write."""
    d = protocol.describe()
    where = "" if protocol.dataset == "cifar10" else f" on the {protocol.dataset}"
    glance = [f"Scale {d['scale']} on {d['dataset']}: parts of {d['part_size']:,} images, {len(d['seeds'])} "
              f"seed{'s' if len(d['seeds']) != 1 else ''} ({', '.join(map(str, d['seeds']))}), models "
              f"{', '.join(d['models'])}, {d['models_needed']} models in all."]
    return Outcome(key=KEY, paper=PAPER, title=f"The MG-noise paper's CIFAR-10 results, reproduced{where}",
                   methods="Protocol: docs/methods/a-mg-noise.md A.3–A.5; how each statement is checked: "
                           "docs/methods/a-mg-noise.md A.6.",
                   settings=d, glance=glance, claims=claims_of(frames), figures=figures(frames),
                   tables={"accuracy.csv": frames.accuracy, "sweep.csv": frames.sweep, "epochs.csv": frames.epochs},
                   section_order=SECTION_ORDER, names=MODEL_NAMES, missing=list(frames.missing))


def write_outputs(reports: Path, protocol: Protocol, frames: Frames, *, wall_seconds: float | None = None,
                  command: str = "") -> dict:
    """Write the CSVs, figures, ``summary.json`` and ``index.html`` under
    ``reports/reproduce/mg-noise/`` (:func:`privaudit.reproduction.outputs.write_outputs`);
    return the summary (what ``--json`` prints)."""
    return write(reports, outcome(protocol, frames), wall_seconds=wall_seconds, command=command)
