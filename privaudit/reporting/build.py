"""Rebuild ``reports/tradeoff.csv`` and ``reports/index.html`` from the whole workspace.

The CSV is the single source: one tidy row per (target, defence setting, attack), joining
the attack's metrics with the target's config and metrics. The HTML page and its plots are
drawn from that table and from the saved per-sample scores (ROC curves).
"""

from __future__ import annotations

import datetime as _dt
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.analysis.metrics import roc
from privaudit.analysis.replicates import pool_columns
from privaudit.attacks.pool_attacks import REPLICATED
from privaudit.core.timing import timed
from privaudit.errors import ArtifactError, DamagedArtifactError
from privaudit.files.atomic import read_json, write_bytes, write_text
from privaudit.files.integrity import verify_folder
from privaudit.pipeline.workspace import Workspace
from privaudit.reporting.summary import Summary, summarise
from privaudit.reporting.table import COLUMNS

LOO_KEYS = ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "eps_lower_bound", "gdp_mu")
EXTRAS = ("loo", "exposure", "one_run")


@dataclass
class ReportResult:
    csv: Path
    html: Path
    table: pd.DataFrame
    skipped: list[str]
    warnings: list[str] = field(default_factory=list)  # one line per skipped folder: which one, why
    summary: Summary | None = None  # privaudit.reporting.summary: what every view shows


def collect_table(workspace: Workspace, warnings: list[str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The trade-off table of every complete attack in the workspace, and the names of
    attack folders skipped because they or their target are damaged. When given, ``warnings``
    receives one line per skipped folder naming the damaged folder (the attack folder, or the
    target's model folder) and what is wrong with it."""
    rows, skipped = [], []
    warnings = warnings if warnings is not None else []
    folders = sorted(p for p in workspace.attacks.glob("*")
                     if p.is_dir() and not p.name.startswith(".") and p.name != "pools")
    for folder in folders:
        try:
            rows.extend(attack_rows(workspace, folder))
        except DamagedArtifactError as exc:
            skipped.append(folder.name)
            what = "the attacks of" if exc.kind == "model" else "attack folder"
            warnings.append(f"skipped {what} {folder.name}: {exc}")
        except ArtifactError as exc:
            skipped.append(folder.name)
            warnings.append(f"skipped damaged attack folder {folder.name} ({exc})")
    table = pd.DataFrame(rows, columns=COLUMNS)
    if len(table):
        table = table.sort_values(["model", "dataset", "dp", "kappa", "noise_multiplier", "epsilon",
                                   "target_run", "attack"], na_position="first").reset_index(drop=True)
    return table, skipped


def attack_rows(workspace: Workspace, folder: Path) -> list[dict]:
    """The trade-off table's rows of one attack folder (one per attack), joined with its
    target's config and metrics."""
    verify_folder(folder, "attack")
    attack_cfg = read_json(folder / "config.json")
    metrics = read_json(folder / "metrics.json")
    target = attack_cfg.get("target") if isinstance(attack_cfg, dict) else None
    if not isinstance(target, str) or not isinstance(metrics, dict):
        raise ArtifactError(f"{folder} is not a privaudit attack folder")
    cfg = workspace.read_model_config(target)
    verify_folder(workspace.model_dir(target), "model", only=("config.json", "metrics.json"))  # what is read here
    tm = workspace.read_model_metrics(target)
    d = cfg.defence
    base = {
        "target_run": target,
        "shadow_run": attack_cfg.get("shadow"),
        "model": cfg.model.name,
        "width": cfg.model.width,
        "dataset": cfg.data.dataset,
        "defence": d.name,
        "knob": _knob(d, tm),
        "kappa": d.kappa,
        "dp": d.dp,
        "noise_multiplier": tm.get("noise_multiplier", math.nan) if d.dp else math.nan,
        "epsilon": tm.get("epsilon", math.nan) if d.dp else math.nan,
        "delta": d.delta if d.dp else math.nan,
        "accountant": tm.get("accountant") if d.dp else None,
        "epsilon_replace_one": _replace_one_epsilon(d, tm),
        "epsilon_replace_one_sigma_half": _replace_one_epsilon(d, tm, sigma_half=True),
        "seed": cfg.seed,
        "part_size": cfg.data.part_size,
        "canaries": cfg.data.canaries or None,
        "epochs": cfg.train.epochs,
        "train_accuracy": tm.get("train_accuracy"),
        "test_accuracy": tm.get("test_accuracy"),
        "n_members": tm.get("n_train"),
        "n_nonmembers": tm.get("n_test"),
    }
    extras = read_extras(folder)
    one_run = extras.get("one_run", {})
    base["one_run_eps_lower_bound"] = one_run.get("eps_lower_bound")
    base["one_run_fdp_mu"] = one_run.get("fdp_mu")
    base["one_run_fdp_eps_lower_bound"] = one_run.get("fdp_eps_lower_bound")
    loo = extras.get("loo", {}).get("summary", {})
    kept = extras.get("loo", {}).get("replicates", {})
    rows = []
    for name, m in sorted(metrics.items()):
        row = {**base, "attack": name, **{k: m.get(k) for k in COLUMNS if k in m}}
        if name in loo:
            row["loo_n_targets"] = loo[name].get("n_targets")
            for key in LOO_KEYS:
                for stat in ("mean", "std"):
                    row[f"loo_{key}_{stat}"] = loo[name].get(f"{key}_{stat}")
        if name in kept:
            row.update(pool_columns(kept[name], REPLICATED))
        rows.append(row)
    return rows


def _knob(defence, metrics: dict) -> float:
    """The row's one knob, beside its ``defence``: MG noise's κ, a DP defence's σ as trained
    (given, or calibrated to the target ε), any other defence's knob (0 for the knob-less
    label only); NaN for the baseline."""
    if defence.dp:
        return float(metrics.get("noise_multiplier", math.nan))
    return math.nan if defence.name == "none" else float(defence.knob)


def _replace_one_epsilon(defence, metrics: dict, sigma_half: bool = False) -> float:
    """ε under replace-one adjacency, the notion of NoisyCGD's hidden-state bound, so that
    NoisyCGD and DP-SGD can be set side by side (docs/methods/b-hidden-state.md B.3): NoisyCGD's own ε; for
    DP-SGD the exact replace-one ε (dp_accounting's PLD), or with ``sigma_half`` the paper's
    conservative comparator (Opacus's ε at noise multiplier σ/2), from the saved σ, sampling
    rate and steps."""
    if not defence.dp:
        return math.nan
    if defence.mechanism == "noisycgd":
        return metrics.get("epsilon", math.nan)
    try:
        setting = (float(metrics["noise_multiplier"]), float(metrics["sample_rate"]), int(metrics["steps"]),
                   float(defence.delta))
    except (KeyError, TypeError, ValueError):
        return math.nan
    from privaudit.analysis.accounting import replace_one_epsilon, replace_one_epsilon_sigma_half

    return (replace_one_epsilon_sigma_half if sigma_half else replace_one_epsilon)(*setting)[0]


def read_extras(folder: Path) -> dict:
    """The optional per-target results next to an attack: loo, exposure, one_run (the
    images of the most exposed members: :func:`exposed_arrays`)."""
    out = {}
    for key in EXTRAS:
        path = folder / f"{key}.json"
        if path.is_file():
            try:
                out[key] = read_json(path)
            except ArtifactError:
                continue
    return out


def roc_curves(workspace: Workspace, table: pd.DataFrame) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(fpr, tpr) per target run and attack, from each attack folder's ``scores.npz``."""
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for target in table["target_run"].unique() if len(table) else []:
        path = workspace.attacks / target / "scores.npz"
        try:
            with np.load(path, allow_pickle=False) as npz:
                labels = npz["labels"]
                curves[target] = {k[len("score_"):]: roc(labels, npz[k]) for k in npz.files if k.startswith("score_")}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            continue
    return curves


def exposure_stability(workspace: Workspace, overview: pd.DataFrame, extras: dict, fraction: float = 0.01) -> None:
    """How stable the most exposed members are across seeds (docs/methods/d-attacks.md D.9): for each
    setting audited on two seeds or more, the mean pairwise Jaccard index of the top
    ``fraction`` of each seed's members by the strongest attack's score, beside its chance
    value (:func:`privaudit.analysis.operating.top_fraction_jaccard`), stored in ``extras`` as
    each run's ``stability``. Runs whose scores lack the samples' indices (attacked by an
    earlier release) are left out."""
    from privaudit.analysis.operating import top_fraction_jaccard

    for _, o in overview.iterrows():
        attack, runs = o.get("strongest"), [r for r in o["runs"] if isinstance(r, str)]
        if not isinstance(attack, str) or len(runs) < 2:
            continue
        found = []
        for run in runs:
            try:
                with np.load(workspace.attacks / run / "scores.npz", allow_pickle=False) as npz:
                    found.append((npz["indices"], npz["labels"].astype(bool), npz[f"score_{attack}"]))
            except (OSError, ValueError, KeyError, zipfile.BadZipFile):
                continue
        if len(found) < 2:
            continue
        ids = np.unique(np.concatenate([f[0] for f in found]))
        scores = np.full((len(found), len(ids)), np.nan)
        members = np.zeros((len(found), len(ids)), dtype=bool)
        for k, (idx, member, s) in enumerate(found):
            cols = np.searchsorted(ids, idx)
            scores[k, cols], members[k, cols] = s, member
        result = top_fraction_jaccard(scores, members, fraction)
        info = {"attack": attack, "fraction": fraction, "seeds": len(found), "jaccard": float(result.mean),
                "chance": float(result.chance_mean)}
        for run in runs:
            extras.setdefault(run, {})["stability"] = info


def exposed_arrays(workspace: Workspace, extras: dict) -> dict[str, dict[str, np.ndarray]]:
    """The most exposed members' arrays (``exposed.npz``, :mod:`privaudit.pipeline.exposed`) of
    each target run of ``extras`` whose exposure lists them; the attack folders were verified
    against their manifests when the table was read."""
    from privaudit.pipeline.exposed import read_exposed

    out = {}
    for run, ex in extras.items():
        if isinstance(ex, dict) and isinstance(ex.get("exposure"), dict) and "top16" in ex["exposure"]:
            arrays = read_exposed(workspace.attacks / run)
            if arrays:
                out[run] = arrays
    return out


def accuracy_targets(workspace: Workspace, warnings: list[str]) -> list[dict]:
    """The entries of ``reports/accuracy_targets.json`` (``audit --target-accuracies``), or none."""
    path = workspace.reports / "accuracy_targets.json"
    if not path.is_file():
        return []
    try:
        entries = read_json(path)
    except ArtifactError as exc:
        warnings.append(f"skipped {path.name}: {exc}")
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


@timed("report")
def build_reports(workspace: Workspace) -> ReportResult:
    """Write ``reports/tradeoff.csv`` and ``reports/index.html`` (atomically), and with accuracy
    targets ``reports/defences_at_accuracy.csv``, and return them."""
    from privaudit.reporting.figures import group_figures
    from privaudit.reporting.html import render_report
    from privaudit.reporting.page_exposure import exposure_groups
    from privaudit.reporting.papers import THEORY_FOLDER, papers_section

    warnings: list[str] = []
    table, skipped = collect_table(workspace, warnings)
    csv_path = workspace.reports / "tradeoff.csv"
    html_path = workspace.reports / "index.html"
    write_text(csv_path, table.to_csv(index=False, float_format="%.6g"))
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    extras = {t: read_extras(workspace.attacks / t) for t in (table["target_run"].unique() if len(table) else [])}
    papers = papers_section(workspace.reports.joinpath(*THEORY_FOLDER[1:]))
    summary = summarise(table, accuracy_targets=accuracy_targets(workspace, warnings))
    at_csv = workspace.reports / "defences_at_accuracy.csv"
    if len(summary.at_accuracy):
        write_text(at_csv, summary.at_accuracy.to_csv(index=False, float_format="%.6g"))
    exposure_stability(workspace, summary.overview, extras)
    figures = group_figures(summary)
    for fig in figures:  # for papers and slides: reports/figures/verdict-<model>-<dataset>.{pdf,png}
        write_bytes(workspace.reports / "figures" / f"{fig.stem}.pdf", fig.pdf)
        write_bytes(workspace.reports / "figures" / f"{fig.stem}.png", fig.png)
    exposed = exposure_groups(summary, table, extras, exposed_arrays(workspace, extras))
    for panel in (p for g in exposed for p in g.panels if p.png):  # figures/exposed-<model>-<dataset>-<family>.png
        assert panel.png is not None  # the generator keeps only panels with a PNG
        write_bytes(workspace.reports / "figures" / f"{panel.stem}.png", panel.png)
    write_text(html_path, render_report(table, roc_curves(workspace, table), generated=generated, extras=extras,
                                        papers_html=papers, summary=summary, figures=figures, exposed=exposed))
    return ReportResult(csv_path, html_path, table, skipped, warnings, summary)
