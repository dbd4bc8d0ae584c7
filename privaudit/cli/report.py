"""``privaudit report``: rebuild the reports from the workspace."""

from __future__ import annotations

from privaudit.cli.failures import handle_errors
from privaudit.cli.options import JsonOpt, WorkdirOpt
from privaudit.cli.output import emit_json, info_console, warn


@handle_errors
def report_cmd(workdir: WorkdirOpt = ".", as_json: JsonOpt = False) -> None:
    """Rebuild reports/tradeoff.csv and reports/index.html from every attack in the workspace."""
    from privaudit.api.report import report

    result = report(workdir=workdir, log=warn)  # a mistyped --workdir is an error, not an empty report
    if as_json:
        emit_json(result.to_dict())
        return
    from privaudit.cli.summary import strongest_claim_lines, verdict_table

    console = info_console(as_json)
    for line in strongest_claim_lines(result.summary):
        console.print(line, markup=False, highlight=False)
    verdicts = verdict_table(result.summary)
    if verdicts is not None:
        console.print(verdicts)
    console.print(f"{len(result.table)} rows  report: {result.report_path}  table: {result.csv_path}")
