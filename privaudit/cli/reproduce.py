"""``privaudit reproduce …``: the papers' published results as one command."""

from __future__ import annotations

import math
import shlex
import sys
import time
from typing import Annotated

import typer

from privaudit.cli.callbacks import one_of, refused
from privaudit.cli.command import Command, Group
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import (
    CpusPerJobOpt,
    DataDirOpt,
    DeviceOpt,
    DownloadOpt,
    DryRunOpt,
    ExecutorOpt,
    JsonOpt,
    RayAddressOpt,
    WorkdirOpt,
    option,
)
from privaudit.cli.output import emit_json, err, info_console, show_plan
from privaudit.cli.progress import training_progress
from privaudit.core.defaults import REPRODUCE_FAMILIES, REPRODUCE_SCALES

app = typer.Typer(help="The papers' published results, reproduced as one command (CSV, figures and a page under "
                       "reports/reproduce/).", no_args_is_help=True, rich_markup_mode="rich", cls=Group)


@app.command("mg-noise", cls=Command)
@handle_errors
def mg_noise_cmd(
    scale: Annotated[str, typer.Option("--scale", callback=one_of(*REPRODUCE_SCALES),
                                       help="full: the paper's settings (parts of 10,520, 50-80 epochs, its κ and σ "
                                            "grids, 20-120 epochs in the epoch sweep); reduced: every figure and claim "
                                            "at a reduced size, about 1.5 hours on a 2-core CPU (the page says what it "
                                            "reduces).")] = "reduced",
    dataset: Annotated[str, option("dataset", callback=one_of("cifar10", "digits"),
                                   help="cifar10 (the paper's data; see --data-dir), or the bundled digits for a quick "
                                        "run anywhere.")] = "cifar10",
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    models: Annotated[str | None, typer.Option("--models",
                                               help="Comma-separated architectures to reproduce "
                                                    f"({', '.join(REPRODUCE_FAMILIES)}; cnn-improved covers both of "
                                                    "the paper's variants); default all.")] = None,
    experiments: Annotated[str | None, typer.Option("--experiments",
                                                    help="Comma-separated experiments: accuracy (Figure 4), sweep "
                                                         "(Figures 5-7 and 9-10), epochs (the epoch sweep); default "
                                                         "all.")] = None,
    seeds: Annotated[str | None, option("seeds", help="Comma-separated seeds, each a full replicate (data split, "
                                                      "initialisation, masks, noise); default 0,1,2 as in the "
                                                      "paper.")] = None,
    device: DeviceOpt = "auto",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    cpus_per_job: CpusPerJobOpt = None,
    workdir: WorkdirOpt = ".",
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    # the command's help, one paragraph (hence concatenated, not wrapped)
    ("The MG-noise paper's CIFAR-10 results: Figure 4 (accuracy vs κ), Figures 5-7 (attack AUC, precision, recall "
     "vs κ, and the epoch sweep), Figures 9-10 (MG noise vs DP-SGD at equal accuracy), each statement of the paper "
     "checked with a 95 % interval. Writes reports/reproduce/mg-noise/; resumes, and reuses what audit trained.")
    t0 = time.perf_counter()
    from privaudit.api.reproduce import reproduce
    from privaudit.core.hooks import AuditHooks

    command = _command()
    with training_progress() as bars:
        result = reproduce("mg-noise", scale=scale, dataset=dataset, data_dir=data_dir, download=download,
                           models=models, experiments=experiments, seeds=seeds, device=device, executor=executor,
                           ray_address=ray_address, cpus_per_job=cpus_per_job, workdir=workdir,
                           hooks=AuditHooks(on_model_start=bars.start, on_epoch=bars.on_epoch, on_plan=bars.plan,
                                            on_job_done=bars.job_done, on_estimate=bars.estimate),
                           log=_log, command=command,
                           dry_run=dry_run)
    show_result(result, time.perf_counter() - t0, dry_run, as_json)


def _command() -> str:
    return "privaudit " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""


def _log(line: str) -> None:
    err.print(line, highlight=False, markup=False, soft_wrap=True)


def show_result(result, wall: float, dry_run: bool, as_json: bool) -> None:
    """Print a reproduction's statements and counts, or its dry run's plan."""
    if dry_run:
        if isinstance(result, dict):
            if as_json:
                emit_json(result)
                return
            from privaudit.reproduction.outputs import plan_headline

            console = info_console(as_json)
            console.print(plan_headline(f"reproduce {result.get('paper', '')}".strip(), result),
                          markup=False, highlight=False, soft_wrap=True)
            return
        show_plan(result, as_json)
        return
    summary = result.summary
    if as_json:
        emit_json(summary)
        return
    console = info_console(as_json)
    from rich.table import Table

    table = Table(title="the paper's statements, checked", show_lines=False,
                  caption="value with its own 95 % interval; reading: family-wise (Holm–Bonferroni over the claims)")
    for col in ("figure", "model", "measured", "value [95 % interval]", "reading"):
        table.add_column(col, overflow="fold", no_wrap=col == "value [95 % interval]")
    for c in summary["claims"]:
        interval = (f"{c['value']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]"
                    if math.isfinite(c["lo"]) and c["lo"] != c["hi"]
                    else f"{c['value']:+.3f}" if math.isfinite(c["value"]) else "—")
        table.add_row(c["figure"], c["model"], c["label"], interval, c["verdict"])
    console.print(table)
    n, fw = summary["counts"], summary.get("familywise", {})
    console.print(f"done in {wall:.1f} s: {n['agrees']} agree, {n['disagrees']} disagree, {n['other']} undecided or "
                  f"comparisons, family-wise ({fw.get('correction', '')}; one by one, {fw.get('row_agrees', 0)} agree "
                  f"and {fw.get('row_disagrees', 0)} disagree); page: {summary['html']}")


@app.command("hidden-state", cls=Command)
@handle_errors
def hidden_state_cmd(
    scale: Annotated[str, typer.Option("--scale", callback=one_of(*REPRODUCE_SCALES),
                                       help="full: the paper's protocol (P = 100 gates, 400 epochs, batch 1,000, five "
                                            "seeds; hours on a CPU, see --dry-run); reduced: every method, ε and "
                                            "statement with P = 20 and 40 epochs, three seeds, about an hour on 2 "
                                            "cores (the page says what it reduces).")] = "reduced",
    dataset: Annotated[str, option("dataset", callback=one_of("cifar10", "mnist", "fashion-mnist", "digits"),
                                   help="cifar10 or mnist (the paper's), fashion-mnist (torchvision layout under "
                                        "--data-dir, or the flat folder of Debian's dataset-fashion-mnist package), or "
                                        "the bundled digits for a run anywhere.")] = "cifar10",
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    experiments: Annotated[str | None, typer.Option("--experiments",
                                                    help="Comma-separated: table1 (Table 1), figure3 (Figure 3's "
                                                         "curves), audit (the released models attacked); default all. "
                                                         "The privacy accounting is always checked.")] = None,
    seeds: Annotated[str | None, option("seeds", help="Comma-separated seeds (restarts); default five at full scale, "
                                                      "three at reduced.")] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    cpus_per_job: CpusPerJobOpt = None,
    workdir: WorkdirOpt = ".",
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    # the command's help, one paragraph (hence concatenated, not wrapped)
    ("The hidden-state paper's results (Romijnders & Koskela, arXiv 2407.04884): Table 1 (NoisyCGD, DP-SGD and SSP "
     "at ε 1.33 and 4.76), Figure 3 (accuracy against the ε spent), its privacy accounting recomputed, and the first "
     "audit of a hidden-state guarantee, each statement checked with a 95 % interval. Writes "
     "reports/reproduce/hidden-state/; resumes.")
    t0 = time.perf_counter()
    from privaudit.api.reproduce import reproduce

    result = reproduce("hidden-state", scale=scale, dataset=dataset, data_dir=data_dir, download=download,
                       experiments=experiments, seeds=seeds, executor=executor, ray_address=ray_address,
                       cpus_per_job=cpus_per_job, workdir=workdir, log=_log, command=_command(), dry_run=dry_run)
    show_result(result, time.perf_counter() - t0, dry_run, as_json)


#: why ``reproduce masked-neurons`` takes no --device, --ray-address or --cpus-per-job
IN_PROCESS = ("reproduce masked-neurons runs in this process, on the CPU (Figure 2's networks are small: 100 rows "
              "of data), so it takes no --device, --ray-address or --cpus-per-job (mg-noise takes all three, "
              "hidden-state the last two)")


def _not_taken(name: str):
    """An option of the other reproductions that masked-neurons refuses with :data:`IN_PROCESS`
    (unlisted in its help, which says why)."""
    return typer.Option(name, hidden=True, callback=refused(IN_PROCESS), show_default=False)


NoDeviceOpt = Annotated[str | None, _not_taken("--device")]
NoRayAddressOpt = Annotated[str | None, _not_taken("--ray-address")]
NoCpusPerJobOpt = Annotated[str | None, _not_taken("--cpus-per-job")]


@app.command("masked-neurons", cls=Command)
@handle_errors
def masked_neurons_cmd(
    scale: Annotated[str, typer.Option("--scale", callback=one_of(*REPRODUCE_SCALES),
                                       help="full: the paper's Figure 2 (4,000 neurons, 200 rounds, two 10 x 10 "
                                            "grids); reduced: smaller grids and networks, a minute or "
                                            "two.")] = "reduced",
    data_dir: Annotated[str | None, typer.Option("--data-dir",
                                                 help="The folder holding UCI Communities and Crime (communities.data, "
                                                      "communities.names), a folder containing communities-and-crime/, "
                                                      "or an .npz of X, y (any regression set, e.g. the TMLR version's "
                                                      "ResNet-50 features).")] = None,
    experiments: Annotated[str | None, typer.Option("--experiments",
                                                    help="Comma-separated: trajectories (Figure 2a), bernoulli (2b), "
                                                         "categorical (2c); default all.")] = None,
    seeds: Annotated[str | None, option("seeds", help="Comma-separated seeds (mask draws and initialisation).")] = None,
    executor: ExecutorOpt = "local",
    device: NoDeviceOpt = None,
    ray_address: NoRayAddressOpt = None,
    cpus_per_job: NoCpusPerJobOpt = None,
    workdir: WorkdirOpt = ".",
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    # the command's help, one paragraph (hence concatenated, not wrapped)
    ("The masked-neurons paper's Figure 2 (Liao & Kyrillidis, arXiv 2112.02668): training error of a 4,000-neuron "
     "network under Bernoulli and categorical masks, each monotone statement checked with a trend test. Writes "
     "reports/reproduce/masked-neurons/; resumes. It runs in this process, on the CPU (the networks are small: 100 "
     "rows of data), so it takes no --device, --ray-address or --cpus-per-job.")
    t0 = time.perf_counter()
    from privaudit.api.reproduce import reproduce

    result = reproduce("masked-neurons", scale=scale, data_dir=data_dir, experiments=experiments, seeds=seeds,
                       executor=executor, workdir=workdir, log=_log, command=_command(), dry_run=dry_run)
    show_result(result, time.perf_counter() - t0, dry_run, as_json)
