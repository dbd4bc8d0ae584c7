"""``privaudit attack``: attack trained targets (training shadows as needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List

import typer

from privaudit.attacks.run import DEFAULT_POOL_SIZE, attack_target
from privaudit.cli.common import (DataDirOpt, DeviceOpt, DownloadOpt, JsonOpt, PoolSizeOpt, WorkdirOpt, emit_json,
                                  handle_errors, info_console, parse_attacks, training_progress)
from privaudit.cli.summary import attack_summary_table
from privaudit.report.build import build_reports
from privaudit.runs import DataCache
from privaudit.training import resolve_device
from privaudit.workspace import Workspace


@handle_errors
def attack_cmd(
    target: Annotated[str, typer.Option("--target", help="An architecture (mlp, cnn, cnn-improved: every trained target of it) or one target's run name.")],
    attack: Annotated[List[str], typer.Option("--attack", help="Attacks to run (repeat or comma-separate): shadow (the paper's; plus many shadows with a pool), loss (loss and confidence baselines), lira, rmia, one-run (canary audit), all.")] = ["shadow", "loss"],
    pool_size: PoolSizeOpt = DEFAULT_POOL_SIZE,
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = Path("."),
    report: Annotated[bool, typer.Option("--report/--no-report", help="Rebuild the reports afterwards.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Attack each target: shadow model, reference pool and canary model share its recipe and defence."""
    plan = parse_attacks(attack, pool_size)
    ws = Workspace(workdir)
    names = ws.resolve_targets(target)
    ws.ensure_writable()
    dev = resolve_device(device)
    data = DataCache(data_dir, download)
    results = []
    with training_progress() as bars:
        for name in names:
            results.append(attack_target(ws, name, data, dev, plan, on_start=bars.start, on_epoch=bars.on_epoch))
    rep = build_reports(ws) if report else None
    if as_json:
        emit_json({"attacks": [{"target": r.target, "shadow": r.shadow, "path": str(r.path), "reused": r.reused,
                                "metrics": r.metrics, **r.extras} for r in results],
                   "report": {"csv": str(rep.csv), "html": str(rep.html)} if rep else None})
        return
    console = info_console(as_json)
    console.print(attack_summary_table(ws, [(r.target, r.metrics, r.extras) for r in results]))
    if rep:
        console.print(f"report: {rep.html}  table: {rep.csv}")
