"""The inline-SVG heatmap writer (privaudit.report.heatmap): synthetic arrays only."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from privaudit.report.heatmap import VIRIDIS, colormap, format_sig, heatmap

NS = "{http://www.w3.org/2000/svg}"
LOW, MID, HIGH = VIRIDIS[0].lower(), VIRIDIS[4].lower(), VIRIDIS[-1].lower()


def _svg(values, **kw):
    args = dict(x_labels=[f"c{j}" for j in range(np.shape(values)[1])],
                y_labels=[f"r{i}" for i in range(np.shape(values)[0])],
                title="heat", xlabel="x", ylabel="y", value_label="value", standalone=True)
    args.update(kw)
    return heatmap(values, **args)


def _cells(root):
    """{(row label, column label): (rect element, tooltip)} from the cell tooltips."""
    out = {}
    for rect in root.iter(NS + "rect"):
        if rect.get("class") != "cell":
            continue
        tip = rect.find(NS + "title").text
        m = re.fullmatch(r"x = (.*), y = (.*): (.*)", tip)
        assert m, tip
        out[(m.group(2), m.group(1))] = (rect, m.group(3))
    return out


def _texts(root, cls=None):
    return [t.text for t in root.iter(NS + "text") if cls is None or t.get("class") == cls]


def test_well_formed_accessible_and_one_rect_per_cell():
    z = np.arange(12, dtype=float).reshape(3, 4)
    svg = _svg(z, title='A & <b> "t"')
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg"
    assert root.get("role") == "img"
    assert root.get("aria-label") == 'A & <b> "t"'
    assert root.find(NS + "title").text == 'A & <b> "t"'
    assert re.fullmatch(r"0 0 \d+ \d+", root.get("viewBox"))
    cells = [r for r in root.iter(NS + "rect") if r.get("class") == "cell"]
    assert len(cells) == 3 * 4
    assert len(_cells(root)) == 12
    for r in cells:
        for attr in ("x", "y", "width", "height"):
            assert re.fullmatch(r"-?\d+(\.\d{1,2})?", r.get(attr)), r.get(attr)
    # plot area is about 420 x 300 by default
    assert sum(float(r.get("width")) for r in cells[:4]) == pytest.approx(420, abs=0.1)
    assert sum(float(cells[4 * i].get("height")) for i in range(3)) == pytest.approx(300, abs=0.1)
    # without standalone there is no namespace (inline HTML use)
    assert 'xmlns=' not in heatmap(z, x_labels=list("abcd"), y_labels=[1, 2, 3], title="t",
                                   xlabel="x", ylabel="y", value_label="v")


def test_min_cell_is_low_end_max_cell_is_high_end_and_text_contrast():
    z = np.array([[0.2, 0.5, 0.9], [0.1, 0.7, 1.3]])
    root = ET.fromstring(_svg(z))
    cells = _cells(root)
    assert cells[("r1", "c0")][0].get("fill") == LOW == colormap(0.0)
    assert cells[("r1", "c2")][0].get("fill") == HIGH == colormap(1.0)
    # a middle cell is strictly between: neither end
    assert cells[("r0", "c1")][0].get("fill") not in (LOW, HIGH)
    # linear scale: value 0.7 is exactly halfway between 0.1 and 1.3
    assert cells[("r1", "c1")][0].get("fill") == MID
    # white text on the dark purple cell, near-black text on the yellow one
    fills = {t.text: t.get("fill") for t in root.iter(NS + "text")
             if t.get("class") == "celltext"}
    assert fills["0.1"] == "#fff"
    assert fills["1.3"] not in ("#fff", "#ffffff")


def test_log_color_geometric_midpoint_gets_middle_colour():
    z = np.array([[1e-3, 1e-2, 1e-1], [3e-3, 5e-2, 7e-2]])
    root = ET.fromstring(_svg(z, log_color=True))
    cells = _cells(root)
    assert cells[("r0", "c0")][0].get("fill") == LOW
    assert cells[("r0", "c1")][0].get("fill") == MID  # sqrt(1e-3 * 1e-1)
    assert cells[("r0", "c2")][0].get("fill") == HIGH
    # linear colouring would put 1e-2 near the low end, not in the middle
    lin = _cells(ET.fromstring(_svg(z)))
    assert lin[("r0", "c1")][0].get("fill") != MID
    # colour bar: 5 ticks at evenly spaced log positions, 3 significant digits
    assert _texts(root, "cbtick") == ["0.001", "0.00316", "0.01", "0.0316", "0.1"]
    assert "value" in _texts(root)


def test_nan_and_nonpositive_cells_are_grey_na():
    z = np.array([[np.nan, 2.0], [0.0, 4.0]])
    root = ET.fromstring(_svg(z))
    cells = _cells(root)
    rect, tip = cells[("r0", "c0")]
    assert rect.get("fill") == "#ddd" and tip == "n/a"
    assert cells[("r1", "c0")][0].get("fill") == LOW  # 0 is fine on a linear scale
    assert _texts(root, "celltext").count("n/a") == 1
    # on a log scale 0 is not colourable either
    root = ET.fromstring(_svg(z, log_color=True))
    cells = _cells(root)
    assert cells[("r1", "c0")][0].get("fill") == "#ddd"
    assert _texts(root, "celltext").count("n/a") == 2
    assert cells[("r0", "c1")][0].get("fill") == LOW
    assert cells[("r1", "c1")][0].get("fill") == HIGH


def test_escaping_and_all_tick_labels_present():
    svg = _svg([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], x_labels=["a<b & c", 2, 3.5],
               y_labels=[0.5, "<y>"], xlabel="x <unit>", ylabel='y "q"', value_label="v & w")
    assert "<b &" not in svg and "<y>" not in svg
    root = ET.fromstring(svg)
    ticks = _texts(root, "tick")
    assert sorted(ticks) == sorted(["a<b & c", "2", "3.5", "0.5", "<y>"])
    texts = _texts(root)
    for s in ("x <unit>", 'y "q"', "v & w", "heat"):
        assert s in texts
    titles = [r.find(NS + "title").text for r in root.iter(NS + "rect")
              if r.get("class") == "cell"]
    assert "x = a<b & c, y = <y>: 4" in titles


def test_tooltip_format_and_custom_fmt():
    root = ET.fromstring(_svg([[0.0123]], x_labels=[4], y_labels=[0.5]))
    rect = next(r for r in root.iter(NS + "rect") if r.get("class") == "cell")
    assert rect.find(NS + "title").text == "x = 4, y = 0.5: 0.0123"
    root = ET.fromstring(_svg([[0.25, 0.5]], fmt=lambda v: f"{v:.0%}"))
    assert _texts(root, "celltext") == ["25%", "50%"]
    assert _texts(ET.fromstring(_svg([[0.25, 0.5]], cell_text=False)), "celltext") == []


def test_row_zero_is_drawn_below_row_one_and_columns_left_to_right():
    root = ET.fromstring(_svg(np.arange(6.0).reshape(3, 2)))
    cells = _cells(root)
    y = {r: float(cells[(r, "c0")][0].get("y")) for r in ("r0", "r1", "r2")}
    assert y["r0"] > y["r1"] > y["r2"]  # SVG y grows downward
    assert float(cells[("r0", "c0")][0].get("x")) < float(cells[("r0", "c1")][0].get("x"))
    ticks = {t.text: float(t.get("y")) for t in root.iter(NS + "text") if t.get("class") == "tick"}
    assert ticks["r0"] > ticks["r1"] > ticks["r2"]


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*\(3, 2\)"):
        heatmap(np.ones((2, 3)), x_labels=["a", "b"], y_labels=[1, 2, 3], title="t",
                xlabel="x", ylabel="y", value_label="v")
    with pytest.raises(ValueError):
        heatmap(np.ones(3), x_labels=["a", "b", "c"], y_labels=[1], title="t",
                xlabel="x", ylabel="y", value_label="v")


@pytest.mark.parametrize("values", [[], np.empty((0, 3)), np.empty((2, 0))])
def test_empty_input_gives_no_data_frame(values):
    svg = heatmap(values, x_labels=["a", "b", "c"], y_labels=[], title="empty", xlabel="x",
                  ylabel="y", value_label="v", standalone=True)
    root = ET.fromstring(svg)
    assert "no data" in _texts(root)
    assert not [r for r in root.iter(NS + "rect") if r.get("class") == "cell"]


def test_format_sig():
    assert format_sig(0.0123) == "0.0123"
    assert format_sig(1234.5) == "1230"
    assert format_sig(0.5) == "0.5"
    assert format_sig(0) == "0"
    assert format_sig(float("nan")) == "n/a"
    assert format_sig(2.5e7) == "2.5e+07"
