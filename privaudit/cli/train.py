"""``privaudit train``: one target model with a defence."""

from __future__ import annotations

from typing import Annotated

import typer

from privaudit.api.recipe import Recipe
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import (
    DataDirOpt,
    DefenceOpt,
    DeviceOpt,
    DownloadOpt,
    DryRunOpt,
    JsonOpt,
    KappaOpt,
    KnobOpt,
    SeedOpt,
    SeedsOpt,
    SigmaOpt,
    TargetEpsilonOpt,
    WorkdirOpt,
    recipe_options,
)
from privaudit.cli.output import emit_json, err, fmt, info_console, show_plan
from privaudit.cli.progress import training_progress


@handle_errors
@recipe_options
def train_cmd(
    recipe: Recipe,
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    kappa: KappaOpt = 0.0,
    dp: Annotated[bool, typer.Option("--dp", help="Train with differential privacy: DP-SGD (Poisson sampling, "
                                                  "per-sample clipping), or NoisyCGD for convex-relu.")] = False,
    defence: DefenceOpt = None,
    knob: KnobOpt = None,
    noise_multiplier: SigmaOpt = None,
    target_epsilon: TargetEpsilonOpt = None,
    seed: SeedOpt = 0,
    seeds: SeedsOpt = None,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train one target model (one per seed of --seeds) and save it under WORKDIR/models (reused when it exists)."""
    from privaudit.api.train import TrainedModels, train

    with training_progress() as bars:
        result = train(recipe, data_dir=data_dir, download=download, kappa=kappa, dp=dp, defence=defence, knob=knob,
                       noise_multiplier=noise_multiplier, target_epsilon=target_epsilon, seed=seed, seeds=seeds,
                       device=device, workdir=workdir, on_start=bars.start, on_epoch=bars.on_epoch, dry_run=dry_run,
                       on_estimate=bars.estimate,
                       log=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True))
    if not isinstance(result, TrainedModels):  # --dry-run: the plan
        show_plan(result, as_json)
        return
    if as_json:
        emit_json(result.to_dict())
        return
    cfgs, done = result.configs, result.runs
    from rich.table import Table

    console = info_console(as_json)
    table = Table(show_header=True)
    table.add_column("metric")
    for c in cfgs:
        table.add_column("value" if seeds is None else f"seed {c.seed}", justify="right")
    for key in ("train_accuracy", "test_accuracy", "generalisation_gap", "noise_multiplier", "epsilon", "delta",
                "accountant", "gdp_mu", "train_seconds"):
        if key in done[0].metrics:
            table.add_row(key, *(fmt(run.metrics.get(key), 4) for run in done))
    console.print(table)
    for note in done[0].metrics.get("model_changes", []):  # what DP-SGD changed in the user's model
        console.print(note, soft_wrap=True, markup=False)
    for run in done:
        console.print(f"{'reused' if run.reused else 'saved'}: {run.path}", soft_wrap=True)
