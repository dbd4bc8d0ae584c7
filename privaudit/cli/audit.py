"""``privaudit audit``: the main job in one command."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from privaudit.cli.common import (DEFAULT_ATTACKS, AttacksOpt, DataDirOpt, DeviceOpt, DownloadOpt, JsonOpt, PoolSizeOpt,
                                  SeedOpt, SeedsOpt, ShadowDatasetOpt, WorkdirOpt, dataset_config, emit_json, err,
                                  handle_errors, importing, info_console, number, one_of, parse_attacks, parse_grid,
                                  parse_model_args, parse_seeds, training_progress)
from privaudit.cli.options import (AugmentOpt, BatchSizeOpt, DatasetOpt, DeltaOpt, EpochsOpt, LrOpt, MaxGradNormOpt,
                                   ModelArgOpt, ModelOpt, PartSizeOpt, PrecisionOpt, WeightDecayOpt, WidthOpt)
from privaudit.defaults import CIFAR10_KAPPAS, DEFAULT_KAPPAS, DEFAULT_POOL_SIZE, DEFAULT_SIGMAS
from privaudit.errors import ConfigError


def _grid_text(values) -> str:
    return ",".join(f"{v:g}" for v in values)


@handle_errors
def audit_cmd(
    model: ModelOpt = "mlp",
    model_arg: ModelArgOpt = None,
    dataset: DatasetOpt = "cifar10",
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    kappas: Annotated[Optional[str], typer.Option("--kappas", help=f"Comma-separated MG-noise kappas (>= 0) to audit besides the undefended baseline ('none' for no MG rows); default {_grid_text(CIFAR10_KAPPAS)} on cifar10 (down to the lowest DP-SGD accuracy), {_grid_text(DEFAULT_KAPPAS)} on digits, none for convex-relu.")] = None,
    sigmas: Annotated[Optional[str], typer.Option("--sigmas", help=f"Comma-separated noise multipliers (> 0) of DP-SGD (NoisyCGD for convex-relu); 'none' for no DP rows; default {_grid_text(DEFAULT_SIGMAS)}.")] = None,
    target_epsilons: Annotated[Optional[str], typer.Option("--target-epsilons", help="Comma-separated target epsilons (> 0) for the DP rows instead of --sigmas (sigma calibrated per value).")] = None,
    attacks: AttacksOpt = DEFAULT_ATTACKS,
    pool_size: PoolSizeOpt = DEFAULT_POOL_SIZE,
    shadow_dataset: ShadowDatasetOpt = None,
    max_grad_norm: MaxGradNormOpt = 1.0,
    delta: DeltaOpt = 1e-5,
    epochs: EpochsOpt = None,
    batch_size: BatchSizeOpt = None,
    lr: LrOpt = None,
    weight_decay: WeightDecayOpt = None,
    precision: PrecisionOpt = "fp32",
    augment: AugmentOpt = "none",
    width: WidthOpt = None,
    part_size: PartSizeOpt = None,
    seed: SeedOpt = 0,
    seeds: SeedsOpt = None,
    match_accuracy: Annotated[bool, typer.Option("--match-accuracy", help="For each DP-SGD setting, search the kappa at which MG noise reaches the same test accuracy (bracketing search on the first seed, each step a cached training run) and audit it besides the grid.")] = False,
    match_tolerance: Annotated[float, typer.Option("--match-tolerance", callback=number(0, 1, low_open=True), help="How close (absolute test accuracy) --match-accuracy's kappa must come to the DP-SGD target's accuracy.")] = 0.01,
    device: DeviceOpt = "auto",
    executor: Annotated[str, typer.Option("--executor", callback=one_of("local", "ray"), help="Where the jobs run: local (this process) or ray (Ray tasks; needs the ray extra: pip install 'privaudit\\[ray]').")] = "local",
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="Ray cluster to join: auto, or ray://host:port; default: start (or join via RAY_ADDRESS) a local instance.")] = None,
    cpus_per_job: Annotated[Optional[int], typer.Option("--cpus-per-job", callback=number(1, 4096), help="CPUs (torch threads) of each job; default: this machine's torch thread count. The same value gives the same numbers on both executors.")] = None,
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Train the baseline, every MG-noise and DP-SGD target and their shadows, attack them, write the report."""
    t0 = time.perf_counter()
    if sigmas is not None and target_epsilons is not None:
        raise ConfigError("give --sigmas or --target-epsilons, not both (both set the DP rows)")
    if kappas is None:
        kappas = "none" if model == "convex-relu" else _grid_text(CIFAR10_KAPPAS if dataset == "cifar10"
                                                                  else DEFAULT_KAPPAS)
    k_grid = parse_grid(kappas, "--kappas", low=0.0, high=100.0)
    eps_grid = parse_grid(target_epsilons or "", "--target-epsilons", low=0.0, low_open=True, high=1e4)
    s_grid = [] if target_epsilons is not None else parse_grid(
        _grid_text(DEFAULT_SIGMAS) if sigmas is None else sigmas, "--sigmas", low=0.0, low_open=True, high=1e6)
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    seed_list = parse_seeds(seeds, seed)
    if match_accuracy and not (s_grid or eps_grid):
        raise ConfigError("--match-accuracy matches MG noise to the DP-SGD rows: give --sigmas or --target-epsilons")
    if match_accuracy and model == "convex-relu":
        raise ConfigError("--match-accuracy searches MG noise's kappa, which convex-relu does not train with")

    with importing():
        from privaudit.audit import AuditHooks, audit_plan, match_accuracy as match_kappas, replicate, run_audit
        from privaudit.config import make_config

    dataset_kwargs, data = dataset_config(dataset, data_dir, download)
    bases = [make_config(model=model, dataset=dataset, width=width, part_size=part_size,
                         max_grad_norm=max_grad_norm, delta=delta, epochs=epochs, batch_size=batch_size,
                         lr=lr, weight_decay=weight_decay, precision=precision, augment=augment, seed=s,
                         model_args=parse_model_args(model_arg), **dataset_kwargs)
             for s in seed_list]
    plans = [audit_plan(b, k_grid, s_grid, eps_grid) for b in bases]
    attack_plan = parse_attacks(attacks, pool_size, shadow_dataset)

    from privaudit.cli.summary import attack_summary_table, verdict_table
    from privaudit.timing import CLOCK
    with importing():
        from privaudit.executor import make_executor
        from privaudit.runs import DataCache
        from privaudit.training import resolve_device
        from privaudit.workspace import Workspace

    runner = make_executor(executor, address=ray_address, cpus_per_job=cpus_per_job)
    dev = resolve_device(device)
    ws = Workspace(workdir).ensure_writable()
    data = data or DataCache(data_dir, download)
    with training_progress() as bars:
        matches = []
        if match_accuracy:
            err.print(f"match-accuracy: searching kappa for {len(s_grid or eps_grid)} DP-SGD settings (seed "
                      f"{seed_list[0]}, tolerance {match_tolerance:g})", highlight=False, markup=False)
            matches = match_kappas(plans[0], ws, data, dev, tolerance=match_tolerance, on_start=bars.start,
                                   on_epoch=bars.on_epoch)
            extra = [m.kappa for _, m in matches if m.kappa > 0]
            plans = [audit_plan(b, k_grid + extra, s_grid, eps_grid) for b in bases]
            for dp_cfg, m in matches:
                err.print(f"match-accuracy: {dp_cfg.defence.label} test accuracy {m.goal:.4f} -> kappa {m.kappa:g} "
                          f"({m.accuracy:.4f}, {'within' if m.within else 'NOT within'} {m.tolerance:g}, "
                          f"{len(m.steps)} search trainings)", highlight=False, markup=False)
        plan = replicate(plans)
        err.print(f"audit: {len(plan)} targets ({model} on {dataset}, {len(seed_list)} seed"
                  f"{'s' if len(seed_list) > 1 else ''}, device {dev}, executor {runner.name}) in {ws.root}",
                  highlight=False, markup=False)
        graph: list = []

        def on_plan(jobs) -> None:
            graph.extend(jobs)
            bars.plan(jobs)

        hooks = AuditHooks(on_model_start=bars.start, on_epoch=bars.on_epoch, on_plan=on_plan,
                           on_job_done=bars.job_done)
        result = run_audit(plan, ws, data, dev, hooks, attack_plan, executor=runner)
    wall = time.perf_counter() - t0
    rep = result.report
    if as_json:
        emit_json({
            "wall_seconds": wall,
            "executor": runner.name,
            "jobs": len(graph),
            "phase_seconds": CLOCK.snapshot(),
            "seeds": seed_list,
            "match_accuracy": [{"dp_run": c.run_name, **m.to_dict()} for c, m in matches],
            "targets": [{"run": t.name, "path": str(t.path), "reused": t.reused,
                         "metrics": {k: v for k, v in t.metrics.items() if k != "loss_history"}} for t in result.targets],
            "attacks": [{"target": a.target, "shadow": a.shadow, "path": str(a.path), "metrics": attack_plan.asked(a.metrics),
                         **a.extras} for a in result.attacks],
            "report": {"csv": str(rep.csv), "html": str(rep.html)},
            "summary": rep.summary.to_json() if rep.summary is not None else None,
        })
        return
    console = info_console(as_json)
    console.print(attack_summary_table(ws, [(a.target, attack_plan.asked(a.metrics), a.extras) for a in result.attacks],
                                       title=f"privaudit audit: {model} on {dataset}"))
    verdicts = verdict_table(rep.summary)
    if verdicts is not None:
        console.print(verdicts)
    shares = "  ".join(f"{k} {v:.1f} s" for k, v in CLOCK.snapshot().items() if v >= 0.05)
    console.print(f"done in {wall:.1f} s ({shares})  report: {rep.html}  table: {rep.csv}")
