"""The self-contained HTML report page.

:func:`render_report` turns the trade-off table (one row per target, defence setting and
attack), the attacks' ROC curves and the per-target extras into one HTML5 document that opens
from disk with no network. Every derived number (per-setting means and intervals, the
strongest attack, the iso-accuracy comparisons and verdicts) comes from the summary layer,
:mod:`privaudit.reporting.summary`, which the terminal and ``--json`` read too; the page's
modules only pick, format and lay out:

* :mod:`~privaudit.reporting.page_numbers`: how a value is written (precision, the dash);
* :mod:`~privaudit.reporting.page_data`: the table typed and ordered, the extras, the attack order;
* :mod:`~privaudit.reporting.page_first_screen`: the verdicts and one row per setting;
* :mod:`~privaudit.reporting.page_findings`: the sentences of the key findings and the groups;
* :mod:`~privaudit.reporting.page_at_accuracy`: which defence at each target accuracy, and the
  Pareto plot of every defence setting;
* :mod:`~privaudit.reporting.page_exposure`: who leaks, each defence's most exposed training
  images (PNG grids) and the overlap of their most exposed members;
* :mod:`~privaudit.reporting.page_tables`: the long trade-off table, the NoisyCGD comparison;
* :mod:`~privaudit.reporting.page_groups` and :mod:`~privaudit.reporting.page_empirical`: each
  (model, dataset) section and its strongest-attacks part;
* this module: the page around them.

The markup is Jinja2 templates with autoescaping (``templates/``); the stylesheet
``templates/report.css`` is inlined; plots are inline SVG drawn by matplotlib
(:mod:`privaudit.reporting.plots`, written short by :mod:`privaudit.reporting.svg`), the "Who
leaks" image grids small PNGs in ``data:`` URIs. There is no JavaScript, no font and no link
to anything outside the page (only ``#`` anchors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from privaudit.core.formatting import slug
from privaudit.reporting.page_at_accuracy import at_accuracy_section
from privaudit.reporting.page_data import name_dp, prepare, with_one_run
from privaudit.reporting.page_exposure import exposure_groups, exposure_section
from privaudit.reporting.page_findings import group_view, key_findings
from privaudit.reporting.page_first_screen import first_screen
from privaudit.reporting.page_groups import group_section
from privaudit.reporting.page_tables import defences_section, tradeoff_table
from privaudit.reporting.summary import Summary, setting_label, summarise
from privaudit.reporting.svg import share_styles
from privaudit.reporting.table import COLUMNS

__all__ = ["render_report", "TABLE_COLUMNS", "setting_label"]

#: The trade-off table's columns, in order (the CSV's, privaudit.reporting.build).
TABLE_COLUMNS = COLUMNS


def render_report(table: pd.DataFrame, rocs: Mapping[str, Mapping[str, Any]] | None = None, *,
                  title: str = "privaudit report", generated: str = "",
                  extras: Mapping[str, Mapping] | None = None, papers_html: str = "",
                  summary: Summary | None = None, figures: list | None = None,
                  exposed: list | None = None) -> str:
    """The complete, self-contained HTML5 report page as a string.

    ``table``: the trade-off table (columns in :data:`TABLE_COLUMNS`; missing columns are
    treated as all-NaN). ``rocs``: ``{target_run: {attack: (fpr, tpr)}}``; entries for
    runs not in the table are ignored. ``generated``: a timestamp text shown under the
    title. ``extras``: ``{target_run: {"loo": ..., "exposure": ..., "one_run": ...}}`` as
    written next to each attack (see :func:`privaudit.reporting.build.read_extras`); optional,
    any part may be missing. A (model, dataset) group with pool attacks, empirical ε or
    one-run values gets a "Strongest attacks and empirical ε" part. An empty table gives a
    page saying nothing has been audited yet. ``papers_html``: the "Papers' figures" section
    (:func:`privaudit.reporting.papers.papers_section`), placed before "How to read this".
    ``exposed``: the "Who leaks" groups with their grids
    (:func:`privaudit.reporting.page_exposure.exposure_groups`); without them they are made
    from ``extras`` alone, with no pictures.
    """
    rocs = rocs if isinstance(rocs, Mapping) else {}
    extras = extras if isinstance(extras, Mapping) else {}
    summary = summary if summary is not None else summarise(with_one_run(table, extras))
    df = prepare(table)
    groups = [(str(m), str(d), g) for (m, d), g in df.groupby(["model", "dataset"], sort=True)]

    from markupsafe import Markup

    from privaudit.reporting.templates import render, stylesheet

    defences = defences_section(df) if groups else ""
    at_accuracy = at_accuracy_section(summary) if groups else ""
    who = (exposure_section(exposed if exposed is not None else exposure_groups(summary, table, extras))
           if groups else "")
    toc, sections = [], []
    if groups:
        toc = [*([("at-accuracy", "Which defence at your accuracy")] if at_accuracy else []),
               *([("exposed", "Who leaks")] if who else []),
               ("table", "Trade-off table"), *((slug("g", m, d), f"{m} · {d}") for m, d, _ in groups)]
        toc += [("defences", "NoisyCGD vs DP-SGD")] if defences else []
        toc += [("papers", "Papers' figures")] if papers_html else []
        toc += [("howto", "How to read this")]
        views = [group_view(m, d, g, summary, extras) for m, d, g in groups]
        sections = [first_screen(summary, figures or []), key_findings(views), at_accuracy, who,
                    tradeoff_table(groups, n_rows=len(df), n_targets=df["_run"].nunique()),
                    *(name_dp(group_section(v, rocs, extras), v["g"]) for v in views),
                    defences]
    sections, figure_css = share_styles([x for x in sections if x])
    return render("page.html.j2", title=title, generated=generated, toc=toc, css=Markup(stylesheet() + figure_css),
                  sections=[Markup(x) for x in sections], papers=Markup(papers_html)) + "\n"
