"""A scan's outputs: ``attacks.csv``, ``groups.csv``, ``scores.npz``, ``summary.json``, ``roc.svg``
and a self-contained ``index.html``, every file written atomically."""

from __future__ import annotations

import base64
import datetime as _dt
import io
import math
from pathlib import Path

import numpy as np

from privaudit.analysis.familywise import p_text
from privaudit.analysis.metrics import roc
from privaudit.attacks.registry import description
from privaudit.errors import write_error
from privaudit.files.atomic import write_bytes, write_json, write_text
from privaudit.reporting.curves import EXACT_FPR
from privaudit.reporting.plots import line_plot
from privaudit.reporting.templates import render, stylesheet
from privaudit.scanning import FILES
from privaudit.scanning.run import CALIBRATION, ScanResult

CSV_COLUMNS = ("attack", "auc", "auc_lo", "auc_hi", "tpr_at_1pct_fpr", "tpr_at_1pct_fpr_lo", "tpr_at_1pct_fpr_hi",
               "tpr_at_0p1pct_fpr", "tpr_at_0p1pct_fpr_lo", "tpr_at_0p1pct_fpr_hi", "precision", "recall", "accuracy",
               "advantage", "threshold", "eps_lower_bound", "eps_fpr", "gdp_mu", "gdp_epsilon", "calibration",
               "description")


def leaks(m: dict) -> bool | None:
    """Whether an attack's own 95 % AUC interval lies above 0.5 (None when it has no interval):
    a statement about that row alone, not the headline (:func:`headline`)."""
    lo = m.get("auc_lo")
    return None if lo is None or not math.isfinite(lo) else bool(lo > 0.5)


def verdict(family: dict) -> str:
    """The headline's sentence from the family-wise test (:mod:`privaudit.analysis.familywise`)."""
    level, k = f"{100 * family['level']:g} %", family["comparisons"]
    over = f"over the {k} attacks" if k > 1 else "over the one attack"
    if family["rejects"]:
        return (f"leaks: at least one attack beats chance (AUC above 0.5), family-wise at {level} {over} "
                f"({p_text(family['p_value'])})")
    return (f"no detectable leakage: no attack beats chance family-wise at {level} {over} "
            f"({p_text(family['p_value'])})")


def headline(result: ScanResult) -> dict:
    """The strongest attack and what it shows, and the verdict, for the page's first lines and
    ``--json``: ``leaks`` and ``verdict`` come from the family-wise test over every attack
    (``familywise``: its correction, comparisons, p-value and ``text``);
    ``attacks_above_chance`` lists the attacks whose own 95 % AUC interval lies above 0.5
    (each row on its own, not corrected for the number of attacks)."""
    name = result.strongest
    if name is None:
        return {"strongest": None}
    m = result.metrics[name]
    above = [a for a, v in result.metrics.items() if leaks(v)]
    family = result.familywise
    return {"strongest": name, "auc": m["auc"], "auc_lo": m["auc_lo"], "auc_hi": m["auc_hi"],
            "tpr_at_0p1pct_fpr": m["tpr_at_0p1pct_fpr"], "tpr_at_0p1pct_fpr_lo": m.get("tpr_at_0p1pct_fpr_lo"),
            "tpr_at_0p1pct_fpr_hi": m.get("tpr_at_0p1pct_fpr_hi"), "eps_lower_bound": m.get("eps_lower_bound"),
            "gdp_mu": m.get("gdp_mu"), "gdp_epsilon": m.get("gdp_epsilon"),
            "leaks": bool(family.get("rejects")), "familywise": family,
            "attacks_above_chance": above, "verdict": verdict(family)}


def _eps_tip(m: dict) -> str:
    """The ε cell's tooltip: how its threshold was set (empty when the metrics do not say)."""
    strategy = m.get("threshold_strategy")
    return f"95 % lower bound (Clopper–Pearson); threshold: {strategy}" if strategy else ""


def _roc_svg(result: ScanResult) -> str:
    series = []
    for name, s in result.scores.items():
        fpr, tpr = roc(result.membership, s)
        series.append({"label": name, "x": fpr, "y": tpr, "markers": False, "exact_below": EXACT_FPR})
    return line_plot(series, title="ROC curves (log-log)", xlabel="false-positive rate", ylabel="true-positive rate",
                     log_x=True, log_y=True, diagonal=True, standalone=True)


def _fmt(v, digits: int = 3) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "—"
    return f"{f:.{digits}f}" if math.isfinite(f) else "—"


def _interval(m: dict, key: str) -> str:
    return f"[{_fmt(m.get(key + '_lo'))}, {_fmt(m.get(key + '_hi'))}]"


def write(result: ScanResult, folder: Path, *, command: str = "", references: dict | None = None) -> dict:
    """Write every output of ``result`` into ``folder``; return the summary (``--json``).
    ``references``: how the reference models match the audited model (``audit-model``)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # checked before the scan (check_output_folder); a change since is still one line
        raise write_error(f"cannot create the results folder {folder}: {exc.strerror or exc}", exc) from None
    table = result.table()
    cols = [c for c in CSV_COLUMNS if c in table.columns]
    write_text(folder / "attacks.csv", table[cols].to_csv(index=False, float_format="%.6g"))
    write_text(folder / "groups.csv", result.groups.to_csv(index=False, float_format="%.6g"))
    buf = io.BytesIO()
    arrays = {"membership": result.membership, **{f"score_{k}": v for k, v in result.scores.items()}}
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub: **arrays vs allow_pickle
    write_bytes(folder / "scores.npz", buf.getvalue())
    svg = _roc_svg(result)
    write_text(folder / "roc.svg", svg)
    head = headline(result)
    summary = {"inputs": result.inputs, "settings": result.settings, "headline": head, "metrics": result.metrics,
               **({"references": references} if references is not None else {}),
               "skipped": result.skipped, "command": command, "folder": str(folder),
               "files": list(FILES)}
    write_json(folder / "summary.json", summary)
    rows = [{"name": a, "description": description(a), "auc": _fmt(m["auc"]), "auc_ci": _interval(m, "auc"),
             "tpr1": _fmt(m["tpr_at_1pct_fpr"]), "tpr1_ci": _interval(m, "tpr_at_1pct_fpr"),
             "tpr01": _fmt(m["tpr_at_0p1pct_fpr"]), "tpr01_ci": _interval(m, "tpr_at_0p1pct_fpr"),
             "precision": _fmt(m["precision"]), "recall": _fmt(m["recall"]), "advantage": _fmt(m["advantage"]),
             "eps": _fmt(m.get("eps_lower_bound"), 2), "eps_tip": _eps_tip(m),
             "calibration": CALIBRATION.get(m.get("calibration", ""), m.get("calibration", "")),
             "leaks": leaks(m), "strongest": a == head.get("strongest")} for a, m in result.metrics.items()]
    groups = result.groups[result.groups["attack"] == head.get("strongest")] if len(result.groups) else result.groups
    group_rows = {}
    for grouping, g in groups.groupby("grouping", sort=False):
        group_rows[grouping] = [{"group": r.group, "members": int(r.members), "non_members": int(r.non_members),
                                 "auc": _fmt(r.auc), "ci": f"[{_fmt(r.auc_lo)}, {_fmt(r.auc_hi)}]",
                                 "leaks": bool(r.auc_lo > 0.5)} for r in g.itertuples()]
    page = render("scan.html.j2", css=stylesheet(), inputs=result.inputs, settings=result.settings, head=head,
                  head_text={k: _fmt(head.get(k)) for k in ("auc", "auc_lo", "auc_hi", "tpr_at_0p1pct_fpr",
                                                             "tpr_at_0p1pct_fpr_lo", "tpr_at_0p1pct_fpr_hi")}
                  | {"eps": _fmt(head.get("eps_lower_bound"), 2)},
                  rows=rows, groups=group_rows, skipped=result.skipped, command=command,
                  references=None if references is None else
                  {**references, **{k: _fmt(references.get(k)) for k in ("target_train_accuracy",
                                                                         "target_test_accuracy",
                                                                         "reference_test_accuracy", "accuracy_gap",
                                                                         "ks_distance")}},
                  roc=base64.b64encode(svg.encode("utf-8")).decode("ascii"),
                  generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    write_text(folder / "index.html", page)
    summary["html"] = str(folder / "index.html")
    return summary
