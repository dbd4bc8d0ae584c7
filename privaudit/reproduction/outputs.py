"""The files every reproduction writes, and the index that links them.

A reproduction computes an :class:`Outcome` (its statements, figures and tables);
:func:`write_outputs` writes it under ``reports/reproduce/<key>/``:

* one CSV per table, and ``claims.csv``: every statement of the paper beside the measured
  number, its 95 % interval and the family-wise reading
  (:func:`privaudit.reproduction.claims.familywise`);
* ``figure-*.svg``: the paper's figures redrawn;
* ``summary.json``: the settings, the wall time, the counts and the claims; ``index.html``:
  all of it on one self-contained page (figures inlined, nothing loaded from the network).

:func:`write_index` then rewrites ``reports/reproduce/index.html``, one row per reproduction
found there with its counts. Every file is written atomically, so an interrupted run never
leaves a half-written one.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from privaudit.analysis.familywise import p_text
from privaudit.files.atomic import write_json, write_text
from privaudit.reporting.templates import render, stylesheet
from privaudit.reproduction.claims import AGREES, DISAGREES, Claim, correction_text, familywise

FOLDER = "reproduce"  # under the workspace's reports/


@dataclass
class Figure:
    """One redrawn figure: its file stem, title, SVG text and the page section it is shown in
    (the claims' ``figure``)."""

    name: str
    title: str
    svg: str
    section: str
    caption: str = "means over seeds, error bars 95 % t intervals over seeds"


@dataclass
class Outcome:
    """What one reproduction measured, ready to be written."""

    key: str                       #: the folder and command name, e.g. ``mg-noise``
    paper: str                     #: authors, title, arXiv id
    title: str                     #: the page's heading
    methods: str                   #: where docs/methods/ describes the protocol and the checks
    settings: dict                 #: the protocol as JSON (``scale``, ``seeds``, ``reduces``, …)
    glance: list[str]              #: sentences for the page's "at a glance", before the counts
    claims: list[Claim]            #: the statements, not yet family-wise
    figures: list[Figure]
    tables: dict[str, pd.DataFrame]  #: CSV name → rows
    section_order: Sequence[str] = ()
    names: dict[str, str] = field(default_factory=dict)  #: a claim's ``model`` → the name shown
    missing: list[str] = field(default_factory=list)     #: runs of the protocol not (yet) done
    notes: list[str] = field(default_factory=list)       #: sentences shown after the statements
    extra: dict = field(default_factory=dict)            #: more of ``summary.json``


def plan_headline(paper: str, plan: dict) -> str:
    """One line of a reproduction's plan (``--dry-run`` of hidden-state and masked-neurons,
    and the first line of their runs): what it trains, what is cached, and its estimate."""
    from privaudit.executor.preview import duration

    pools = (f" and {plan['audit_pools_to_train']} of {plan['audit_pools']} audit pools"
             if plan.get("audit_pools") else "")
    secs = plan.get("estimated_seconds", math.nan)
    estimate = (f"; estimate: about {duration(secs)} on this machine ({plan['cost_model']})"
                if isinstance(secs, (int, float)) and math.isfinite(secs) else "")
    return f"{paper}: {plan['to_train']} of {plan['runs']} runs to train{pools}{estimate}"


def _fmt(v: float, digits: int = 3) -> str:
    if not (isinstance(v, (int, float)) and math.isfinite(v)):
        return "—"
    return f"{v:+.{digits}g}" if abs(v) >= 1e4 else f"{v:+.{digits}f}"


def _interval(c: Claim) -> str:
    """The interval as the page shows it: "exact" for a computation with no randomness."""
    if math.isfinite(c.lo) and c.lo == c.hi == c.value:
        return "exact"
    return f"[{_fmt(c.lo)}, {_fmt(c.hi)}]"


def counts_of(claims: Sequence[Claim]) -> tuple[dict, dict]:
    """The family-wise counts (agrees, disagrees, other) and, beside them, the one-by-one
    counts and the correction in words."""
    counts = {v: sum(c.verdict == v for c in claims) for v in (AGREES, DISAGREES)}
    counts["other"] = len(claims) - counts[AGREES] - counts[DISAGREES]
    one_by_one = {"row_agrees": sum(c.row_verdict == AGREES for c in claims),
                  "row_disagrees": sum(c.row_verdict == DISAGREES for c in claims),
                  "comparisons": max((c.comparisons for c in claims), default=0),
                  "correction": correction_text(list(claims))}
    return counts, one_by_one


def write_outputs(reports: Path, outcome: Outcome, *, wall_seconds: float | None = None, command: str = "") -> dict:
    """Write ``outcome`` under ``reports/reproduce/<key>/`` and refresh the index; return the
    summary (what ``--json`` prints)."""
    folder = reports / FOLDER / outcome.key
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in outcome.tables.items():
        write_text(folder / name, frame.to_csv(index=False, float_format="%.6g"))
    claims = familywise(outcome.claims)
    write_text(folder / "claims.csv",
               pd.DataFrame([c.to_dict() for c in claims]).to_csv(index=False, float_format="%.6g"))
    for f in outcome.figures:
        write_text(folder / f"{f.name}.svg", f.svg)
    counts, one_by_one = counts_of(claims)
    summary = {"paper": outcome.paper, "reproduction": outcome.key, "protocol": outcome.settings,
               "wall_seconds": wall_seconds, "command": command, "folder": str(folder),
               "models_missing": len(outcome.missing), "counts": counts, "familywise": one_by_one,
               "claims": [c.to_dict() for c in claims], "figures": [f"{f.name}.svg" for f in outcome.figures],
               "tables": [*outcome.tables, "claims.csv"], **outcome.extra}
    write_json(folder / "summary.json", summary)
    sections: dict[str, dict] = {name: {"claims": [], "images": []} for name in outcome.section_order}
    for c in claims:
        sections.setdefault(c.figure, {"claims": [], "images": []})["claims"].append(
            {**c.to_dict(), "model_name": outcome.names.get(c.model, c.model), "value_text": _fmt(c.value),
             "lo_text": _fmt(c.lo), "hi_text": _fmt(c.hi), "interval_text": _interval(c),
             "css": {AGREES: "agrees", DISAGREES: "disagrees"}.get(c.verdict, "undecided"),
             "p_text": p_text(c.p_adjusted, "adjusted p") if math.isfinite(c.p_adjusted) else "",
             "own": c.row_verdict if c.row_verdict != c.verdict else ""})
    for f in outcome.figures:
        sections.setdefault(f.section, {"claims": [], "images": []})["images"].append(
            {"title": f.title, "file": f"{f.name}.svg", "caption": f.caption,
             "data": base64.b64encode(f.svg.encode("utf-8")).decode("ascii")})
    sections = {k: v for k, v in sections.items() if v["claims"] or v["images"]}
    seeds = outcome.settings.get("seeds", [])
    page = render("reproduce.html.j2", css=stylesheet(), title=outcome.title, paper=outcome.paper,
                  methods=outcome.methods, protocol=outcome.settings, glance=outcome.glance, notes=outcome.notes,
                  one_seed=len(seeds) < 2, sections=sections, counts=counts, familywise=one_by_one,
                  missing=outcome.missing[:20], n_missing=len(outcome.missing), wall=wall_seconds, command=command,
                  generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  tables=summary["tables"])
    write_text(folder / "index.html", page)
    summary["html"] = str(folder / "index.html")
    write_index(reports)
    return summary


def write_index(reports: Path) -> Path:
    """``reports/reproduce/index.html``: every reproduction in the workspace, with its scale,
    seeds, counts (family-wise and one by one) and a link to its page."""
    root = reports / FOLDER
    rows = []
    for path in sorted(root.glob("*/summary.json")):
        try:
            s = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a page being written by another run, or not ours
        if not isinstance(s, dict) or "counts" not in s:
            continue
        proto, fw, n = s.get("protocol", {}), s.get("familywise", {}), s["counts"]
        rows.append({"key": path.parent.name, "paper": s.get("paper", ""), "scale": proto.get("scale", ""),
                     "dataset": proto.get("dataset", ""), "seeds": ", ".join(map(str, proto.get("seeds", []))),
                     "agrees": n.get("agrees", 0), "disagrees": n.get("disagrees", 0), "other": n.get("other", 0),
                     "row_agrees": fw.get("row_agrees", 0), "row_disagrees": fw.get("row_disagrees", 0),
                     "claims": len(s.get("claims", [])), "missing": s.get("models_missing", 0),
                     "wall": s.get("wall_seconds"), "command": s.get("command", "")})
    page = render("reproduce_index.html.j2", css=stylesheet(), rows=rows,
                  generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    root.mkdir(parents=True, exist_ok=True)
    write_text(root / "index.html", page)
    return root / "index.html"
