"""Each theory experiment end to end: run it, draw its figures, write reports/theory/.

One function per ``privaudit theory`` command; each returns the JSON summary (numbers,
parameters and the paths written). The CLI is a thin layer over these, and
:func:`run_all` runs them in the page's order with their defaults.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from privaudit.reporting.plots import heatmap, line_plot
from privaudit.theorems.convergence import KAPPAS, convergence_experiment
from privaudit.theorems.federated import federated_gd
from privaudit.theorems.masked_neurons import (
    BERNOULLI_PS,
    BERNOULLI_XIS,
    CATEGORICAL_PS,
    CATEGORICAL_STEPS,
    masked_neurons_experiment,
)
from privaudit.theorems.page import save_experiment, theory_dir
from privaudit.theorems.smoothing import smoothing_experiment
from privaudit.theorems.twolayer import least_eigenvalue, make_problem


def _public(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "caption"}


def run_smoothing(workdir: Path, *, kappas: Sequence[float] = (0.1, 0.2, 0.5, 1.0), draws: int = 200_000,
                  seed: int = 0) -> dict:
    """Figures 1–2: closed-form expected ReLU vs Monte Carlo and the proxy, one figure per κ."""
    result = smoothing_experiment(kappas=kappas, draws=draws, seed=seed)
    t = result.table
    svgs = [line_plot(
        [{"label": "ReLU(z)", "x": g["z"], "y": g["relu"], "markers": False},
         {"label": "closed form z·Φ(z/s) + s·φ(z/s)", "x": g["z"], "y": g["closed_form"], "markers": False},
         {"label": "proxy z·Φ(z/s)", "x": g["z"], "y": g["proxy"], "markers": False},
         {"label": f"Monte Carlo ({draws:,} masks)", "x": g["z"], "y": g["monte_carlo"], "line": False}],
        title=f"Expected ReLU under the mask, κ = {kappa:g} (‖w ⊙ x‖ = 1)", xlabel="z = wᵀx",
        ylabel="E[ReLU(wᵀ(x ⊙ c))]", standalone=True)
        for kappa, g in t.groupby("kappa", sort=True)]
    outside = int((t["gap_in_se"] > 3).sum())
    by_chance = len(t) * 2 * norm.sf(3.0)  # points beyond 3 SE expected from Monte Carlo noise alone
    summary = {
        "title": "Smoothed activation: closed form vs Monte Carlo",
        "caption": (f"For each κ, the closed form (line) against a Monte Carlo mean over {draws:,} "
                         f"masks c ~ N(1, κ²) of a 20-dimensional neuron (points), and the theorems' proxy. "
                         f"Largest gap {result.max_gap:.2e} (Monte Carlo standard error there "
                         f"{result.max_gap_se:.2e}); largest gap over the grid {result.max_gap_in_se:.2f} "
                         f"standard errors; {outside} of {len(t)} grid points lie beyond 3 standard errors, "
                         f"where Monte Carlo noise alone puts {by_chance:.2f} on average."),
        "max_gap": result.max_gap, "max_gap_se": result.max_gap_se, "max_gap_in_se": result.max_gap_in_se,
        "points": len(t), "points_beyond_3se": outside, "expected_beyond_3se": by_chance,
        "kappas": list(kappas), "draws": draws, "seed": seed,
    }
    paths = save_experiment(workdir, "smoothing", t, svgs, summary)
    return {"experiment": "smoothing", **_public(summary), **paths}


def _kappa_label(kappa: float) -> str:
    return "κ = 0 (plain GD)" if kappa == 0 else f"κ = {kappa:g}"


def run_convergence(workdir: Path, *, kappas: Sequence[float] = KAPPAS, n: int = 500, d: int = 20, m: int = 100,
                    lr: float = 0.005, iterations: int = 2000, labels: str = "teacher", seed: int = 0) -> dict:
    """Figure 3(a): clean training loss of masked GD per κ, the floors and their log-log slope."""
    problem = make_problem(n, d, m, labels=labels, seed=seed)
    r = convergence_experiment(problem, kappas=kappas, lr=lr, iterations=iterations, seed=seed)
    s = r.summary
    curves = line_plot([{"label": _kappa_label(k), "x": g["iteration"], "y": g["clean_loss"], "markers": False}
                        for k, g in r.curves.groupby("kappa", sort=True)],
                       title=f"Masked GD, n = {n}, d = {d}, m = {m}, lr {lr:g}", xlabel="iteration",
                       ylabel="clean training loss ½‖f(W, X) − y‖²", log_y=True, standalone=True)
    fit = s[(s["kappa"] > 0) & s["plateaued"]]
    positive = s[s["kappa"] > 0]
    floor_series = [{"label": "floor (plateaued)", "x": fit["kappa"], "y": fit["floor"], "line": False},
                    {"label": "last-window loss (still falling)", "x": positive.loc[~positive["plateaued"], "kappa"],
                     "y": positive.loc[~positive["plateaued"], "floor"], "line": False}]
    if np.isfinite(r.slope):
        grid = np.geomspace(float(fit["kappa"].min()), float(fit["kappa"].max()), 20)
        floor_series.append({"label": f"fit: slope {r.slope:.2f} (theory: 2)", "x": grid,
                             "y": np.exp(r.intercept) * grid ** r.slope, "markers": False})
    floors = line_plot(floor_series, title="Error floor against κ (log-log)", xlabel="κ",
                       ylabel="clean loss over the last 10% of iterations", log_x=True, log_y=True, standalone=True)
    plain = s[s["kappa"] == 0]
    rates = s["early_rate"]
    caption = (f"Inputs on the unit sphere, {labels} labels, W₀ ~ N(0, I), a ~ ±1; each κ starts from the same "
               f"W₀ and draws its own masks. NTK Gram matrix λ₀ = {r.lambda0:.4f}. Early rate over the first "
               f"20 iterations {rates.min():.4f}–{rates.max():.4f} per iteration across κ. "
               + (f"Floors (mean clean loss over the last {iterations // 10} iterations) of the plateaued κ grow "
                  f"as κ^{r.slope:.2f}. " if np.isfinite(r.slope) else "No κ > 0 curve plateaued. ")
               + (f"κ = 0 ends at {float(plain['final_loss'].iloc[0]):.3g}, "
                  f"{'still falling' if not bool(plain['plateaued'].iloc[0]) else 'flat'}. " if len(plain) else "")
               + "Points marked “still falling” have not reached their floor within the run.")
    table = s.to_dict(orient="records")
    summary = {"title": "Convergence under Gaussian input masks (Figure 3a)", "caption": caption,
               "lambda0": r.lambda0, "slope": r.slope, "per_kappa": table,
               "n": n, "d": d, "m": m, "lr": lr, "iterations": iterations, "labels": labels, "seed": seed}
    data = r.curves.merge(s[["kappa", "floor", "plateaued"]], on="kappa")
    paths = save_experiment(workdir, "convergence", data, [curves, floors], summary)
    return {"experiment": "convergence", **_public(summary), **paths}


def run_federated(workdir: Path, *, kappas: Sequence[float] = (0.0, 0.2, 0.6, 1.0),
                  local_steps: Sequence[int] = (1, 5, 20), workers: int = 5, rounds: int = 400,
                  n: int = 500, d: int = 20, m: int = 100, lr: float = 0.005, labels: str = "teacher",
                  seed: int = 0) -> dict:
    """Figure 3(b): FedAvg with masked inputs, curves over κ for each number of local steps."""
    problem = make_problem(n, d, m, labels=labels, seed=seed)
    rows, finals = [], []
    for tau in local_steps:
        for kappa in kappas:
            rng = np.random.default_rng([seed, tau, round(kappa * 1_000_000)])
            losses = federated_gd(problem, kappa=kappa, local_steps=tau, workers=workers, rounds=rounds,
                                  lr=lr, rng=rng)
            rows.append(pd.DataFrame({"local_steps": tau, "kappa": kappa, "round": np.arange(rounds + 1),
                                      "clean_loss": losses}))
            finals.append({"local_steps": tau, "kappa": kappa,
                           "final_loss": float(losses[-max(rounds // 10, 1):].mean())})
    data = pd.concat(rows, ignore_index=True)
    final = pd.DataFrame(finals)
    positive = data["clean_loss"][data["clean_loss"] > 0]
    y_range = (float(positive.min()), float(positive.max()))
    svgs = [line_plot([{"label": _kappa_label(k), "x": g["round"], "y": g["clean_loss"], "markers": False}
                       for k, g in data[data["local_steps"] == tau].groupby("kappa", sort=True)],
                      title=f"FedAvg, {workers} workers, τ = {tau} local step{'s' if tau > 1 else ''}",
                      xlabel="communication round", ylabel="clean training loss", log_y=True, y_range=y_range,
                      standalone=True)
            for tau in local_steps]
    grid = final.pivot(index="kappa", columns="local_steps", values="final_loss")
    svgs.append(heatmap(grid.to_numpy(), x_labels=[str(t) for t in grid.columns],
                        y_labels=[f"{k:g}" for k in grid.index], title="Final clean loss over κ and τ",
                        xlabel="local steps τ", ylabel="mask std κ", value_label="loss, last 10% of rounds",
                        log_color=True, standalone=True))
    caption = (f"The {n} samples of Figure 3(a)'s problem split into {workers} disjoint shards; each round every "
               f"worker runs τ GD steps (lr {lr:g}) on its masked shard from the server's W, and the server "
               "averages. With τ = 1 a round is one step of centralised masked GD. Curves share one y-axis; the "
               "heatmap shows the mean clean loss over the last 10% of rounds.")
    summary = {"title": "Federated training under Gaussian input masks (Figure 3b)",
               "caption": caption, "final_loss": final.to_dict(orient="records"),
               "lambda0": least_eigenvalue(problem.X), "workers": workers, "rounds": rounds,
               "kappas": list(kappas), "local_steps": list(local_steps), "n": n, "d": d, "m": m, "lr": lr,
               "labels": labels, "seed": seed}
    paths = save_experiment(workdir, "federated", data, svgs, summary, extra_tables={"final": final})
    return {"experiment": "federated", **_public(summary), **paths}


def run_masked_neurons(workdir: Path, *, n: int = 100, d: int = 128, m: int = 4000, lr: float = 0.3,
                       rounds: int = 200, labels: str = "gaussian", bernoulli_ps: Sequence[int] = BERNOULLI_PS,
                       xis: Sequence[float] = BERNOULLI_XIS, categorical_ps: Sequence[int] = CATEGORICAL_PS,
                       steps: Sequence[int] = CATEGORICAL_STEPS, seed: int = 0) -> dict:
    """docs/methods/c-masked-neurons.md C: loss curves of dropout, multi-sample dropout and IST, and the
    two heatmaps."""
    problem = make_problem(n, d, m, labels=labels, seed=seed)
    r = masked_neurons_experiment(problem, lr=lr, rounds=rounds, seed=seed, bernoulli_ps=bernoulli_ps, xis=xis,
                                  categorical_ps=categorical_ps, steps=steps)
    curves = line_plot([{"label": label, "x": g["round"], "y": g["error"], "markers": False}
                        for label, g in r.curves.groupby("setting", sort=False)],
                       title=f"Masked-neuron training, n = {n}, d = {d}, m = {m}, lr {lr:g}", xlabel="round",
                       ylabel="‖y − ξ·f(W, X)‖²", log_y=True, standalone=True)
    b = r.bernoulli.pivot(index="xi", columns="p", values="final_error")
    c = r.categorical.pivot(index="local_steps", columns="p", values="final_error")
    maps = [heatmap(b.to_numpy(), x_labels=[str(p) for p in b.columns], y_labels=[f"{x:g}" for x in b.index],
                    title="Bernoulli masks (τ = 1): final error over (p, ξ)", xlabel="subnetworks p",
                    ylabel="keep probability ξ", value_label="‖y − u‖², last 10% of rounds", log_color=True,
                    standalone=True),
            heatmap(c.to_numpy(), x_labels=[str(p) for p in c.columns], y_labels=[str(t) for t in c.index],
                    title="Categorical masks (IST, ξ = 1/p): final error over (p, τ)", xlabel="subnetworks p",
                    ylabel="local steps τ", value_label="‖y − u‖², last 10% of rounds", log_color=True,
                    standalone=True)]
    caption = (f"{n} samples on the unit sphere in {d} dimensions, {labels} labels (the paper's UCI data set is "
               f"not bundled), {m} hidden neurons, {rounds} rounds, lr {lr:g}; λ₀ = {r.lambda0:.3f}. "
               "Each cell's final error is the mean of ‖y − ξ·f(W, X)‖² over the last 10% of rounds.")
    summary = {"title": "Training with randomly masked neurons (dropout, multi-sample dropout, IST)",
               "caption": caption, "lambda0": r.lambda0,
               "bernoulli": r.bernoulli.to_dict(orient="records"),
               "categorical": r.categorical.to_dict(orient="records"),
               "n": n, "d": d, "m": m, "lr": lr, "rounds": rounds, "labels": labels, "seed": seed}
    grid = pd.concat([r.bernoulli.assign(masks="bernoulli", local_steps=1),
                      r.categorical.assign(masks="categorical", xi=1.0 / r.categorical["p"])], ignore_index=True)
    paths = save_experiment(workdir, "masked-neurons", r.curves, [curves, *maps], summary,
                            extra_tables={"grid": grid[["masks", "p", "local_steps", "xi", "final_error"]]})
    return {"experiment": "masked-neurons", **_public(summary), **paths}


RUNNERS: dict[str, Callable[..., Any]] = {"smoothing": run_smoothing, "convergence": run_convergence,
                                          "federated": run_federated, "masked-neurons": run_masked_neurons}


def run_all(workdir: Path, *, seed: int = 0, progress=None) -> dict:
    """Every experiment with its defaults; ``progress(name, seconds)`` after each."""
    results, seconds = {}, {}
    for name, runner in RUNNERS.items():
        start = time.perf_counter()
        results[name] = runner(workdir, seed=seed)
        seconds[name] = round(time.perf_counter() - start, 2)
        if progress is not None:
            progress(name, seconds[name])
    return {"experiments": results, "seconds": seconds, "html": str(theory_dir(workdir) / "index.html")}
