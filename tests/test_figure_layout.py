"""The report's figures keep their text readable: every legend, title, tick and axis label
inside the figure (a legend wider than its figure is cut at both sides), no point label on
another one, and the exposure grid's scores at the page's text size.

Measured at the matplotlib level, on the figures as the report draws them: each figure is
caught on its way to its SVG (``plots._svg``, ``figures._render``) and measured with the
figure's own renderer. The page itself is checked in a browser in test_report_browser.py.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from matplotlib.text import Annotation
from test_report_html import make_extras, make_pool_rocs, make_pool_table
from test_summary import table

from privaudit.reporting import figures, plots
from privaudit.reporting.html import render_report
from privaudit.reporting.page_exposure import grid_figure
from privaudit.reporting.plots import line_plot, renderer_of
from privaudit.reporting.summary import summarise

#: a user's digits audit (issue 42): κ=0.25 and κ=0.5 almost on one point, σ=1 and σ=1.1 close
CROWDED = [("base", 0.0, math.nan, 0.882), ("k0.25", 0.25, math.nan, 0.882), ("k0.5", 0.5, math.nan, 0.878),
           ("k1", 1.0, math.nan, 0.864), ("s1", 0.0, 1.0, 0.472), ("s1.1", 0.0, 1.1, 0.437)]
#: the legend of the baseline's ROC figure of every attack (a digits audit with --attacks all)
ALL_ATTACKS = ("shadow", "shadow-pool", "lira-online", "lira-online-global", "lira-offline", "lira-offline-global",
               "rmia", "loss", "confidence", "data-free")


@pytest.fixture
def caught(monkeypatch):
    """The matplotlib figures drawn while the test runs, on their way to their SVG or PDF/PNG."""
    out = []
    svg, render = plots._svg, figures._render

    def catch_svg(fig, *args, **kw):
        out.append(fig)
        return svg(fig, *args, **kw)

    def catch_render(fig, fmt):
        if fmt == "svg":
            out.append(fig)
        return render(fig, fmt)

    monkeypatch.setattr(plots, "_svg", catch_svg)
    monkeypatch.setattr(figures, "_render", catch_render)
    return out


def _inside(inner, outer, slack: float = 0.5) -> bool:
    return (outer.x0 - slack <= inner.x0 and inner.x1 <= outer.x1 + slack
            and outer.y0 - slack <= inner.y0 and inner.y1 <= outer.y1 + slack)


def text_outside(fig) -> list[str]:
    """What of ``fig``'s text lies (partly) outside the figure as drawn: each legend (its
    texts named), the drawn axes' titles, labels and tick labels and the figure's own text
    (one tight box, in inches), and every point label or note (out of the layout)."""
    fig.draw_without_rendering()
    renderer = renderer_of(fig)
    out = []
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]:
        if not _inside(legend.get_window_extent(renderer), fig.bbox):
            out.append("legend: " + ", ".join(t.get_text() for t in legend.get_texts()))
    if not _inside(fig.get_tightbbox(renderer), fig.bbox_inches, slack=0.01):
        out.append(f"the figure's drawn text spans {fig.get_tightbbox(renderer)} of {fig.bbox_inches}")
    out += [t.get_text() for ax in fig.axes for t in ax.texts
            if t.get_text() and not _inside(t.get_window_extent(renderer), fig.bbox)]
    return out


def overlapping_labels(fig) -> list[tuple[str, str]]:
    """The pairs of point labels (annotations) of one axes of ``fig`` whose boxes overlap."""
    fig.draw_without_rendering()
    renderer = renderer_of(fig)
    pairs = []
    for ax in fig.axes:
        notes = [(n.get_text(), n.get_window_extent(renderer)) for n in ax.texts if isinstance(n, Annotation)]
        pairs += [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(notes, 2) if box_a.overlaps(box_b)]
    return pairs


def test_verdict_figure_labels_every_point_without_overprinting(caught):
    t = table(0.0, seeds=(0,), noise=0.0, acc_noise=0.0, grid=CROWDED)
    figures.group_figures(summarise(t))
    (fig,) = caught
    labels = [[n.get_text() for n in ax.texts if isinstance(n, Annotation)] for ax in fig.axes]
    assert all(len(panel) >= 4 for panel in labels), labels     # most points keep their label
    assert {"κ=0.25", "κ=0.5"} <= set(labels[0])                # the two on one spot, both
    assert overlapping_labels(fig) == []
    assert text_outside(fig) == []


def test_a_legend_of_long_labels_stays_inside_its_figure(caught):
    x = np.linspace(0.01, 1, 50)
    line_plot([{"label": f"{a} (AUC 0.57)", "x": x, "y": x ** 0.8, "markers": False} for a in ALL_ATTACKS],
              title="ROC of every attack, baseline (log-log)", xlabel="false-positive rate",
              ylabel="true-positive rate", log_x=True, log_y=True, diagonal=True)
    sigma = [1.0, 1.1]
    line_plot([{"label": name, "x": sigma, "y": [4.69, 3.93]} for name in
               ("accountant ε (upper bound)", "empirical ε (lower bound)", "one-run ε (lower bound)")],
              title="DP-SGD: accountant ε vs empirical ε", xlabel="σ (noise multiplier)", ylabel="ε")
    short = line_plot([{"label": "MG noise (κ)", "x": [0.5, 0.9], "y": [1, 2]},
                       {"label": "DP-SGD (σ)", "x": [0.4, 0.9], "y": [0, 2]}], title="t", xlabel="x", ylabel="y")
    assert [text_outside(fig) for fig in caught] == [[], [], []]
    columns = [{round(t.get_window_extent(renderer_of(fig)).x0) for t in fig.legends[0].get_texts()} for fig in caught]
    assert [len(c) for c in columns] == [2, 2, 2]  # as many as fit, at most 3 (3 would be wider than the first two)
    assert "MG noise (κ)" in short and "DP-SGD (σ)" in short


@pytest.mark.slow
def test_every_figure_of_a_page_keeps_its_text_inside(caught):
    t = make_pool_table()
    render_report(t, make_pool_rocs(t), extras=make_extras(), summary=summarise(t),
                  figures=figures.group_figures(summarise(t)))
    assert len(caught) >= 10
    assert {fig.axes[0].get_title(loc="left") or fig.axes[0].get_title(): text_outside(fig) for fig in caught
            if text_outside(fig)} == {}
    assert [pair for fig in caught for pair in overlapping_labels(fig)] == []


def test_the_exposure_grid_writes_its_scores_at_the_pages_text_size():
    """The grid's PNG is drawn at its own size (test_report_browser.py): a point is
    FIG_DPI / 72 of its pixels, and each score and class is at least 11 CSS pixels tall (as the
    page's figures' tick labels), inside its cell, clear of the others and of the images."""
    rng = np.random.default_rng(0)
    fig = grid_figure(rng.integers(0, 256, (16, 3, 32, 32), dtype=np.uint8), list(range(10)) + [1] * 6,
                      [2.57e5, -0.456, 1234.5, 12.3] * 4, 255, "cifar10")
    fig.draw_without_rendering()
    renderer = renderer_of(fig)
    titles = [ax.title for ax in fig.axes if ax.title.get_text()]
    assert len(titles) == 16 and titles[1].get_text() == "-0.456\nautomobile"
    assert min(t.get_fontsize() for t in titles) * fig.dpi / 72 >= 11
    boxes = [t.get_window_extent(renderer) for t in titles] + [ax.get_window_extent(renderer) for ax in fig.axes[:16]]
    assert all(_inside(b, fig.bbox) for b in boxes)
    assert [(i, j) for i, j in itertools.combinations(range(len(boxes)), 2)
            if j != i + 16 and boxes[i].overlaps(boxes[j])] == []   # a title touches only its own image
