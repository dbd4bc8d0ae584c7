"""The verdict figures (privaudit.reporting.figures): matplotlib, inline SVG plus PDF and PNG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from test_summary import table

from privaudit.reporting.figures import _errors, group_figures
from privaudit.reporting.html import render_report
from privaudit.reporting.summary import summarise


def test_error_bars_are_the_intervals():
    rows = pd.DataFrame({"auc": [0.6, 0.7], "auc_lo": [0.55, np.nan], "auc_hi": [0.62, np.nan]})
    assert np.allclose(_errors(rows, "auc"), [[0.05, 0.0], [0.02, 0.0]])   # no interval: no bar, not a NaN


@pytest.mark.slow
def test_one_figure_per_group_in_three_formats_and_reproducible():
    t = pd.concat([table(0.04), table(0.0).assign(model="cnn")])
    figs = group_figures(summarise(t))
    assert [f.stem for f in figs] == ["verdict-cnn-cifar10", "verdict-mlp-cifar10"]
    f = figs[1]
    root = ET.fromstring(f.svg)                                    # well-formed, one <svg> element
    assert root.tag.endswith("svg") and "<script" not in f.svg
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', f.svg))  # nothing outside the figure
    for label in ("κ=1", "κ=4", "σ=2", "test accuracy", "t over 3 seeds", "lira"):
        assert label in f.svg, label                               # text kept as text
    assert f.pdf.startswith(b"%PDF") and f.png.startswith(b"\x89PNG")
    assert group_figures(summarise(t))[1].svg == f.svg            # no dates, fixed ids: same bytes


@pytest.mark.slow
def test_the_page_embeds_the_figure_in_the_first_screen():
    t = table(0.04)
    summary = summarise(t)
    figs = group_figures(summary)
    doc = render_report(t, summary=summary, figures=figs)
    first = doc[doc.index('id="verdict"'):doc.index("Key findings")]
    assert first.count("<svg") == 1 and "reports/figures/verdict-mlp-cifar10.pdf" in first
    plain = render_report(t, summary=summary)                      # no figures given: none drawn
    assert "<svg" not in plain[plain.index('id="verdict"'):plain.index("Key findings")]
