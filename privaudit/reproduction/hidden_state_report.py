"""``privaudit reproduce hidden-state`` from start to page: run the cells and the audit, check
the statements, draw the figures (docs/methods/b-hidden-state.md B.4–B.5)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.analysis.accounting import replace_one_epsilon_sigma_half
from privaudit.analysis.hidden_state import noisycgd_epsilon
from privaudit.reporting.plots import line_plot
from privaudit.reporting.summary import t_interval
from privaudit.reproduction.hidden_state import (
    EPSILONS,
    FIGURE_METHODS,
    HiddenStateProtocol,
    Split,
    cached_cells,
    curves,
    hidden_state_protocol,
    load_split,
    missing_cells,
    run_cells,
)
from privaudit.reproduction.hidden_state_claims import (
    ACCOUNTING_FIGURE,
    PAPER_SETTING,
    accounting_claims,
    audit_claims,
    published,
    table_claims,
)
from privaudit.reproduction.hidden_state_methods import METHOD_NAMES, METHODS, Recipe, convex_smoothness
from privaudit.reproduction.outputs import Figure, Outcome, plan_headline

KEY = "hidden-state"
PAPER = ("Romijnders, Koskela, Convex Approximation of Two-Layer ReLU Networks for Hidden State Differential "
         "Privacy, arXiv:2407.04884 (NeurIPS 2025)")
SECTION_ORDER = ("Table 1", "Figure 3", "Privacy accounting", "Audit")
NAMES = {**METHOD_NAMES, "iterative": "NoisyCGD, DP-SGD (convex), DP-SGD (ReLU)"}


def table1(cells: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Table 1 as the paper prints it: mean ± 1.96 SE over seeds, beside the published value."""
    rows = []
    for (method, eps), g in cells.groupby(["method", "target_epsilon"], sort=False):
        acc = g["test_accuracy"].to_numpy(float)
        se = acc.std(ddof=1) / math.sqrt(len(acc)) if len(acc) > 1 else math.nan
        pub = published(method, dataset, eps)
        rows.append({"method": method, "name": METHOD_NAMES[method], "target_epsilon": eps,
                     "sigma": float(g["sigma"].mean()), "epsilon": float(g["epsilon"].mean()),
                     "epsilon_replace_one_exact": float(g["epsilon_exact"].mean()), "seeds": len(acc),
                     "test_accuracy": float(acc.mean()), "pm_1p96_se": 1.96 * se,
                     "published": pub[0] if pub else math.nan, "published_pm": pub[1] if pub else math.nan,
                     "paper_sigma": {1.33: 15.0, 4.76: 5.0}[eps] if method not in ("ssp-convex", "ssp-relu",
                                                                                   "ssp-fourier") else math.nan})
    return pd.DataFrame(rows)


def audit_table(audit: pd.DataFrame) -> pd.DataFrame:
    """Per (method, ε, attack, subset): the accountant's ε, the empirical bounds (mean over
    targets with a t interval, and the largest), TPR at 0.1 % FPR and AUC."""
    rows = []
    for key, g in audit.groupby(["method", "target_epsilon", "attack", "subset"], sort=False):
        row = dict(zip(("method", "target_epsilon", "attack", "subset"), key))
        row["accountant_epsilon"] = float(g["accountant_epsilon"].iloc[0])
        row["test_accuracy"] = float(g["test_accuracy"].iloc[0])
        for metric in ("gdp_epsilon", "eps_lower_bound", "tpr_at_0p1pct_fpr", "auc"):
            mean, lo, hi, n = t_interval(g[metric])
            row.update({metric: mean, f"{metric}_lo": max(lo, 0.0), f"{metric}_hi": hi})  # all are ≥ 0
        row["largest_bound"] = float(np.nanmax(g[["gdp_epsilon", "eps_lower_bound"]].to_numpy()))
        row["targets"] = int(g["target"].nunique())
        rows.append(row)
    return pd.DataFrame(rows)


def figures(cells: pd.DataFrame, audit: pd.DataFrame | None) -> list[Figure]:
    out: list[Figure] = []
    points = curves(cells)
    for eps in EPSILONS:
        series = []
        for method in FIGURE_METHODS:
            g = points[(points["method"] == method) & np.isclose(points["target_epsilon"], eps)]
            if g.empty:
                continue
            m = g.groupby("epoch").agg(x=("epsilon", "mean"), y=("test_accuracy", "mean"))
            bands = [t_interval(v) for _, v in g.groupby("epoch")["test_accuracy"]]
            series.append({"label": METHOD_NAMES[method], "x": m["x"].to_numpy(), "y": m["y"].to_numpy(),
                           "y_lo": np.clip([b[1] for b in bands], 0, 1), "y_hi": np.clip([b[2] for b in bands], 0, 1)})
        if series:
            title = f"Figure 3: test accuracy against the ε spent, to ε = {eps:g}"
            out.append(Figure(f"figure-3-eps{eps:g}", title, line_plot(series, title=title, xlabel="ε spent so far",
                                                                       ylabel="test accuracy", standalone=True),
                              "Figure 3"))
    s = PAPER_SETTING
    epochs = np.arange(10, s["epochs"] + 1, 10)
    series = [{"label": f"NoisyCGD, ηλ = {el:g}", "x": epochs, "markers": False,
               "y": np.array([noisycgd_epsilon(15.0, s["n"], s["batch"], int(e), 1.0, el, s["delta"]).epsilon
                              for e in epochs])} for el in ACCOUNTING_FIGURE]
    q = s["batch"] / s["n"]
    series.append({"label": "DP-SGD (add/remove at σ/2)", "x": epochs, "markers": False,
                   "y": np.array([replace_one_epsilon_sigma_half(15.0, q, int(e) * s["n"] // s["batch"],
                                                                 s["delta"])[0] for e in epochs])})
    title = "ε against epochs at σ = 15 (n = 60,000, b = 1,000, δ = 1e-5)"
    top = max(float(np.max(s["y"])) for s in series)
    out.append(Figure("figure-accounting", title, line_plot(series, title=title, xlabel="epochs", ylabel="ε",
                                                            x_range=(0, float(epochs[-1])), y_range=(0, 1.05 * top),
                                                            standalone=True), "Privacy accounting",
                      "exact computations, the authors' accounting figure recomputed"))
    if audit is not None and not audit.empty:
        t = audit_table(audit)
        t = t[(t["subset"] == "all") & np.isfinite(t["target_epsilon"])]
        series = []
        for method, g in t.groupby("method", sort=False):
            best = g.groupby("target_epsilon").agg(x=("accountant_epsilon", "first"), y=("largest_bound", "max"))
            series.append({"label": METHOD_NAMES[method], "x": best["x"].to_numpy(), "y": best["y"].to_numpy()})
        title = "The audit: empirical ε against the accountant's"
        out.append(Figure("figure-audit", title, line_plot(series, title=title, xlabel="accountant's ε",
                                                           ylabel="largest empirical ε (95 % lower bound)",
                                                           diagonal=True, standalone=True), "Audit",
                          "the largest 95 % lower bound over every target model, attack and subset; the dashed "
                          "line is the accountant's ε, which no bound may cross"))
    return out


def smoothness(split: Split, recipe, seed: int) -> tuple[float, float]:
    """β on the data used (prepared inputs, P gates) and on raw 0–255 pixels with P = 100."""
    import torch

    g = torch.Generator().manual_seed(seed)
    d = split.x.shape[1]
    used = convex_smoothness(split.x, torch.randn(recipe.gates, d, generator=g))
    raw = split.raw_train.reshape(len(split.raw_train), -1)  # memory-mapped: copied a block at a time
    u = torch.randn(100, d, generator=g)
    return used, max(convex_smoothness(torch.from_numpy(np.array(raw[i:i + 8192])), u)
                     for i in range(0, len(raw), 8192))


@dataclass(frozen=True)
class MethodCost:
    """Seconds of one training of a method on this machine at one size and batch: ``setup``
    (its evaluation; σ's calibration is priced apart, :func:`accounting_seconds`) plus
    ``per_epoch`` for each epoch (SSP's one pass is its set-up)."""

    setup: float
    per_epoch: float

    def seconds(self, epochs: int) -> float:
        return self.setup + epochs * self.per_epoch


def method_cost(method: str, recipe: Recipe, split: Split, samples: int, model) -> MethodCost:
    """:class:`MethodCost` of ``method`` trained on ``samples`` of ``split`` with ``recipe``'s
    batch, timed on the code every cell and pool model trains with: one epoch and two (best
    of two), their difference an epoch; SSP once (its one pass). The σ of each timing run is
    calibrated before its clock starts. Cached per machine by ``model``
    (:meth:`~privaudit.executor.costs.CostModel.timed`)."""
    from privaudit.reproduction.hidden_state_methods import dpsgd_sigma, train_method

    key = (f"hidden-state|{method}|{tuple(split.x.shape[1:])}|{split.num_classes}|n={samples}|b={recipe.batch}|"
           f"P={recipe.gates}|w={recipe.width}|D={recipe.features}|test={len(split.y_test)}")
    one_pass = method.startswith("ssp-")

    def run(epochs: int) -> float:
        r = replace(recipe, epochs=epochs)
        if method.startswith("dpsgd-"):
            dpsgd_sigma(EPSILONS[0], samples, r.batch, epochs, r.delta)  # σ's calibration, off the clock
        best = math.inf
        for _ in range(1 if one_pass else 2):
            t = time.perf_counter()
            train_method(method, split.x[:samples], split.y[:samples], split.x_test, split.y_test, r, EPSILONS[0], 0,
                         num_classes=split.num_classes, curve=method in FIGURE_METHODS)
            best = min(best, time.perf_counter() - t)
        return best

    def measure() -> list[float]:
        one = run(1)
        if one_pass:
            return [one, 0.0]
        epoch = max(0.0, run(2) - one)
        return [max(0.0, one - epoch), epoch]

    setup, per_epoch = model.timed(key, measure)
    return MethodCost(float(setup), float(per_epoch))


def accounting_seconds(settings: Sequence[tuple[str, float, int, int, int]], recipe: Recipe) -> float:
    """Seconds of calibrating σ for each distinct DP-SGD (method, ε, samples, batch, epochs)
    of ``settings``: run now, as the run would (once per setting and process; NoisyCGD's
    closed-form calibration and SSP's take no time worth pricing)."""
    from privaudit.reproduction.hidden_state_methods import dpsgd_sigma

    t = time.perf_counter()
    for method, eps, samples, batch, epochs in dict.fromkeys(settings):
        if method.startswith("dpsgd-") and math.isfinite(eps):
            dpsgd_sigma(eps, samples, batch, epochs, recipe.delta)
    return time.perf_counter() - t


def dry_run(protocol: HiddenStateProtocol, models_root: Path, split: Split) -> dict:
    """What the run would train, what it reuses, and its time here: each method's training
    timed on short runs of its size and batch (:func:`method_cost`, cached per machine), σ's
    calibrations run now (:func:`accounting_seconds`), scaled by measured / modelled time over
    the cells already trained here."""
    import torch

    from privaudit.executor.costs import CostModel
    from privaudit.reproduction.hidden_state_audit import pool_path, settings

    t0 = time.perf_counter()
    model = CostModel(None, torch.device("cpu"))
    r, a = protocol.recipe, protocol.audit
    pool_recipe = replace(r, epochs=a.epochs, batch=a.batch)
    n, half = len(split.y), min(a.population, len(split.y)) // 2
    found = cached_cells(protocol, models_root)
    audited = settings(protocol) if "audit" in protocol.experiments else []
    pools = [(m, e) for m, e in audited if not pool_path(models_root, protocol, m, e).is_file()]

    def cell_seconds(method: str) -> float:
        return method_cost(method, r, split, n, model).seconds(1 if method.startswith("ssp-") else r.epochs)

    todo = [(m, e) for (m, e, _), doc in found.items() if doc is None]
    # nothing left: nothing to time; else the cells already trained here say how far the timing is
    done = [(m, doc) for (m, _, _), doc in found.items()
            if doc is not None and doc.get("seconds") and (todo or pools)]
    modelled = sum(cell_seconds(m) for m, _ in done)
    ratio = sum(doc["seconds"] for _, doc in done) / modelled if done and modelled > 0 else 1.0
    left = sum(cell_seconds(m) for m, _ in todo)
    left += sum(a.models * method_cost(m, pool_recipe, split, half, model).seconds(a.epochs) for m, _ in pools)
    left += accounting_seconds([(m, e, n, r.batch, r.epochs) for m, e in todo]
                               + [(m, e, half, a.batch, a.epochs) for m, e in pools], r)
    timing = time.perf_counter() - t0
    how = (f"each method timed here on short runs, σ's calibrations run ({timing:.1f} s)"
           + (f", times {ratio:.2g}, the ratio of measured to modelled time of the {len(done)} cells already "
              "trained here" if done else ""))
    # the keys of masked-neurons' plan, so that one printer shows both
    return {"paper": KEY, "scale": protocol.scale, "runs": len(found),
            "to_train": sum(doc is None for doc in found.values()), "audit_pools": len(audited),
            "audit_pools_to_train": len(pools), "estimated_seconds": left * ratio,
            "calibration_seconds": round(timing, 2), "cost_model": how, "settings": protocol.describe()}


def hidden_state_reproduction(scale: str = "reduced", *, dataset: str = "cifar10", data_dir: str | Path | None = None,
                              download: bool = False, seeds: Sequence[int] | None = None,
                              experiments: Sequence[str] | None = None, workdir: str | Path = ".",
                              log: Callable[[str], None] | None = None, dry_run_only: bool = False,
                              executor=None) -> Outcome | dict:
    """Run (or resume) the reproduction and return its :class:`Outcome` (``dry_run_only``:
    the plan and its cost, training nothing). ``executor``: a Ray executor trains the cells
    and the audit's pools as Ray tasks; otherwise they train in this process."""
    from privaudit.pipeline.workspace import Workspace
    from privaudit.reproduction.hidden_state_audit import missing_pools, run_audit

    protocol = hidden_state_protocol(scale, dataset, seeds=seeds, experiments=experiments)
    cache: dict[str, Split] = {}

    def split() -> Split:
        if "split" not in cache:
            cache["split"] = load_split(dataset, data_dir, download)
        return cache["split"]

    ws = Workspace(workdir)
    if dry_run_only:
        return dry_run(protocol, ws.models, split())
    data = split()  # a missing dataset stops here, before the workspace is touched
    ws.ensure_writable(log=log)
    if log:
        log(plan_headline(KEY, dry_run(protocol, ws.models, data)))
    remote = dict(log=log, executor=executor, data_dir=data_dir, download=download)
    cells = run_cells(protocol, ws.models, split, **remote) if protocol.cells() else pd.DataFrame(
        columns=["method", "target_epsilon", "seed", "test_accuracy", "n_test", "curve"])
    audit = run_audit(protocol, ws.models, split, **remote) if "audit" in protocol.experiments else None
    used, raw = smoothness(data, protocol.recipe, protocol.seeds[0])
    full = protocol.scale == "full"
    claims = (table_claims(cells, dataset, full) if len(cells) else []) + accounting_claims(
        dataset, len(data.y), protocol.recipe, used, raw) + (audit_claims(audit) if audit is not None else [])
    tables = {"cells.csv": cells.drop(columns=["curve"], errors="ignore"), "table1.csv": table1(cells, dataset),
              "figure3.csv": curves(cells)}
    if audit is not None:
        tables.update({"audit.csv": audit, "audit-summary.csv": audit_table(audit)})
    r = protocol.recipe
    glance = [f"Scale {protocol.scale} on {dataset}: {len(data.y):,} training and {len(data.y_test):,} test images, "
              f"{len(protocol.seeds)} seed{'s' if len(protocol.seeds) != 1 else ''} "
              f"({', '.join(map(str, protocol.seeds))}); P = {r.gates} gates, {r.epochs} epochs, batch {r.batch}, "
              f"C = {r.clip:g}, η = {r.lr_convex:g}, λ = {r.l2:.3g} (ηλ = {r.eta_lambda:g}).",
              f"Every method's σ is calibrated to ε = 1.33 and 4.76 (δ = 1e-5) on these {len(data.y):,} images: "
              "NoisyCGD by the hidden-state bound, DP-SGD by Opacus's accountant at σ/2 as the paper does (the "
              "exact replace-one ε is in table1.csv); the paper's σ (15 and 5, set for MNIST's 60,000) is shown "
              "beside it.",
              f"Inputs are centred and scaled to unit norm, so the per-sample loss is at most β = {used:.3g}-smooth "
              f"here and η·β = {r.lr_convex * used:.3g} < 2: the contraction c = 1 − ηλ the bound uses holds. On raw "
              f"pixel values with P = 100 and the authors' η = 3.1e-4, η·β = {3.1e-4 * raw:.3g}: it does not."]
    notes = ["Not published, so chosen here (docs/methods/b-hidden-state.md B.4): the ReLU network's width, "
             "the step sizes of each method, the SSP feature maps and their ridge term, the input scaling.",
             "Some public copies of CIFAR-10 are JPEG re-encodings: on one, expect accuracies slightly below the "
             "published ones.",
             "The audit (docs/methods/b-hidden-state.md B.5) is the first measurement of what a NoisyCGD last "
             "iterate leaks: empirical ε bounds are 95 % lower bounds for each target model; the accountant's ε "
             "is an upper bound."]
    missing = missing_cells(protocol, ws.models) + (missing_pools(protocol, ws.models)
                                                     if "audit" in protocol.experiments else [])
    return Outcome(key=KEY, paper=PAPER, title=f"The hidden-state paper's results, reproduced on {dataset}",
                   methods="Protocol: docs/methods/b-hidden-state.md B.4; the audit: B.5.",
                   settings=protocol.describe(),
                   glance=glance, claims=claims, figures=figures(cells, audit), tables=tables,
                   section_order=SECTION_ORDER, names=NAMES, missing=missing, notes=notes,
                   extra={"smoothness": {"used": used, "raw_pixels_p100": raw}})


__all__ = ["KEY", "METHODS", "hidden_state_reproduction"]
