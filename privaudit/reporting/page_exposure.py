"""The page's "Who leaks" section (templates/exposure.html.j2): per (model, dataset), each
defence family's 16 most exposed training images with their per-sample LiRA scores, and how
much the families' most exposed members overlap.

Input: the summary's overview (one row per setting), its at-accuracy rows, the trade-off
table (each target run's seed), each target's ``exposure.json`` (the keys of
:meth:`privaudit.pipeline.exposed.Exposed.summary`) and its ``exposed.npz`` arrays
(:func:`privaudit.pipeline.exposed.read_exposed`).

**One setting per family.** A family (baseline, MG noise, DP-SGD, MG + DP-SGD, every other
defence of :mod:`privaudit.defences`) is shown by one of its settings whose target has the
ranking saved:

1. with accuracy targets (``audit --target-accuracies``), the setting its knob search found
   for the first target accuracy of ``summary.at_accuracy`` (the highest) that the family
   reached and audited, so that the families are compared at equal accuracy;
2. otherwise its most protective setting audited: the largest κ (MG noise), the largest σ
   (DP-SGD, NoisyCGD; with MG + DP-SGD the largest σ, then κ), or the registry knob's
   strongest value (the largest, or the smallest for a defence whose ``stronger`` is
   ``lower``); the baseline has one setting.

Of that setting's target runs the first seed's (the smallest seed) with a saved ranking is
shown.

**Overlap.** The Jaccard index |A ∩ B| / |A ∪ B| of two families' top-1 % sets (the
dataset indices of the top 1 % of members by the ranking attack's score, at least one). It
is given only where both targets trained on the same members (the same data seed and parts:
equal member digests), "—" otherwise.

**Figures.** Each grid is drawn with matplotlib to a small PNG (4 × 4 images, the score
above each and its class; palette-quantised), embedded in the page as a ``data:`` URI and
written by :func:`privaudit.reporting.build.build_reports` as
``reports/figures/exposed-<model>-<dataset>-<family>.png``.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from privaudit.core.formatting import slug
from privaudit.reporting.page_data import FAMILY_CSS, OTHER_CSS, extras_of, setting_name
from privaudit.reporting.page_empirical import _class_name  # one list of class names for the page
from privaudit.reporting.page_numbers import DASH, integer, num, plain, sig3

if TYPE_CHECKING:
    from privaudit.reporting.summary import Summary

COLUMNS = 4
FIG_INCHES = (3.6, 4.5)  # 4 × 4 images with two caption lines each
FIG_DPI = 96             # 346 × 432 pixels, drawn at this size on the page: 1 point = 4/3 CSS pixel
FONT_SIZE = 8.5          # 11.3 CSS pixels, as the page's figures' tick labels
PALETTE = {1: 32, 3: 128}  # colours of the quantised PNG: grey images, colour images
#: the at-accuracy section names NoisyCGD by its own title; the overview counts it as DP
_AT_FAMILY = {"NoisyCGD": "DP-SGD"}


@dataclass(frozen=True)
class Panel:
    """One family's grid: the setting shown, why it was chosen, its ranking and figure."""

    family: str
    setting: str          # as the page names a setting (setting_name)
    run: str              # the target run shown
    rule: str             # why this setting (module docstring)
    attack: str           # the attack whose scores rank the members
    top: list[Mapping]    # [{index, class, score}], most exposed first (exposure.json's top16)
    top_set: frozenset    # dataset indices of the top 1 % of members
    n_members: int
    members: str          # the member set's digest
    stem: str             # file stem of its PNG
    png: bytes | None = None  # None: no images saved for this target
    css: str = OTHER_CSS


@dataclass(frozen=True)
class Group:
    """One (model, dataset): its panels and their Jaccard matrix (NaN: not comparable)."""

    model: str
    dataset: str
    panels: list[Panel]
    jaccard: list[list[float]] = field(default_factory=list)


def jaccard(a: Any, b: Any) -> float:
    """|A ∩ B| / |A ∪ B| of two sets of indices; NaN when both are empty."""
    a, b = set(a), set(b)
    union = len(a | b)
    return len(a & b) / union if union else math.nan


def _protection(o: Mapping[str, Any]) -> tuple[float, float]:
    """How protective a setting is within its family (larger = more), for rule 2."""
    def val(v: Any) -> float:
        f = num(v)
        return f if math.isfinite(f) else -math.inf

    family = o["family"]
    if family == "MG noise":
        return val(o["kappa"]), 0.0
    if family in ("DP-SGD", "MG + DP-SGD"):
        return val(o["noise_multiplier"]), val(o["kappa"])
    from privaudit.defences import other as other_defence

    d = other_defence(o.get("defence"))
    if d is None or d.knob is None:
        return 0.0, 0.0
    v = val(o["knob"])
    return (-v if d.knob.stronger == "lower" and math.isfinite(v) else v), 0.0


def _knob_matches(o: Mapping[str, Any], knob: Any) -> bool:
    """Whether the at-accuracy row's ``knob`` is setting ``o``'s (κ, σ or the registry knob)."""
    k = num(knob)
    if not math.isfinite(k):
        return False
    column = {"MG noise": "kappa", "DP-SGD": "noise_multiplier"}.get(o["family"], "knob")
    v = num(o[column])
    return math.isfinite(v) and bool(np.isclose(v, k, rtol=1e-6))


def _ranked_run(o: Mapping[str, Any], extras: Any, seeds: Mapping[str, float]) -> str | None:
    """The setting's target run of the smallest seed that has a saved ranking."""
    runs = [r for r in o["runs"] if isinstance(r, str) and _ranking(extras_of(extras, r, "exposure"))]

    def seed(r: str) -> float:
        s = num(seeds.get(r))
        return s if math.isfinite(s) else math.inf

    return min(runs, key=seed) if runs else None


def _ranking(ex: Mapping) -> bool:
    return isinstance(ex.get("top_percent_indices"), list) and isinstance(ex.get("top16"), list)


def choose_settings(ov: pd.DataFrame, at: pd.DataFrame, extras: Any,
                    seeds: Mapping[str, float]) -> list[tuple[Mapping[str, Any], str, str]]:
    """(overview row, run, rule) per family of one group's overview ``ov`` (in its order),
    by the module docstring's rule; ``at``: the group's at-accuracy rows; families without a
    saved ranking are left out."""
    out = []
    for family, g in ov.groupby("family", sort=False):
        candidates = [(o, run) for _, o in g.iterrows() if (run := _ranked_run(o, extras, seeds))]
        if not candidates:
            continue
        pick = None
        rows = at[at["defence"].map(lambda t: _AT_FAMILY.get(str(t), str(t))) == family] if len(at) else at
        for _, r in rows.iterrows():  # rule 1: the first target accuracy reached
            if not math.isfinite(num(r["test_accuracy"])):
                continue
            found = next(((o, run) for o, run in candidates if _knob_matches(o, r["knob"])), None)
            if found:
                pick = (*found, f"the setting found for test accuracy {num(r['target_accuracy']):.3f}")
                break
        if pick is None:  # rule 2: the most protective setting
            o, run = max(candidates, key=lambda c: _protection(c[0]))  # the first of equals
            rule = ("its only setting with a ranking" if len(candidates) == 1 else
                    "its most protective setting audited")
            pick = (o, run, "the undefended model" if family == "baseline" else rule)
        out.append(pick)
    return out


def grid_png(images: np.ndarray, classes: Sequence[Any] | np.ndarray, scores: Sequence[Any] | np.ndarray,
             pixel_max: int, dataset: str) -> bytes:
    """:func:`grid_figure` as a small palette PNG."""
    from PIL import Image

    images = np.asarray(images)
    buf = io.BytesIO()
    grid_figure(images, classes, scores, pixel_max, dataset).savefig(buf, format="png", dpi=FIG_DPI,
                                                                     metadata={"Software": None})
    colours = PALETTE[1] if images.ndim == 4 and images.shape[1] == 1 else PALETTE[3]
    quantised = Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(colors=colours)
    out = io.BytesIO()
    quantised.save(out, format="PNG", optimize=True)
    return out.getvalue()


def grid_figure(images: np.ndarray, classes: Sequence[Any] | np.ndarray, scores: Sequence[Any] | np.ndarray,
                pixel_max: int, dataset: str):
    """A 4 × 4 grid of ``images`` (raw uint8, k × C × H × W), each captioned with its score and
    class (:data:`FONT_SIZE`), as a matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure as MplFigure

    images = np.asarray(images)
    rows = max(1, math.ceil(len(images) / COLUMNS))
    fig = MplFigure(figsize=(FIG_INCHES[0], FIG_INCHES[1] * rows / 4), dpi=FIG_DPI)
    axes = np.atleast_1d(fig.subplots(rows, COLUMNS, squeeze=False,
                                      gridspec_kw={"hspace": 0.45, "wspace": 0.08, "left": 0.02, "right": 0.98,
                                                   "top": 1 - 0.075 * 4 / rows, "bottom": 0.01})).ravel()
    top = float(pixel_max) if pixel_max and pixel_max > 0 else 255.0
    for i, ax in enumerate(axes):
        ax.set_xticks([])
        ax.set_yticks([])
        if i >= len(images):
            ax.set_axis_off()
            continue
        im = images[i]
        if im.shape[0] == 1:
            ax.imshow(im[0], cmap="gray_r", vmin=0, vmax=top, interpolation="nearest")
        else:
            ax.imshow(np.clip(np.transpose(im[:3], (1, 2, 0)).astype(float) / top, 0, 1), interpolation="nearest")
        ax.set_title(f"{sig3(scores[i])}\n{_class_name(dataset, classes[i])}", fontsize=FONT_SIZE, pad=1.5,
                     linespacing=1.0)
        for spine in ax.spines.values():
            spine.set_linewidth(0.4)
    return fig


def _seeds(table: pd.DataFrame | None) -> dict[str, float]:
    if table is None or not len(table) or "target_run" not in table or "seed" not in table:
        return {}
    seeds = pd.to_numeric(table["seed"], errors="coerce")
    return {str(r): float(s) for r, s in zip(table["target_run"], seeds) if isinstance(r, str)}


def exposure_groups(summary: Summary, table: pd.DataFrame | None, extras: Any,
                    exposed: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> list[Group]:
    """The section's groups, each family's grid drawn from ``exposed`` (``{run: arrays of
    exposed.npz}``; a run without them gets no picture)."""
    ov = summary.overview
    if ov is None or not len(ov):
        return []
    at = summary.at_accuracy if summary.at_accuracy is not None else pd.DataFrame()
    exposed = exposed if isinstance(exposed, Mapping) else {}
    seeds = _seeds(table)
    groups = []
    for (model, dataset), g in ov.groupby([ov["model"].astype(str), ov["dataset"].astype(str)], sort=True):
        rows = at[(at["model"].astype(str) == model) & (at["dataset"].astype(str) == dataset)] if len(at) else at
        panels = []
        for o, run, rule in choose_settings(g, rows, extras, seeds):
            ex = extras_of(extras, run, "exposure")
            top = [s for s in ex.get("top16", []) if isinstance(s, Mapping)]
            arrays = exposed.get(run) or {}
            png = None
            if len(arrays.get("images", ())):
                png = grid_png(arrays["images"], arrays["classes"], arrays["scores"], int(arrays["pixel_max"]), dataset)
            family = str(o["family"])
            panels.append(Panel(
                family=family, setting=setting_name(o), run=run, rule=rule,
                attack=plain(ex.get("lira_attack") or ex.get("attack")), top=top,
                top_set=frozenset(int(i) for i in ex["top_percent_indices"] if math.isfinite(num(i))),
                n_members=int(num(ex.get("n_members"))) if math.isfinite(num(ex.get("n_members"))) else 0,
                members=str(ex.get("members") or ""), stem=slug("exposed", model, dataset, family), png=png,
                css=FAMILY_CSS.get(family, OTHER_CSS)))
        if panels:
            matrix = [[jaccard(a.top_set, b.top_set) if a.members and a.members == b.members else math.nan
                       for b in panels] for a in panels]
            groups.append(Group(model, dataset, panels, matrix))
    return groups


def _alt(p: Panel, dataset: str) -> str:
    items = "; ".join(f"#{integer(s.get('index'))} {_class_name(dataset, s.get('class'))} {sig3(s.get('score'))}"
                      for s in p.top)
    return f"The {len(p.top)} most exposed members of {p.setting} ({p.attack} score): {items}"


def exposure_section(groups: Sequence[Group]) -> str:
    """The section's HTML, or "" when no target has a saved ranking."""
    if not groups:
        return ""
    from markupsafe import Markup

    from privaudit.reporting.templates import render

    view = []
    for g in groups:
        panels = [{"family": p.family, "setting": p.setting, "run": p.run, "rule": p.rule, "attack": p.attack,
                   "css": p.css, "alt": _alt(p, g.dataset), "n_top": len(p.top_set), "n_members": integer(p.n_members),
                   "src": Markup("data:image/png;base64," + base64.b64encode(p.png).decode("ascii")) if p.png else None}
                  for p in g.panels]
        matrix = [[f"{v:.2f}" if math.isfinite(v) else DASH for v in row] for row in g.jaccard]
        view.append({"id": slug("who", g.model, g.dataset), "model": g.model, "dataset": g.dataset,
                     "panels": panels, "matrix": list(zip(panels, matrix)),
                     "differ": any(math.isnan(v) for row in g.jaccard for v in row)})
    return render("exposure.html.j2", groups=view)


__all__ = ["Group", "Panel", "choose_settings", "exposure_groups", "exposure_section", "grid_figure", "grid_png",
           "jaccard"]
