"""``privaudit theory …``: the papers' theory as experiments writing reports/theory/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privaudit.cli.common import JsonOpt, WorkdirOpt, emit_json, handle_errors, info_console, parse_grid
from privaudit.cli.options import SeedOpt
from privaudit.errors import ConfigError
from privaudit.report.svg import line_plot
from privaudit.theory.page import save_experiment
from privaudit.theory.smoothing import smoothing_experiment

app = typer.Typer(help="The papers' theory as runnable experiments (CSV, SVG and a page under reports/theory/).",
                  no_args_is_help=True)


@app.command("smoothing", help="Closed-form expected ReLU under a Gaussian input mask vs Monte Carlo and the proxy (Figures 1-2).")
@handle_errors
def smoothing_cmd(
    kappas: Annotated[str, typer.Option("--kappas", help="Comma-separated mask std kappa values.")] = "0.1,0.2,0.5,1",
    draws: Annotated[int, typer.Option("--draws", help="Monte Carlo masks per grid point.")] = 200_000,
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Figures 1-2 of papers.md A.2 with their numbers."""
    grid = parse_grid(kappas, "--kappas")
    if not grid or any(k <= 0 for k in grid):
        raise ConfigError("--kappas needs values > 0")
    if draws < 100:
        raise ConfigError(f"--draws must be at least 100 (got {draws})")
    result = smoothing_experiment(kappas=grid, draws=draws, seed=seed)
    t = result.table
    svgs = []
    for kappa, g in t.groupby("kappa", sort=True):
        svgs.append(line_plot(
            [{"label": "ReLU(z)", "x": g["z"], "y": g["relu"], "markers": False},
             {"label": "closed form z·Φ(z/s) + s·φ(z/s)", "x": g["z"], "y": g["closed_form"], "markers": False},
             {"label": "proxy z·Φ(z/s)", "x": g["z"], "y": g["proxy"], "markers": False},
             {"label": f"Monte Carlo ({draws:,} masks)", "x": g["z"], "y": g["monte_carlo"], "markers": True}],
            title=f"Expected ReLU under the mask, κ = {kappa:g} (‖w ⊙ x‖ = 1)", xlabel="z = wᵀx",
            ylabel="E[ReLU(wᵀ(x ⊙ c))]", standalone=True))
    summary = {
        "title": "Smoothed activation: closed form vs Monte Carlo",
        "caption_html": (f"For each κ, the closed form (line) against a Monte Carlo mean over {draws:,} "
                         f"masks c ~ N(1, κ²) of a 20-dimensional neuron (points), and the theorems' proxy. "
                         f"Largest gap {result.max_gap:.2e} (Monte Carlo standard error there "
                         f"{result.max_gap_se:.2e}); largest gap over the grid {result.max_gap_in_se:.2f} "
                         "standard errors."),
        "max_gap": result.max_gap, "max_gap_se": result.max_gap_se, "max_gap_in_se": result.max_gap_in_se,
        "kappas": grid, "draws": draws, "seed": seed,
    }
    paths = save_experiment(workdir, "smoothing", t, svgs, summary)
    if as_json:
        emit_json({"experiment": "smoothing", **{k: v for k, v in summary.items() if k != "caption_html"}, **paths})
        return
    info_console(as_json).print(f"smoothing: largest |closed form − Monte Carlo| = {result.max_gap:.2e} "
                                f"(SE {result.max_gap_se:.2e}; at most {result.max_gap_in_se:.2f} SE over the grid)\n"
                                f"page: {paths['html']}", soft_wrap=True)
