"""``privaudit theory …``: the papers' theory as experiments writing reports/theory/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privaudit.cli.common import JsonOpt, WorkdirOpt, emit_json, handle_errors, info_console, parse_grid
from privaudit.cli.options import SeedOpt
from privaudit.errors import ConfigError
from privaudit.theory import experiments
from privaudit.theory.twolayer import LABELS

app = typer.Typer(help="The papers' theory as runnable experiments (CSV, SVG and a page under reports/theory/).",
                  no_args_is_help=True)

LabelsOpt = Annotated[str, typer.Option("--labels", help=f"Targets: {', '.join(LABELS)}.")]
LrOpt = Annotated[float, typer.Option("--lr", help="Gradient descent step size.")]


def _floats(text: str, option: str, *, low: float = 0.0, allow_low: bool = True) -> list[float]:
    values = parse_grid(text, option)
    if not values or any(v < low or (v == low and not allow_low) for v in values):
        raise ConfigError(f"{option} needs values {'>=' if allow_low else '>'} {low:g}")
    return values


def _ints(text: str, option: str) -> list[int]:
    values = parse_grid(text, option)
    if not values or any(v < 1 or v != int(v) for v in values):
        raise ConfigError(f"{option} needs whole numbers >= 1")
    return [int(v) for v in values]


def _positive(**named: float) -> None:
    for option, value in named.items():
        if not value > 0:
            raise ConfigError(f"--{option.replace('_', '-')} must be > 0 (got {value})")


def _labels(labels: str) -> str:
    if labels not in LABELS:
        raise ConfigError(f"--labels must be one of {', '.join(LABELS)} (got {labels!r})")
    return labels


def _report(result: dict, line: str, as_json: bool) -> None:
    if as_json:
        emit_json(result)
        return
    info_console(as_json).print(f"{line}\npage: {result['html']}", soft_wrap=True)


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
    grid = _floats(kappas, "--kappas", allow_low=False)
    if draws < 100:
        raise ConfigError(f"--draws must be at least 100 (got {draws})")
    r = experiments.run_smoothing(workdir, kappas=grid, draws=draws, seed=seed)
    _report(r, f"smoothing: largest |closed form − Monte Carlo| = {r['max_gap']:.2e} (SE {r['max_gap_se']:.2e}; "
               f"at most {r['max_gap_in_se']:.2f} SE over the grid)", as_json)


@app.command("convergence", help="Masked full-batch GD on a two-layer ReLU network: loss per kappa, floors, NTK lambda0 (Figure 3a).")
@handle_errors
def convergence_cmd(
    kappas: Annotated[str, typer.Option("--kappas", help="Comma-separated mask std kappa values (0 = plain GD).")] = "0,0.05,0.2,0.4,0.6,1,2",
    iterations: Annotated[int, typer.Option("--iterations", help="Gradient descent iterations.")] = 2000,
    lr: LrOpt = 0.005,
    n: Annotated[int, typer.Option("--n", help="Training samples.")] = 500,
    d: Annotated[int, typer.Option("--d", help="Input dimension.")] = 20,
    m: Annotated[int, typer.Option("--m", help="Hidden neurons.")] = 100,
    labels: LabelsOpt = "teacher",
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Figure 3(a) of papers.md A.2."""
    grid = _floats(kappas, "--kappas")
    _positive(lr=lr)
    if min(n, d, m) < 1:
        raise ConfigError("--n, --d and --m must be at least 1")
    if iterations < 40:
        raise ConfigError(f"--iterations must be at least 40 (got {iterations})")
    r = experiments.run_convergence(workdir, kappas=grid, n=n, d=d, m=m, lr=lr, iterations=iterations,
                                    labels=_labels(labels), seed=seed)
    floors = ", ".join(f"κ={row['kappa']:g}: {row['floor']:.3g}{'' if row['plateaued'] else ' (falling)'}"
                       for row in r["per_kappa"])
    _report(r, f"convergence: λ₀ = {r['lambda0']:.4f}; last-window loss {floors}; "
               f"log-log slope of plateaued floors {r['slope']:.2f}", as_json)


@app.command("federated", help="FedAvg with Gaussian input masks: loss curves over kappa and local steps (Figure 3b).")
@handle_errors
def federated_cmd(
    kappas: Annotated[str, typer.Option("--kappas", help="Comma-separated mask std kappa values.")] = "0,0.2,0.6,1",
    local_steps: Annotated[str, typer.Option("--local-steps", help="Comma-separated local GD steps per round.")] = "1,5,20",
    workers: Annotated[int, typer.Option("--workers", help="Workers, each holding a disjoint shard.")] = 5,
    rounds: Annotated[int, typer.Option("--rounds", help="Communication rounds.")] = 400,
    lr: LrOpt = 0.005,
    labels: LabelsOpt = "teacher",
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Figure 3(b) of papers.md A.2."""
    grid, steps = _floats(kappas, "--kappas"), _ints(local_steps, "--local-steps")
    _positive(lr=lr)
    if not 1 <= workers <= 500:
        raise ConfigError(f"--workers must be between 1 and the 500 samples (got {workers})")
    if rounds < 10:
        raise ConfigError(f"--rounds must be at least 10 (got {rounds})")
    r = experiments.run_federated(workdir, kappas=grid, local_steps=steps, workers=workers, rounds=rounds, lr=lr,
                                  labels=_labels(labels), seed=seed)
    finals = ", ".join(f"τ={row['local_steps']} κ={row['kappa']:g}: {row['final_loss']:.3g}" for row in r["final_loss"])
    _report(r, f"federated: final clean loss {finals}", as_json)


@app.command("masked-neurons", help="Dropout, multi-sample dropout and IST with Bernoulli or categorical neuron masks (papers.md C).")
@handle_errors
def masked_neurons_cmd(
    ps: Annotated[str, typer.Option("--p", help="Comma-separated numbers of subnetworks (the categorical heatmap uses those >= 2).")] = "1,2,4,8",
    xis: Annotated[str, typer.Option("--xi", help="Comma-separated Bernoulli keep probabilities.")] = "0.25,0.5,0.75",
    local_steps: Annotated[str, typer.Option("--local-steps", help="Comma-separated local steps (categorical masks).")] = "1,2,4,8",
    rounds: Annotated[int, typer.Option("--rounds", help="Global rounds.")] = 200,
    n: Annotated[int, typer.Option("--n", help="Training samples.")] = 100,
    d: Annotated[int, typer.Option("--d", help="Input dimension.")] = 128,
    m: Annotated[int, typer.Option("--m", help="Hidden neurons.")] = 4000,
    lr: LrOpt = 0.3,
    labels: LabelsOpt = "gaussian",
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """papers.md C: loss curves and the (p, ξ) and (p, τ) heatmaps."""
    p_grid, steps = _ints(ps, "--p"), _ints(local_steps, "--local-steps")
    xi_grid = _floats(xis, "--xi", allow_low=False)
    if any(x > 1 for x in xi_grid):
        raise ConfigError("--xi needs values in (0, 1]")
    _positive(lr=lr)
    if min(n, d, m) < 1 or rounds < 10:
        raise ConfigError("--n, --d and --m must be at least 1 and --rounds at least 10")
    categorical = [p for p in p_grid if p > 1]  # one categorical subnetwork is plain GD
    if not categorical:
        raise ConfigError("--p needs a value >= 2 for the categorical (IST) heatmap")
    r = experiments.run_masked_neurons(workdir, n=n, d=d, m=m, lr=lr, rounds=rounds, labels=_labels(labels),
                                       bernoulli_ps=p_grid, xis=xi_grid, categorical_ps=categorical, steps=steps,
                                       seed=seed)
    _report(r, f"masked-neurons: {len(r['bernoulli'])} Bernoulli and {len(r['categorical'])} categorical settings; "
               f"λ₀ = {r['lambda0']:.3f}", as_json)


@app.command("all", help="Run every theory experiment with its defaults and build reports/theory/index.html.")
@handle_errors
def all_cmd(seed: SeedOpt = 0, workdir: WorkdirOpt = Path("."), as_json: JsonOpt = False) -> None:
    console = info_console(as_json)
    r = experiments.run_all(workdir, seed=seed, progress=lambda name, s: console.print(f"{name}: {s:.1f} s"))
    if as_json:
        emit_json(r)
        return
    console.print(f"all experiments in {sum(r['seconds'].values()):.1f} s\npage: {r['html']}", soft_wrap=True)
