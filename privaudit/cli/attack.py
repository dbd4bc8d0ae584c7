"""``privaudit attack``: attack trained targets (training shadows as needed)."""

from __future__ import annotations

from typing import Annotated

import typer

from privaudit.cli.callbacks import dataset_option, number
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import (
    DEFAULT_ATTACKS,
    AttacksOpt,
    DataDirOpt,
    DeviceOpt,
    DownloadOpt,
    DryRunOpt,
    JsonOpt,
    ShadowDatasetOpt,
    WorkdirOpt,
    option,
)
from privaudit.cli.output import emit_json, info_console, show_plan, warn
from privaudit.cli.progress import training_progress
from privaudit.core.config import DATASETS, MODELS
from privaudit.core.defaults import DEFAULT_POOL_SIZE, MAX_POOL_SIZE, MAX_SEED

TargetOpt = Annotated[str, typer.Option(
    "--target", help=f"An architecture ({', '.join(MODELS)}: every trained target of it) or one target's run name.")]
DatasetFilterOpt = Annotated[str | None, option(
    "dataset", callback=dataset_option,
    help=f"Attack only the targets trained on this dataset ({', '.join(DATASETS)}, npz:PATH or folder:PATH); "
         "default: every dataset.")]
PoolSizeFilterOpt = Annotated[int | None, option(
    "pool-size", callback=number(4, MAX_POOL_SIZE),
    help="Reference models of each target's pool for lira, rmia and the many-shadow attack (even, >= 4); default: the "
         f"largest pool the workspace holds for the target's recipe (an audit's), else {DEFAULT_POOL_SIZE}.")]
SeedFilterOpt = Annotated[int | None, option(
    "seed", callback=number(0, MAX_SEED),
    help="Attack only the targets trained with this root seed; default: every seed.")]
SeedsFilterOpt = Annotated[str | None, option(
    "seeds", help="Attack only the targets trained with these comma-separated root seeds (replaces --seed); "
                  "default: every seed.")]


@handle_errors
def attack_cmd(
    target: TargetOpt,
    attacks: AttacksOpt = DEFAULT_ATTACKS,
    pool_size: PoolSizeFilterOpt = None,
    shadow_dataset: ShadowDatasetOpt = None,
    dataset: DatasetFilterOpt = None,
    seed: SeedFilterOpt = None,
    seeds: SeedsFilterOpt = None,
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    report: Annotated[bool, typer.Option("--report/--no-report", help="Rebuild the reports afterwards.")] = True,
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Attack each target: shadow model, reference pool and canary model share its recipe and defence."""
    from privaudit.api.attack import AttackResults, attack
    from privaudit.core.hooks import AuditHooks

    with training_progress() as bars:
        result = attack(target, attacks=attacks, pool_size=pool_size, shadow_dataset=shadow_dataset, dataset=dataset,
                        seeds=seed if seeds is None else seeds, data_dir=data_dir, download=download,
                        device=device, workdir=workdir, report=report, dry_run=dry_run, log=warn,
                        hooks=AuditHooks(on_model_start=bars.start, on_epoch=bars.on_epoch, on_plan=bars.plan,
                                         on_job_done=bars.job_done, on_estimate=bars.estimate))
    if not isinstance(result, AttackResults):  # --dry-run: the plan
        show_plan(result, as_json)
        return
    if as_json:
        emit_json(result.to_dict())
        return
    from privaudit.cli.summary import summary_table

    console = info_console(as_json)
    console.print(summary_table(result.summary_rows()))
    if result.report:
        console.print(f"report: {result.report_path}  table: {result.csv_path}")
