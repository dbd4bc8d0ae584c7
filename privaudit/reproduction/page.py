"""The reproduction's outputs under ``reports/reproduce/mg-noise/``: CSVs, figures, a page.

* ``accuracy.csv``, ``sweep.csv``, ``epochs.csv``: one row per model (and attack);
* ``claims.csv``: every statement of the paper beside the measured number, its 95 %
  interval and the reading (:mod:`privaudit.reproduction.claims`);
* ``figure-*.svg``: the paper's figures redrawn, means over seeds with 95 % t intervals;
* ``summary.json``: the protocol, the wall time, the claims; ``index.html``: all of it on one
  self-contained page (figures inlined, nothing loaded from the network).

Every file is written atomically, so an interrupted run never leaves a half-written one.
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from privaudit.files.atomic import write_json, write_text
from privaudit.reporting.plots import line_plot
from privaudit.analysis.familywise import p_text
from privaudit.reporting.summary import t_interval
from privaudit.reporting.templates import render, stylesheet
from privaudit.reproduction.claims import (AGREES, DISAGREES, MODEL_NAMES, Claim, accuracy_claims, correction_text,
                                          epoch_claims, familywise, leakage_claims, tradeoff_claims)
from privaudit.reproduction.protocol import Protocol
from privaudit.reproduction.run import Frames

FOLDER = ("reproduce", "mg-noise")  # under the workspace's reports/
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


@dataclass
class Figure:
    name: str        # file stem
    title: str
    svg: str
    section: str     # the page's section (the claims' ``figure``) it is shown in


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


def _fmt(v: float, digits: int = 3) -> str:
    return "—" if not (isinstance(v, (int, float)) and math.isfinite(v)) else f"{v:+.{digits}f}"


def _verdict_class(verdict: str) -> str:
    return {AGREES: "agrees", DISAGREES: "disagrees"}.get(verdict, "undecided")


def write_outputs(reports: Path, protocol: Protocol, frames: Frames, *, wall_seconds: float | None = None,
                  command: str = "") -> dict:
    """Write the CSVs, figures, ``summary.json`` and ``index.html`` under
    ``reports/reproduce/mg-noise/``; return the summary (what ``--json`` prints)."""
    folder = reports.joinpath(*FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    tables = {"accuracy.csv": frames.accuracy, "sweep.csv": frames.sweep, "epochs.csv": frames.epochs}
    for name, frame in tables.items():
        write_text(folder / name, frame.to_csv(index=False, float_format="%.6g"))
    claims = familywise(claims_of(frames))
    claim_frame = pd.DataFrame([c.to_dict() for c in claims])
    write_text(folder / "claims.csv", claim_frame.to_csv(index=False, float_format="%.6g"))
    figs = figures(frames)
    for f in figs:
        write_text(folder / f"{f.name}.svg", f.svg)
    counts = {v: sum(c.verdict == v for c in claims) for v in (AGREES, DISAGREES)}
    counts["other"] = len(claims) - counts[AGREES] - counts[DISAGREES]
    # the counts are family-wise; what the claims' own intervals say, one by one, beside them
    familywise_counts = {"row_agrees": sum(c.row_verdict == AGREES for c in claims),
                         "row_disagrees": sum(c.row_verdict == DISAGREES for c in claims),
                         "comparisons": max((c.comparisons for c in claims), default=0),
                         "correction": correction_text(claims)}
    summary = {"paper": PAPER, "protocol": protocol.describe(), "wall_seconds": wall_seconds, "command": command,
               "folder": str(folder), "models_missing": len(frames.missing), "counts": counts,
               "familywise": familywise_counts,
               "claims": [c.to_dict() for c in claims], "figures": [f"{f.name}.svg" for f in figs],
               "tables": [*tables, "claims.csv"]}
    write_json(folder / "summary.json", summary)
    sections: dict[str, dict] = {}
    for name in SECTION_ORDER:
        sections[name] = {"claims": [], "images": []}
    for c in claims:
        sections.setdefault(c.figure, {"claims": [], "images": []})["claims"].append(
            {**c.to_dict(), "model_name": MODEL_NAMES.get(c.model, c.model), "value_text": _fmt(c.value),
             "lo_text": _fmt(c.lo), "hi_text": _fmt(c.hi), "css": _verdict_class(c.verdict),
             "p_text": p_text(c.p_adjusted, "adjusted p") if math.isfinite(c.p_adjusted) else "",
             "own": c.row_verdict if c.row_verdict != c.verdict else ""})
    for f in figs:
        sections.setdefault(f.section, {"claims": [], "images": []})["images"].append(
            {"title": f.title, "file": f"{f.name}.svg", "data": base64.b64encode(f.svg.encode("utf-8")).decode("ascii")})
    sections = {k: v for k, v in sections.items() if v["claims"] or v["images"]}
    page = render("reproduce.html.j2", css=stylesheet(), paper=PAPER, protocol=protocol.describe(),
                  sections=sections, counts=counts, familywise=familywise_counts, missing=frames.missing[:20],
                  n_missing=len(frames.missing), wall=wall_seconds, command=command,
                  generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  tables=summary["tables"])
    write_text(folder / "index.html", page)
    summary["html"] = str(folder / "index.html")
    return summary

