"""``privaudit report``: rebuild the reports from the workspace."""

from __future__ import annotations

from pathlib import Path

from privaudit.cli.common import JsonOpt, WorkdirOpt, emit_json, err, handle_errors, info_console
from privaudit.report.build import build_reports
from privaudit.workspace import Workspace


@handle_errors
def report_cmd(workdir: WorkdirOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Rebuild reports/tradeoff.csv and reports/index.html from every attack in the workspace."""
    ws = Workspace(workdir).ensure_writable()
    rep = build_reports(ws)
    for name in rep.skipped:
        err.print(f"[yellow]skipped damaged attack folder {name}[/]", highlight=False)
    if as_json:
        emit_json({"csv": str(rep.csv), "html": str(rep.html), "rows": int(len(rep.table)), "skipped": rep.skipped,
                   "table": rep.table.to_dict(orient="records")})
        return
    info_console(as_json).print(f"{len(rep.table)} rows  report: {rep.html}  table: {rep.csv}")
