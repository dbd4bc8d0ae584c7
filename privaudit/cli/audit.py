"""``privaudit audit``: the main job in one command."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from privaudit.api.recipe import Recipe
from privaudit.cli.callbacks import number
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import (
    DEFAULT_ATTACKS,
    AttacksOpt,
    CpusPerJobOpt,
    DataDirOpt,
    DefencesOpt,
    DeviceOpt,
    DownloadOpt,
    DryRunOpt,
    ExecutorOpt,
    JsonOpt,
    KappasOpt,
    KnobsOpt,
    PoolSizeOpt,
    RayAddressOpt,
    SeedOpt,
    SeedsOpt,
    ShadowDatasetOpt,
    SigmasOpt,
    TargetEpsilonsOpt,
    WorkdirOpt,
    recipe_options,
)
from privaudit.cli.output import emit_json, err, info_console, show_plan
from privaudit.cli.progress import training_progress
from privaudit.core.defaults import DEFAULT_POOL_SIZE


@handle_errors
@recipe_options
def audit_cmd(
    recipe: Recipe,
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    kappas: KappasOpt = None,
    sigmas: SigmasOpt = None,
    target_epsilons: TargetEpsilonsOpt = None,
    defences: DefencesOpt = None,
    knobs: KnobsOpt = None,
    attacks: AttacksOpt = DEFAULT_ATTACKS,
    pool_size: PoolSizeOpt = DEFAULT_POOL_SIZE,
    shadow_dataset: ShadowDatasetOpt = None,
    seed: SeedOpt = 0,
    seeds: SeedsOpt = None,
    match_accuracy: Annotated[bool, typer.Option("--match-accuracy",
                                                 help="For each DP-SGD setting, search the kappa at which MG noise "
                                                      "reaches the same test accuracy (bracketing search on the first "
                                                      "seed, each step a cached training run) and audit it besides the "
                                                      "grid.")] = False,
    target_accuracies: Annotated[str | None, typer.Option("--target-accuracies",
                                                          help="Comma-separated test accuracies (e.g. 0.55,0.6): "
                                                               "search each defence's knob (--defences; default "
                                                               "mg,dpsgd) to each, on the first seed (at most 8 "
                                                               "trainings per defence and target, within "
                                                               "--match-tolerance), audit the settings found on every "
                                                               "seed, and say which defence leaks least at each "
                                                               "accuracy, or that a defence cannot reach it.")] = None,
    match_tolerance: Annotated[float, typer.Option("--match-tolerance", callback=number(0, 1, low_open=True),
                                                   help="How close (absolute test accuracy) --match-accuracy's kappa "
                                                        "must come to the DP-SGD target's accuracy.")] = 0.01,
    device: DeviceOpt = "auto",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    cpus_per_job: CpusPerJobOpt = None,
    workdir: WorkdirOpt = ".",
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train the baseline, every MG-noise and DP-SGD target and their shadows, attack them, write the report."""
    t0 = time.perf_counter()
    from privaudit.api.audit import AuditReport, audit
    from privaudit.core.hooks import AuditHooks

    with training_progress() as bars:
        result = audit(recipe, data_dir=data_dir, download=download, kappas=kappas, sigmas=sigmas,
                       target_epsilons=target_epsilons, defences=defences, knobs=knobs, attacks=attacks,
                       pool_size=pool_size, shadow_dataset=shadow_dataset, seed=seed, seeds=seeds,
                       match_accuracy=match_accuracy, match_tolerance=match_tolerance,
                       target_accuracies=target_accuracies, device=device, executor=executor, ray_address=ray_address,
                       cpus_per_job=cpus_per_job,
                       workdir=workdir, dry_run=dry_run,
                       hooks=AuditHooks(on_model_start=bars.start, on_epoch=bars.on_epoch, on_plan=bars.plan,
                                        on_job_done=bars.job_done, on_estimate=bars.estimate),
                       log=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True))
    wall = time.perf_counter() - t0
    if not isinstance(result, AuditReport):  # --dry-run: the plan
        show_plan(result, as_json)
        return
    if as_json:
        emit_json({**result.to_dict(), "wall_seconds": wall})
        return
    from privaudit.cli.summary import at_accuracy_table, strongest_claim_lines, summary_table, verdict_table
    from privaudit.core.timing import CLOCK

    console = info_console(as_json)
    console.print(summary_table(result.summary_rows(), title=f"privaudit audit: {recipe.model} on {recipe.dataset}",
                                summary=result.summary))
    for line in strongest_claim_lines(result.summary):
        console.print(line, markup=False, highlight=False)
    verdicts = verdict_table(result.summary)
    if verdicts is not None:
        console.print(verdicts)
    choice = at_accuracy_table(result.summary)
    if choice is not None:
        console.print(choice)
    shares = "  ".join(f"{k} {v:.1f} s" for k, v in CLOCK.snapshot().items() if v >= 0.05)
    console.print(f"done in {wall:.1f} s ({shares})  report: {result.report_path}  table: {result.csv_path}")
