"""``privaudit attack``: attack trained targets (training shadows as needed)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from privaudit.cli.common import (DEFAULT_ATTACKS, AttacksOpt, DataDirOpt, DeviceOpt, DownloadOpt, JsonOpt, PoolSizeOpt,
                                  ShadowDatasetOpt, WorkdirOpt, dataset_option, emit_json, handle_errors, importing,
                                  info_console, parse_attacks, parse_seeds, refresh_reports, require_workspace,
                                  training_progress)
from privaudit.core.config import DATASETS, MODELS, is_custom_model
from privaudit.core.defaults import DEFAULT_POOL_SIZE

TargetOpt = Annotated[str, typer.Option(
    "--target", help=f"An architecture ({', '.join(MODELS)}: every trained target of it) or one target's run name.")]
DatasetFilterOpt = Annotated[Optional[str], typer.Option(
    "--dataset", callback=dataset_option,
    help=f"Attack only the targets trained on this dataset ({', '.join(DATASETS)}, npz:PATH or folder:PATH); "
         "default: every dataset.")]


@handle_errors
def attack_cmd(
    target: TargetOpt,
    attacks: AttacksOpt = DEFAULT_ATTACKS,
    pool_size: PoolSizeOpt = DEFAULT_POOL_SIZE,
    shadow_dataset: ShadowDatasetOpt = None,
    dataset: DatasetFilterOpt = None,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help="Attack only the targets trained with these comma-separated root seeds; default: every seed.")] = None,
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    report: Annotated[bool, typer.Option("--report/--no-report", help="Rebuild the reports afterwards.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Attack each target: shadow model, reference pool and canary model share its recipe and defence."""
    root = require_workspace(workdir, with_content=False)  # no models: resolve_targets says so
    if target not in MODELS and not is_custom_model(target) and not (root / "models" / target / "config.json").is_file():
        from privaudit.errors import ArtifactError  # said before torch loads, as Workspace.resolve_targets says it

        raise ArtifactError(f"no target named {target!r} in {root / 'models'} (give a run name or one of "
                            f"{', '.join(MODELS)})")
    plan = parse_attacks(attacks, pool_size, shadow_dataset)  # loads the attack library (torch)

    with importing():
        from privaudit.pipeline.attacking import attack_target
    from privaudit.cli.summary import attack_summary_table
    with importing():
        from privaudit.pipeline.runs import DataCache
        from privaudit.training import resolve_device
        from privaudit.pipeline.workspace import Workspace

    ws = Workspace(root)
    names = ws.resolve_targets(target, dataset=dataset, seeds=None if seeds is None else parse_seeds(seeds, 0))
    ws.ensure_writable()
    dev = resolve_device(device)
    data = DataCache(data_dir, download)
    results = []
    with training_progress() as bars:
        for name in names:
            results.append(attack_target(ws, name, data, dev, plan, on_start=bars.start, on_epoch=bars.on_epoch))
    rep = refresh_reports(ws) if report else None
    if as_json:
        emit_json({"attacks": [{"target": r.target, "shadow": r.shadow, "path": str(r.path), "reused": r.reused,
                                "metrics": plan.asked(r.metrics), **r.extras} for r in results],
                   "report": {"csv": str(rep.csv), "html": str(rep.html)} if rep else None})
        return
    console = info_console(as_json)
    console.print(attack_summary_table(ws, [(r.target, plan.asked(r.metrics), r.extras) for r in results]))
    if rep:
        console.print(f"report: {rep.html}  table: {rep.csv}")
