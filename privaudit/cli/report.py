"""``privaudit report``: rebuild the reports from the workspace."""

from __future__ import annotations

from privaudit.cli.common import (JsonOpt, WorkdirOpt, emit_json, handle_errors, importing, info_console,
                                  refresh_reports, require_workspace)


@handle_errors
def report_cmd(workdir: WorkdirOpt = ".", as_json: JsonOpt = False) -> None:
    """Rebuild reports/tradeoff.csv and reports/index.html from every attack in the workspace."""
    root = require_workspace(workdir)  # a mistyped --workdir is an error, not an empty report
    with importing():
        from privaudit.pipeline.workspace import Workspace

    rep = refresh_reports(Workspace(root).ensure_writable())  # warns per damaged folder
    if as_json:
        emit_json({"csv": str(rep.csv), "html": str(rep.html), "rows": int(len(rep.table)), "skipped": rep.skipped,
                   "table": rep.table.to_dict(orient="records"),
                   "summary": rep.summary.to_json() if rep.summary is not None else None})
        return
    from privaudit.cli.summary import verdict_table

    console = info_console(as_json)
    verdicts = verdict_table(rep.summary)
    if verdicts is not None:
        console.print(verdicts)
    console.print(f"{len(rep.table)} rows  report: {rep.html}  table: {rep.csv}")
