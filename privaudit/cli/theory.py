"""``privaudit theory …``: the papers' theory as experiments writing reports/theory/."""

from __future__ import annotations

from typing import Annotated

import typer

from privaudit.api.theory import BOUNDS, OPTIONS
from privaudit.cli.callbacks import number, one_of
from privaudit.cli.command import Command, Group
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import JsonOpt, SeedOpt, WorkdirOpt, option
from privaudit.cli.output import emit_json, info_console, warn
from privaudit.core.defaults import THEORY_LABELS

app = typer.Typer(help="The papers' theory as runnable experiments (CSV, SVG and a page under reports/theory/).",
                  no_args_is_help=True, rich_markup_mode="rich", cls=Group)

LabelsOpt = Annotated[str, typer.Option("--labels", callback=one_of(*THEORY_LABELS),
                                        help=f"Targets: {', '.join(THEORY_LABELS)}.")]
LrOpt = Annotated[float, option("lr", callback=number(*BOUNDS["lr"]), help="Gradient descent step size (> 0).")]
NOpt = Annotated[int, typer.Option("--n", callback=number(*BOUNDS["n"]), help="Training samples.")]
DOpt = Annotated[int, typer.Option("--d", callback=number(*BOUNDS["d"]), help="Input dimension.")]
MOpt = Annotated[int, typer.Option("--m", callback=number(*BOUNDS["m"]), help="Hidden neurons.")]
SMOOTHING, CONVERGENCE, FEDERATED, MASKED = (OPTIONS[e]
                                              for e in ("smoothing", "convergence", "federated", "masked-neurons"))


def _run(experiment: str, seed: int, workdir, as_json: bool, **options) -> None:
    """Run the experiment (:func:`privaudit.theory`), then print its line and page, or its JSON."""
    from privaudit.api.theory import theory

    console = info_console(as_json)
    result = theory(experiment, seed=seed, workdir=workdir, log=warn,
                    progress=lambda name, s: console.print(f"{name}: {s:.1f} s"), **options)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(f"{result.headline}\npage: {result.page_path}", soft_wrap=True)


@app.command("smoothing", cls=Command, help="Closed-form expected ReLU under a Gaussian input mask vs Monte Carlo and "
                                            "the proxy (Figures 1-2).")
@handle_errors
def smoothing_cmd(
    kappas: Annotated[str, option("kappas", help="Comma-separated mask std kappa values (> 0).")] = SMOOTHING["kappas"],
    draws: Annotated[int, typer.Option("--draws", callback=number(*BOUNDS["draws"]),
                                       help="Monte Carlo masks per grid point.")] = SMOOTHING["draws"],
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Figures 1-2 of docs/methods/a-mg-noise.md A.2 with their numbers."""
    _run("smoothing", seed, workdir, as_json, kappas=kappas, draws=draws)


@app.command("convergence", cls=Command, help="Masked full-batch GD on a two-layer ReLU network: loss per kappa, "
                                              "floors, NTK lambda0 (Figure 3a).")
@handle_errors
def convergence_cmd(
    kappas: Annotated[str, option("kappas", help="Comma-separated mask std kappa values (0 = plain "
                                                 "GD).")] = CONVERGENCE["kappas"],
    iterations: Annotated[int, typer.Option("--iterations", callback=number(*BOUNDS["iterations"]),
                                            help="Gradient descent iterations.")] = CONVERGENCE["iterations"],
    lr: LrOpt = CONVERGENCE["lr"],
    n: NOpt = CONVERGENCE["n"],
    d: DOpt = CONVERGENCE["d"],
    m: MOpt = CONVERGENCE["m"],
    labels: LabelsOpt = CONVERGENCE["labels"],
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Figure 3(a) of docs/methods/a-mg-noise.md A.2."""
    _run("convergence", seed, workdir, as_json, kappas=kappas, iterations=iterations, lr=lr, n=n, d=d, m=m,
         labels=labels)


@app.command("federated", cls=Command, help="FedAvg with Gaussian input masks: loss curves over kappa and local steps "
                                            "(Figure 3b).")
@handle_errors
def federated_cmd(
    kappas: Annotated[str, option("kappas",
                                  help="Comma-separated mask std kappa values (>= 0).")] = FEDERATED["kappas"],
    local_steps: Annotated[str, typer.Option("--local-steps",
                                             help="Comma-separated local GD steps per round (whole numbers "
                                                  ">= 1).")] = FEDERATED["local_steps"],
    workers: Annotated[int, typer.Option("--workers", callback=number(*BOUNDS["workers"]),
                                         help="Workers, each holding a disjoint shard of the 500 "
                                              "samples.")] = FEDERATED["workers"],
    rounds: Annotated[int, typer.Option("--rounds", callback=number(*BOUNDS["rounds"]),
                                        help="Communication rounds.")] = FEDERATED["rounds"],
    lr: LrOpt = FEDERATED["lr"],
    labels: LabelsOpt = FEDERATED["labels"],
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Figure 3(b) of docs/methods/a-mg-noise.md A.2."""
    _run("federated", seed, workdir, as_json, kappas=kappas, local_steps=local_steps, workers=workers, rounds=rounds,
         lr=lr, labels=labels)


@app.command("masked-neurons", cls=Command, help="Dropout, multi-sample dropout and IST with Bernoulli or categorical "
                                                 "neuron masks (docs/methods/c-masked-neurons.md C).")
@handle_errors
def masked_neurons_cmd(
    ps: Annotated[str, typer.Option("--p", help="Comma-separated numbers of subnetworks (whole numbers >= 1; the "
                                                "categorical heatmap uses those >= 2).")] = MASKED["p"],
    xis: Annotated[str, typer.Option("--xi",
                                     help="Comma-separated Bernoulli keep probabilities in (0, 1].")] = MASKED["xi"],
    local_steps: Annotated[str, typer.Option("--local-steps",
                                             help="Comma-separated local steps (categorical masks; whole numbers "
                                                  ">= 1).")] = MASKED["local_steps"],
    rounds: Annotated[int, typer.Option("--rounds", callback=number(*BOUNDS["rounds"]),
                                        help="Global rounds.")] = MASKED["rounds"],
    n: NOpt = MASKED["n"],
    d: DOpt = MASKED["d"],
    m: MOpt = MASKED["m"],
    lr: LrOpt = MASKED["lr"],
    labels: LabelsOpt = MASKED["labels"],
    seed: SeedOpt = 0,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """docs/methods/c-masked-neurons.md C: loss curves and the (p, ξ) and (p, τ) heatmaps."""
    _run("masked-neurons", seed, workdir, as_json, p=ps, xi=xis, local_steps=local_steps, rounds=rounds, n=n, d=d, m=m,
         lr=lr, labels=labels)


@app.command("all", cls=Command, help="Run every theory experiment with its defaults and build "
                                      "reports/theory/index.html.")
@handle_errors
def all_cmd(seed: SeedOpt = 0, workdir: WorkdirOpt = ".", as_json: JsonOpt = False) -> None:
    _run("all", seed, workdir, as_json)
