"""The matplotlib plots of privaudit.reporting.plots: the heatmap, the SVG clean-up
(privaudit.reporting.svg) and the simplified lines (privaudit.reporting.curves); the line plot
is tested with the report in test_report_html.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from privaudit.analysis.metrics import roc
from privaudit.reporting.curves import simplify, up_to
from privaudit.reporting.plots import format_sig, heatmap, line_plot
from privaudit.reporting.svg import compact_markup, compact_paths, share_styles, svg_element

NS = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return ["".join(t.itertext()) for t in root.iter() if t.tag in ("text", NS + "text")]


def test_heatmap_writes_every_cell_and_its_labels():
    z = np.array([[0.5, 12.0, 3.25], [1e-3, 2.0, 7.5]])
    svg = heatmap(z, x_labels=["a", "b", "c"], y_labels=[0.25, 0.5], title="heat & <t>", xlabel="x",
                  ylabel="y", value_label="loss", standalone=True)
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg" and root[0].text == "heat & <t>"
    texts = _texts(svg)
    for cell in ("0.5", "12", "3.25", "0.001", "2", "7.5", "a", "b", "c", "0.25", "loss"):
        assert cell in texts, cell


def test_log_colour_heatmap_marks_nonpositive_cells_and_refuses_bad_shapes():
    svg = heatmap(np.array([[1.0, 0.0], [np.nan, 100.0]]), x_labels=["1", "2"], y_labels=["1", "2"], title="t",
                  xlabel="x", ylabel="y", value_label="v", log_color=True)
    assert _texts(svg).count("n/a") == 2
    with pytest.raises(ValueError, match="shape"):
        heatmap(np.ones((2, 3)), x_labels=["a", "b"], y_labels=["c", "d"], title="t", xlabel="x", ylabel="y",
                value_label="v")
    assert "no data" in _texts(heatmap(np.empty((0, 0)), x_labels=[], y_labels=[], title="t", xlabel="x",
                                       ylabel="y", value_label="v"))


def test_format_sig():
    assert [format_sig(v) for v in (0.0, 1234.5, 0.000123456, 1.5e7, float("nan"), 2.0)] == \
        ["0", "1230", "0.000123", "1.5e+07", "n/a", "2"]


def test_svg_element_strips_metadata_and_prefixes_ids():
    raw = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg xmlns:xlink="http://www.w3.org/1999/xlink" '
           'xmlns="http://www.w3.org/2000/svg"><metadata><rdf:RDF>http://x</rdf:RDF></metadata>'
           '<defs><path id="m1" d="M0 0"/></defs><use xlink:href="#m1"/><g clip-path="url(#m1)"/></svg>')
    inline = svg_element(raw, "T", salt="s")
    assert inline.startswith('<svg role="img" aria-label="T" class="plot">') and "http" not in inline
    root = ET.fromstring(inline)
    pid = root.find("defs/path").get("id")
    assert pid.startswith("f") and root.find("use").get("href") == "#" + pid and pid in root.find("g").get("clip-path")
    assert 'xmlns="http://www.w3.org/2000/svg"' in svg_element(raw, "T", standalone=True)
    styled = raw.replace("<defs>", '<defs><style type="text/css">*{stroke-linejoin: round}</style>')
    assert "<style" not in svg_element(styled, "T")                   # inline: no page-wide CSS from a figure
    assert "<style" in svg_element(styled, "T", standalone=True)


def test_compact_markup_keeps_the_drawing_and_writes_it_short():
    svg = ('<g id="figure_1">\n  <g id="line2d_1">\n   <defs>\n'
           '    <path id="m5a1" d="M0 0V3.5" style="stroke: #000"/>\n'
           '   </defs>\n'
           + "".join(f'   <use href="#m5a1" x="{x}.123456" y="2.5" style="fill: #0072b2; stroke: #0072b2"/>\n'
                     for x in range(3))
           + '  </g>\n  <g id="p-series-0"><path d="M1 1L2 2" style="fill: none"/></g>\n'
           '  <text transform="rotate(-0 1 2)" '
           'style="font-family: \'DejaVu Sans\', \'Bitstream Vera Sans\', sans-serif">a</text>'
           '  <g clip-path="url(#m5a1)">'
           + '<use href="#m5a1" x="1" y="2" style="fill: #0072b2; stroke: #0072b2"/>' * 2
           + '</g></g>')
    out = compact_markup(svg, "p-")
    root = ET.fromstring(f"<svg>{out}</svg>")
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert ids == ["p-0", "p-series-0"]                         # referenced (shortened) and named ids only
    assert "<g>" not in out and out.count("<g") == 2            # groups that style, clip or name nothing unwrapped
    uses = root.findall(".//use")
    assert [u.get("href") for u in uses] == ["#p-0"] * 5 and [u.get("x") for u in uses[:3]] == ["0.12", "1.12", "2.12"]
    assert {u.get("class") for u in uses[:3]} == {"p-s0"} and ".p-s0{fill:#0072b2;stroke:#0072b2}" in out
    clipped = root.find(".//g[@clip-path]")                    # a group of uses alike: their class on the group
    assert clipped.get("class") == "p-s0" and all(u.get("class") is None for u in clipped)
    assert "\n" not in out and "rotate" not in out and "Bitstream" not in out
    assert root.find(".//path[@d='M1 1L2 2']").get("style") == "fill: none"  # a style used once stays inline


def test_a_page_shares_one_class_per_style_and_short_ids():
    raw = ('<svg xmlns="http://www.w3.org/2000/svg"><defs><clipPath id="c"><rect/></clipPath></defs>'
           + '<path d="M0 0" clip-path="url(#c)" style="fill: none; stroke: #0072b2"/>' * 3 + '</svg>')
    a, b = svg_element(raw, "one"), svg_element(raw, "two")
    assert "<style>" in a and a != b                            # each figure alone: its own classes and ids
    (page,), css = share_styles([f"<p>x</p>{a}<div>{b}</div>"])
    assert css == ".s0{fill:none;stroke:#0072b2}" and "<style>" not in page
    first, second = (ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", page))
    assert [e.get("class") for e in first.iter("path")] == ["s0"] * 3 == [e.get("class") for e in second.iter("path")]
    assert first.find(".//clipPath").get("id") == "f1-0" and second.find(".//clipPath").get("id") == "f2-0"
    assert {e.get("clip-path") for e in second.iter("path")} == {"url(#f2-0)"}


def _distance(points: np.ndarray, line: np.ndarray) -> np.ndarray:
    """Slow reference: each point's distance to the nearest segment of the polyline ``line``."""
    a, seg = line[:-1], np.diff(line, axis=0)
    length2 = np.maximum((seg ** 2).sum(axis=1), 1e-300)
    out = []
    for p in points:
        t = np.clip(((p - a) * seg).sum(axis=1) / length2, 0, 1)
        out.append(np.hypot(*(p - a - t[:, None] * seg).T).min())
    return np.array(out)


@pytest.mark.parametrize("log", [False, True])
def test_simplified_curves_stay_within_the_tolerance_and_keep_the_low_fpr_end(log):
    """Both ways: every point of the ROC curve lies within the tolerance of the drawn line, and
    every point of the drawn line within the tolerance of the curve; up to FPR 1 % (and the
    first point beyond) nothing is dropped."""
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(900), np.zeros(900)]
    fpr, tpr = roc(labels, rng.normal(labels * 0.7, 1.0).round(2))   # ties: diagonal steps too
    ok = (fpr > 0) & (tpr > 0) if log else np.ones(len(fpr), bool)
    fpr, tpr = fpr[ok], tpr[ok]
    xy = np.column_stack([np.log10(fpr), np.log10(tpr)] if log else [fpr, tpr]) * [370, 174]  # axes in points
    exact = up_to(fpr, 0.01)
    for tolerance in (0.3, 2.0):
        keep = simplify(xy, tolerance, exact)
        drawn = xy[keep]
        assert keep[0] == 0 and keep[-1] == len(xy) - 1 and (np.diff(keep) > 0).all() and len(keep) < 0.7 * len(xy)
        assert _distance(xy, drawn).max() <= tolerance + 1e-9
        along = drawn[:-1, None] + np.linspace(0, 1, 9)[None, :, None] * np.diff(drawn, axis=0)[:, None]
        assert _distance(along.reshape(-1, 2), xy).max() <= tolerance + 1e-9
        low = np.flatnonzero(exact)
        assert fpr[low[-1]] > 0.01 >= fpr[low[-2]] and np.isin(low, keep).all()
    assert (simplify(xy[:2], 0.3) == [0, 1]).all() and len(simplify(xy[:1], 0.3)) == 1


def test_a_plain_line_draws_its_exact_end_whole_and_little_else():
    labels = np.r_[np.ones(5000), np.zeros(5000)]
    fpr, tpr = roc(labels, np.random.default_rng(0).normal(labels, 1.0))
    plot = dict(title="ROC", xlabel="fpr", ylabel="tpr", log_x=True, log_y=True, x_range=(1e-4, 1), y_range=(1e-4, 1))
    whole = line_plot([{"label": "r", "x": fpr, "y": tpr, "markers": False, "exact_below": 0.01}], **plot)
    path = ET.fromstring(whole).find(".//g[@id]/path").get("d")
    low = int(((fpr > 0) & (tpr > 0) & (fpr <= 0.01)).sum())
    assert low < len(_points(path)) < low + 300 < len(fpr) / 10     # the low end whole, the rest simplified


def _points(d: str) -> list[tuple[float, float]]:
    """The absolute points of a path of M/L/H/V commands, absolute or relative (m/l/h/v)."""
    pts, x, y = [], 0.0, 0.0
    for cmd, args in re.findall(r"([MLHVmlhv])([^MLHVmlhv]*)", d.replace("\n", " ")):
        vals = [float(v) for v in re.findall(r"-?(?:\d+\.?\d*|\.\d+)", args)]
        dx, dy = (x, y) if cmd.islower() else (0.0, 0.0)
        if cmd in "MLml":
            x, y = vals[0] + dx, vals[1] + dy
        elif cmd in "Hh":
            x = vals[0] + dx
        else:
            y = vals[0] + dy
        pts.append((x, y))
    return pts


def test_compact_paths_keep_every_point_to_a_hundredth_of_a_point():
    """Path data is shortened (rounded to 0.01 pt, a line as relative steps, staircases as h and
    v, no rounding error adding up) and nothing else of the SVG changes: a tick label with 3
    decimals stays as it is."""
    rng = np.random.default_rng(0)
    xs, ys = np.cumsum(rng.random(300)) * 1.234567, np.cumsum(rng.random(300)) * 0.987654
    stair = "M 0.000000 0.000000 \n" + "".join(f"L {x:.6f} {py:.6f} \nL {x:.6f} {y:.6f} \n"
                                              for x, y, py in zip(xs, ys, np.r_[0.0, ys[:-1]]))
    svg = (f'<svg><path d="{stair}" style="stroke-width:1.5"/><path d="M 1 2 C 3.123456 4 5 6 7 8 z"/>'
           '<text x="10.123456">0.001</text></svg>')
    out = compact_paths(svg)
    root = ET.fromstring(out)  # still well-formed
    paths = root.findall("path")
    before, after = _points(stair), _points(paths[0].get("d"))
    assert len(before) == len(after) and np.abs(np.array(before) - np.array(after)).max() <= 0.005 + 1e-9
    assert len(out) < 0.5 * len(svg) and "h" in paths[0].get("d") and "v" in paths[0].get("d")
    assert paths[1].get("d") == "M1 2C3.12 4 5 6 7 8z" and root.find("text").text == "0.001"
    assert 'x="10.123456"' in out
