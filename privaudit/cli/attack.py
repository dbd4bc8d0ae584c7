"""``privaudit attack``: attack trained targets (training shadows as needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privaudit.attacks.run import attack_target
from privaudit.cli.common import (DataDirOpt, DeviceOpt, DownloadOpt, JsonOpt, WorkdirOpt, emit_json,
                                  handle_errors, info_console, training_progress)
from privaudit.cli.summary import attack_summary_table
from privaudit.report.build import build_reports
from privaudit.runs import DataCache
from privaudit.training import resolve_device
from privaudit.workspace import Workspace


@handle_errors
def attack_cmd(
    target: Annotated[str, typer.Option("--target", help="An architecture (mlp, cnn, cnn-improved: every trained target of it) or one target's run name.")],
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = Path("."),
    report: Annotated[bool, typer.Option("--report/--no-report", help="Rebuild the reports afterwards.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Attack each target with its shadow model (same recipe and defence) and the baselines."""
    ws = Workspace(workdir)
    names = ws.resolve_targets(target)
    ws.ensure_writable()
    dev = resolve_device(device)
    data = DataCache(data_dir, download)
    results = []
    with training_progress() as bars:
        for name in names:
            results.append(attack_target(ws, name, data, dev, on_start=bars.start, on_epoch=bars.on_epoch))
    rep = build_reports(ws) if report else None
    if as_json:
        emit_json({"attacks": [{"target": r.target, "shadow": r.shadow, "path": str(r.path), "reused": r.reused,
                                "metrics": r.metrics} for r in results],
                   "report": {"csv": str(rep.csv), "html": str(rep.html)} if rep else None})
        return
    console = info_console(as_json)
    console.print(attack_summary_table(ws, [(r.target, r.metrics) for r in results]))
    if rep:
        console.print(f"report: {rep.html}  table: {rep.csv}")
