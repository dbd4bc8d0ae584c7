"""The matplotlib plots of privaudit.reporting.plots: the heatmap and the SVG clean-up (the
line plot is tested with the report in test_report_html.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from privaudit.reporting.plots import format_sig, heatmap, svg_element

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
    from privaudit.reporting.plots import compact_markup

    svg = ('<g id="figure_1">\n  <g id="line2d_1">\n   <defs>\n    <path id="m5a1" d="M0 0V3.5" style="stroke: #000"/>\n'
           '   </defs>\n' + "".join(f'   <use href="#m5a1" x="{x}.123456" y="2.5" style="fill: #0072b2; stroke: #0072b2"/>\n'
                                  for x in range(3)) +
           '  </g>\n  <g id="p-series-0"><path d="M1 1L2 2" style="fill: none"/></g>\n'
           '  <text transform="rotate(-0 1 2)" style="font-family: \'DejaVu Sans\', \'Bitstream Vera Sans\', sans-serif">a</text>'
           '</g>')
    out = compact_markup(svg, "p-")
    root = ET.fromstring(f"<svg>{out}</svg>")
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert ids == ["p-0", "p-series-0"]                         # referenced (shortened) and named ids only
    uses = root.findall(".//use")
    assert [u.get("href") for u in uses] == ["#p-0"] * 3 and [u.get("x") for u in uses] == ["0.12", "1.12", "2.12"]
    assert {u.get("class") for u in uses} == {"p-s0"} and ".p-s0{fill: #0072b2; stroke: #0072b2}" in out
    assert "\n" not in out and "rotate" not in out and "Bitstream" not in out
    assert root.find(".//path[@d='M1 1L2 2']").get("style") == "fill: none"  # a style used once stays inline


def test_thinning_keeps_the_ends_and_every_visible_cell():
    from privaudit.reporting.plots import _thin

    x = np.linspace(0, 1, 50_000)
    y = np.sqrt(x)
    idx = _thin(x, y, False, False)
    assert idx[0] == 0 and idx[-1] == len(x) - 1 and len(idx) < 6000
    # every dropped point lies in the grid cell of the kept point before it: nothing visible is lost
    cell = np.floor(x * 1999) * 2000 + np.floor(y * 1999)
    last_kept = idx[np.searchsorted(idx, np.arange(len(x)), side="right") - 1]
    assert np.array_equal(cell, cell[last_kept])
    assert len(_thin(x[:100], y[:100], False, False)) == 100   # short lines are left alone


def _points(d: str) -> list[tuple[float, float]]:
    """The absolute points of an M/L/H/V path."""
    import re

    pts, x, y = [], 0.0, 0.0
    for cmd, args in re.findall(r"([MLHV])([^MLHV]*)", d.replace("\n", " ")):
        vals = [float(v) for v in args.split()]
        if cmd in "ML":
            x, y = vals
        elif cmd == "H":
            x = vals[0]
        else:
            y = vals[0]
        pts.append((x, y))
    return pts


def test_compact_paths_keep_every_point_to_a_hundredth_of_a_point():
    """Path data is shortened (rounded to 0.01 pt, staircases as H and V) and nothing else of
    the SVG changes: a tick label with 3 decimals stays as it is."""
    import xml.etree.ElementTree as ET

    from privaudit.reporting.plots import compact_paths

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
    assert len(out) < 0.5 * len(svg) and "H" in paths[0].get("d") and "V" in paths[0].get("d")
    assert paths[1].get("d") == "M1 2C3.12 4 5 6 7 8z" and root.find("text").text == "0.001"
    assert 'x="10.123456"' in out
