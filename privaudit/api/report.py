"""``privaudit.report()``: the trade-off table and the report rebuilt from every attack in a
workspace; ``privaudit report`` prints what it returns."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.results import ShortRepr
from privaudit.core.timing import importing

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.pipeline.workspace import Workspace
    from privaudit.reporting.build import ReportResult


@dataclass(repr=False)
class WorkspaceReport(ShortRepr):
    """The workspace's reports as rebuilt: the trade-off table, the verdicts, the paths of
    ``reports/tradeoff.csv`` and ``reports/index.html``, and the attack folders skipped as
    damaged (with a line each saying why)."""

    table: pd.DataFrame            #: the trade-off table: a row per target and attack
    verdicts: pd.DataFrame         #: "which defence leaks less?" at equal accuracy, with intervals
    report_path: Path                #: the self-contained HTML report
    csv_path: Path                   #: the trade-off table as CSV
    skipped: list[str] = field(default_factory=list)    #: attack folders left out (damaged)
    warnings: list[str] = field(default_factory=list)   #: one line per skipped folder: which one, why
    summary: Any = field(repr=False, default=None)      #: privaudit.reporting.summary.Summary

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit report --json`` prints."""
        return {"csv": str(self.csv_path), "html": str(self.report_path), "rows": int(len(self.table)),
                "skipped": self.skipped, "table": self.table.to_dict(orient="records"),
                "summary": self.summary.to_dict() if self.summary is not None else None}

    def _repr_html_(self) -> str:
        skipped = (f"<p>Skipped (damaged): {html.escape(', '.join(self.skipped))}</p>" if self.skipped else "")
        return (f"<div><h3>privaudit report: {len(self.table)} rows, {len(self.verdicts)} verdicts</h3>{skipped}"
                f"<p>Report: <a href=\"{html.escape(self.report_path.resolve().as_uri())}\">"
                f"{html.escape(str(self.report_path))}</a> · table: {html.escape(str(self.csv_path))}</p></div>")

    @classmethod
    def of(cls, rep: ReportResult) -> WorkspaceReport:
        """From :class:`privaudit.reporting.build.ReportResult`."""
        import pandas as pd

        verdicts = rep.summary.verdicts if rep.summary is not None else pd.DataFrame()
        return cls(table=rep.table, verdicts=verdicts, report_path=Path(rep.html), csv_path=Path(rep.csv),
                   skipped=list(rep.skipped), warnings=list(rep.warnings), summary=rep.summary)


def rebuild(ws: Workspace, log: Callable[[str], None] | None = None) -> WorkspaceReport:
    """Rebuild ``reports/`` of the :class:`~privaudit.pipeline.workspace.Workspace` ``ws``
    after a command wrote results it feeds, so the pages never lag behind the workspace;
    ``log`` receives one line per damaged folder skipped."""
    with importing():
        from privaudit.reporting.build import build_reports

    rep = build_reports(ws)
    if log:
        for line in rep.warnings:
            log(line)
    return WorkspaceReport.of(rep)


@params.options_named
def report(*, workdir: str | Path = ".", log: Callable[[str], None] | None = None) -> WorkspaceReport:
    """Rebuild ``reports/tradeoff.csv`` and ``reports/index.html`` from every attack in the
    workspace ``workdir`` (which must exist and hold ``models/`` or ``attacks/``: a mistyped
    folder is an error, not an empty report). ``log`` receives one line per damaged attack
    folder left out; a missing workspace raises :class:`privaudit.errors.ArtifactError`."""
    root = params.require_workspace(workdir)
    with importing():
        from privaudit.pipeline.workspace import Workspace

    ws = Workspace(root).ensure_writable(log=log)
    ws.refuse_legacy_results()
    return rebuild(ws, log)
