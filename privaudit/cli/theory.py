"""``privaudit theory …``: the papers' theory as experiments writing reports/theory/."""

from __future__ import annotations

from typing import Annotated

import typer

from privaudit.cli.common import (JsonOpt, SeedOpt, WorkdirOpt, emit_json, handle_errors, info_console, number,
                                  one_of, parse_grid, refresh_reports)
from privaudit.core.defaults import THEORY_LABELS
from privaudit.errors import ConfigError

app = typer.Typer(help="The papers' theory as runnable experiments (CSV, SVG and a page under reports/theory/).",
                  no_args_is_help=True, rich_markup_mode="rich")

LabelsOpt = Annotated[str, typer.Option("--labels", callback=one_of(*THEORY_LABELS), help=f"Targets: {', '.join(THEORY_LABELS)}.")]
LrOpt = Annotated[float, typer.Option("--lr", callback=number(0, 100, low_open=True), help="Gradient descent step size (> 0).")]
NOpt = Annotated[int, typer.Option("--n", callback=number(1, 100_000), help="Training samples.")]
DOpt = Annotated[int, typer.Option("--d", callback=number(1, 100_000), help="Input dimension.")]
MOpt = Annotated[int, typer.Option("--m", callback=number(1, 100_000), help="Hidden neurons.")]
MAX_GRID = 100  # values in one comma-separated grid


def _floats(text: str, option: str, *, low: float = 0.0, allow_low: bool = True, high: float = 100.0) -> list[float]:
    values = parse_grid(text, option, low=low, low_open=not allow_low, high=high)
    if not values:
        raise ConfigError(f"{option} needs at least one value")
    if len(values) > MAX_GRID:
        raise ConfigError(f"{option} takes at most {MAX_GRID} values (got {len(values)})")
    return values


def _ints(text: str, option: str, high: int = 10_000) -> list[int]:
    values = _floats(text, option, low=1.0, high=high)
    if any(v != int(v) for v in values):
        raise ConfigError(f"{option} needs whole numbers between 1 and {high}")
    return [int(v) for v in values]


MAX_ARRAY = 200_000_000  # elements of one float64 array (1.6 GB): n x m activations, m x d weights


def _fits(n: int, d: int, m: int) -> None:
    """Refuse a problem whose n x m, m x d or n x d arrays would not fit in memory."""
    for what, size in (("--n x --m", n * m), ("--m x --d", m * d), ("--n x --d", n * d)):
        if size > MAX_ARRAY:
            raise ConfigError(f"{what} = {size:,} is too large (at most {MAX_ARRAY:,} values in one array, "
                              f"{MAX_ARRAY * 8 / 1e9:.1f} GB)")


def _refresh_main_report(workdir) -> None:
    """The main report's Papers' figures section reads reports/theory/: rebuild it."""
    from privaudit.pipeline.workspace import Workspace

    refresh_reports(Workspace(workdir).ensure_writable())


def _finish(workdir, result: dict, line: str, as_json: bool) -> None:
    """Refresh the main report, then print the result."""
    _refresh_main_report(workdir)
    if as_json:
        emit_json(result)
        return
    info_console(as_json).print(f"{line}\npage: {result['html']}", soft_wrap=True)


@app.command("smoothing", help="Closed-form expected ReLU under a Gaussian input mask vs Monte Carlo and the proxy (Figures 1-2).")
@handle_errors
def smoothing_cmd(
    kappas: Annotated[str, typer.Option("--kappas", help="Comma-separated mask std kappa values (> 0).")] = "0.1,0.2,0.5,1",
    draws: Annotated[int, typer.Option("--draws", callback=number(100, 10_000_000), help="Monte Carlo masks per grid point.")] = 200_000,
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Figures 1-2 of docs/methods.md A.2 with their numbers."""
    grid = _floats(kappas, "--kappas", allow_low=False)
    from privaudit.theorems import experiments

    r = experiments.run_smoothing(workdir, kappas=grid, draws=draws, seed=seed)
    _finish(workdir, r, f"smoothing: largest |closed form − Monte Carlo| = {r['max_gap']:.2e} (SE {r['max_gap_se']:.2e}; "
                        f"at most {r['max_gap_in_se']:.2f} SE over the grid)", as_json)


@app.command("convergence", help="Masked full-batch GD on a two-layer ReLU network: loss per kappa, floors, NTK lambda0 (Figure 3a).")
@handle_errors
def convergence_cmd(
    kappas: Annotated[str, typer.Option("--kappas", help="Comma-separated mask std kappa values (0 = plain GD).")] = "0,0.05,0.2,0.4,0.6,1,2",
    iterations: Annotated[int, typer.Option("--iterations", callback=number(40, 1_000_000), help="Gradient descent iterations.")] = 2000,
    lr: LrOpt = 0.005,
    n: NOpt = 500,
    d: DOpt = 20,
    m: MOpt = 100,
    labels: LabelsOpt = "teacher",
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Figure 3(a) of docs/methods.md A.2."""
    grid = _floats(kappas, "--kappas")
    _fits(n, d, m)
    from privaudit.theorems import experiments

    r = experiments.run_convergence(workdir, kappas=grid, n=n, d=d, m=m, lr=lr, iterations=iterations,
                                    labels=labels, seed=seed)
    floors = ", ".join(f"κ={row['kappa']:g}: {row['floor']:.3g}{'' if row['plateaued'] else ' (falling)'}"
                       for row in r["per_kappa"])
    _finish(workdir, r, f"convergence: λ₀ = {r['lambda0']:.4f}; last-window loss {floors}; "
                        f"log-log slope of plateaued floors {r['slope']:.2f}", as_json)


@app.command("federated", help="FedAvg with Gaussian input masks: loss curves over kappa and local steps (Figure 3b).")
@handle_errors
def federated_cmd(
    kappas: Annotated[str, typer.Option("--kappas", help="Comma-separated mask std kappa values (>= 0).")] = "0,0.2,0.6,1",
    local_steps: Annotated[str, typer.Option("--local-steps", help="Comma-separated local GD steps per round (whole numbers >= 1).")] = "1,5,20",
    workers: Annotated[int, typer.Option("--workers", callback=number(1, 500), help="Workers, each holding a disjoint shard of the 500 samples.")] = 5,
    rounds: Annotated[int, typer.Option("--rounds", callback=number(10, 1_000_000), help="Communication rounds.")] = 400,
    lr: LrOpt = 0.005,
    labels: LabelsOpt = "teacher",
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Figure 3(b) of docs/methods.md A.2."""
    grid, steps = _floats(kappas, "--kappas"), _ints(local_steps, "--local-steps")
    from privaudit.theorems import experiments

    r = experiments.run_federated(workdir, kappas=grid, local_steps=steps, workers=workers, rounds=rounds, lr=lr,
                                  labels=labels, seed=seed)
    finals = ", ".join(f"τ={row['local_steps']} κ={row['kappa']:g}: {row['final_loss']:.3g}" for row in r["final_loss"])
    _finish(workdir, r, f"federated: final clean loss {finals}", as_json)


@app.command("masked-neurons", help="Dropout, multi-sample dropout and IST with Bernoulli or categorical neuron masks (docs/methods.md C).")
@handle_errors
def masked_neurons_cmd(
    ps: Annotated[str, typer.Option("--p", help="Comma-separated numbers of subnetworks (whole numbers >= 1; the categorical heatmap uses those >= 2).")] = "1,2,4,8",
    xis: Annotated[str, typer.Option("--xi", help="Comma-separated Bernoulli keep probabilities in (0, 1].")] = "0.25,0.5,0.75",
    local_steps: Annotated[str, typer.Option("--local-steps", help="Comma-separated local steps (categorical masks; whole numbers >= 1).")] = "1,2,4,8",
    rounds: Annotated[int, typer.Option("--rounds", callback=number(10, 1_000_000), help="Global rounds.")] = 200,
    n: NOpt = 100,
    d: DOpt = 128,
    m: MOpt = 4000,
    lr: LrOpt = 0.3,
    labels: LabelsOpt = "gaussian",
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """docs/methods.md C: loss curves and the (p, ξ) and (p, τ) heatmaps."""
    p_grid, steps = _ints(ps, "--p", high=1024), _ints(local_steps, "--local-steps")
    xi_grid = _floats(xis, "--xi", allow_low=False, high=1.0)
    _fits(n, d, m)
    categorical = [p for p in p_grid if p > 1]  # one categorical subnetwork is plain GD
    if not categorical:
        raise ConfigError("--p needs a value >= 2 for the categorical (IST) heatmap")
    from privaudit.theorems import experiments

    r = experiments.run_masked_neurons(workdir, n=n, d=d, m=m, lr=lr, rounds=rounds, labels=labels,
                                       bernoulli_ps=p_grid, xis=xi_grid, categorical_ps=categorical, steps=steps,
                                       seed=seed)
    _finish(workdir, r, f"masked-neurons: {len(r['bernoulli'])} Bernoulli and {len(r['categorical'])} categorical "
                        f"settings; λ₀ = {r['lambda0']:.3f}", as_json)


@app.command("all", help="Run every theory experiment with its defaults and build reports/theory/index.html.")
@handle_errors
def all_cmd(seed: SeedOpt = 0, workdir: WorkdirOpt = ".", as_json: JsonOpt = False) -> None:
    from privaudit.theorems import experiments

    console = info_console(as_json)
    r = experiments.run_all(workdir, seed=seed, progress=lambda name, s: console.print(f"{name}: {s:.1f} s"))
    _refresh_main_report(workdir)
    if as_json:
        emit_json(r)
        return
    console.print(f"all experiments in {sum(r['seconds'].values()):.1f} s\npage: {r['html']}", soft_wrap=True)
