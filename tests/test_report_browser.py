"""The report where people read it: opened from disk in headless Chromium (no network).

A real audit and the theory experiments (small settings) build ``reports/index.html``;
Chromium loads it, the test reads the console (nothing may be logged: no script error, no
failed load), the DOM after load (every section, plot and table present) and a screenshot
(not blank). The checker itself is checked on a page with a script error.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.theorems import experiments

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")]


def _open(page: Path, tmp_path: Path, width: int = 1280, height: int = 900) -> tuple[str, list[str], Image.Image]:
    """(DOM after load, console lines, screenshot) of ``page`` in headless Chromium."""
    shot = tmp_path / f"{page.stem}.png"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
              f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},{height}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    shot_run = subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True,
                              timeout=120)
    console = [line for line in (dom.stderr + shot_run.stderr).splitlines() if ":CONSOLE" in line]
    assert shot.is_file(), shot_run.stderr[-2000:]
    return dom.stdout, console, Image.open(shot).convert("RGB")


def _not_blank(image: Image.Image) -> None:
    pixels = np.asarray(image)
    ink = (pixels < 235).any(axis=2).mean()                  # share of pixels that are not (near) white
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    assert ink > 0.02 and colours > 50, (ink, colours)


def test_the_checker_sees_script_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><h1>x</h1><script>undefinedFunction();</script></body></html>")
    _, console, _ = _open(page, tmp_path)
    assert any("undefinedFunction" in line for line in console)
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    with pytest.raises(AssertionError):
        _not_blank(_open(blank, tmp_path)[2])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    result = CliRunner().invoke(app, ["audit", "--dataset", "digits", "--kappas", "0.5", "--sigmas", "1",
                                      "--epochs", "3", "--attacks", "all", "--pool-size", "4", "--workdir", str(root)])
    assert result.exit_code == 0, result.output
    experiments.run_smoothing(root, kappas=(0.5,), draws=2000)
    experiments.run_convergence(root, kappas=(0.0, 1.0), iterations=80, n=60, m=30)
    experiments.run_federated(root, kappas=(0.0, 1.0), local_steps=(1, 2), rounds=12, n=60, m=30)
    experiments.run_masked_neurons(root, n=12, d=8, m=40, rounds=12, bernoulli_ps=(1, 2), xis=(0.5,),
                                   categorical_ps=(2,), steps=(1, 2))
    assert CliRunner().invoke(app, ["report", "--workdir", str(root)]).exit_code == 0
    return root


def test_report_loads_clean_with_every_section(workspace, tmp_path):
    dom, console, shot = _open(workspace / "reports" / "index.html", tmp_path)
    assert console == []                                      # no script error, no failed load
    assert "<h1>privaudit report</h1>" in dom
    for anchor in ("table", "howto", "papers", "paper-smoothing", "paper-convergence", "paper-federated",
                   "paper-masked-neurons"):
        assert f'id="{anchor}"' in dom, anchor
    assert re.search(r'id="g-mlp-digits', dom)                # the model's section with its plots
    assert dom.count("<svg") >= 4 and dom.count("<table") >= 2          # the audit's own plots, inline
    assert dom.count('src="data:image/svg+xml;base64,') == 1 + 2 + 3 + 3  # the papers' figures
    assert "Not run yet" not in dom                           # every paper figure is there
    # the first screen says which defence leaks less at equal accuracy, with the numbers
    findings = dom[dom.index("Key findings"):dom.index('id="table"')]
    assert (("At equal test accuracy" in findings and re.search(VERDICT, findings))
            or re.search(NO_SHARED_ACCURACY, findings))
    assert re.search(r"\d\.\d{3}", findings)
    _not_blank(shot)


# one κ and one σ: compared only where their accuracies meet (docs/methods/e-replicates.md E), else no
# verdict ("not compared") and the reason, which names the defence that falls short
VERDICT = (r"MG noise leaks less|DP-SGD leaks less|no significant difference at 95 %|no interval: cannot decide"
           r"|not compared")
NO_SHARED_ACCURACY = r"No iso-accuracy comparison: no (DP-SGD|MG-noise) setting is as accurate as any"
PROBE = """<script>addEventListener("load", () => {
  const v = document.getElementById("verdict").getBoundingClientRect();
  const d = document.documentElement;
  document.body.setAttribute("data-probe", JSON.stringify({scroll: d.scrollWidth, client: d.clientWidth,
    top: v.top, bottom: v.bottom}));
});</script>"""


@pytest.mark.parametrize("width", [1280, 820])
def test_first_screen_is_the_verdict_and_nothing_overflows_sideways(workspace, tmp_path, width):
    """The page opens on the verdict (with its intervals) and one row per setting, and at a
    laptop's or a tablet's width nothing runs off the page sideways (wide tables scroll inside
    their own box). Measured in the browser by a probe script added to a copy of the page."""
    import json

    doc = (workspace / "reports" / "index.html").read_text()
    first = doc[doc.index('id="verdict"'):doc.index("Key findings")]
    assert "At equal test accuracy, which defence leaks less?" in first
    pills = re.findall(r'<span class="pill [a-z]+">([^<]+)</span>', first)
    assert len(pills) == 3 and all(re.fullmatch(VERDICT, p) for p in pills), pills  # paper's; strongest: TPR, ε
    rows = re.findall(r'<tr><td class="txt"><span class="fam [^"]+"></span>([^<]+)</td>', first)
    assert rows == ["baseline", "κ=0.5", "σ=1"]                     # one row per setting, in order
    assert len(re.findall(r"\[\d\.\d{3}, \d\.\d{3}\]", first)) >= 6  # accuracy and AUC intervals
    probe = tmp_path / "probe.html"
    probe.write_text(doc.replace("</body>", PROBE + "</body>"))
    dom, console, _ = _open(probe, tmp_path, width=width)
    assert console == []
    found = re.search(r'data-probe="([^"]+)"', dom)
    assert found, "the probe script did not run"
    m = json.loads(found.group(1).replace("&quot;", '"'))
    assert m["scroll"] <= m["client"], m                              # no sideways overflow
    assert m["top"] < 400, m                                          # the verdict starts on the first screen


LAYOUT_PROBE = """<script>addEventListener("load", () => {
  document.getElementById("tradeoff-all").checked = true;     // every column of the long table
  const inside = (a, b) => a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 &&
    a.bottom <= b.bottom + 1;
  const scrolls = w => ["auto", "scroll"].includes(getComputedStyle(w).overflowX);
  const boxes = [...document.querySelectorAll(".tablewrap")].map(w => ({
    first: w.querySelector("th, td").textContent.trim(), rows: w.querySelectorAll("tbody tr").length,
    wide: w.scrollWidth > w.clientWidth + 1, scrolls: scrolls(w), height: w.offsetHeight}));
  const cut = [];
  for (const svg of document.querySelectorAll("svg.plot")) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll("text")) {
      if (t.textContent.trim() && !inside(t.getBoundingClientRect(), box)) cut.push(t.textContent.trim());
    }
  }
  const images = [...document.querySelectorAll(".exposed img")].map(i => [i.clientWidth, i.naturalWidth]);
  document.body.setAttribute("data-probe", JSON.stringify({boxes, cut, images, window: innerHeight}));
});</script>"""


@pytest.mark.parametrize("width, height", [(1280, 720), (1920, 1080)])
def test_at_a_laptops_or_a_desktops_width_nothing_is_cut_without_a_scrollbar_in_view(workspace, tmp_path, width,
                                                                                        height):
    """At 1280 and 1920 px wide: a table wider than its box scrolls sideways inside a box no
    taller than the window, so that its scrollbar is in view with its rows (the long trade-off
    table, all its columns shown, has more rows than a window holds); no text of any figure runs past the figure's
    edge (legends, labels); the exposure grids are drawn at their own size, so their scores
    are as large as drawn (test_figure_layout.py). Measured in the browser by a probe script
    added to a copy of the page; screenshots of the whole page were looked at by eye."""
    import json

    doc = (workspace / "reports" / "index.html").read_text()
    probe = tmp_path / "layout.html"
    probe.write_text(doc.replace("</body>", LAYOUT_PROBE + "</body>"))
    dom, console, _ = _open(probe, tmp_path, width=width, height=height)
    assert console == []
    found = re.search(r'data-probe="([^"]+)"', dom)
    assert found, "the probe script did not run"
    m = json.loads(html.unescape(found.group(1)))
    long = [b for b in m["boxes"] if b["first"] == "setting" and b["rows"] >= 30]
    assert len(long) == 1 and long[0]["wide"], m["boxes"]            # the long table scrolls sideways
    assert [b for b in m["boxes"] if b["wide"] and not (b["scrolls"] and b["height"] <= m["window"])] == []
    assert m["cut"] == []                                             # every figure's text inside its figure
    assert len(m["images"]) >= 3 and all(shown == natural for shown, natural in m["images"]), m["images"]


FIT_PROBE = """<script>addEventListener("load", () => {
  const shown = e => e.getClientRects().length > 0 && !e.closest("details:not([open])");
  const measure = () => [...document.querySelectorAll("table")].filter(shown).map(t => {
    const box = t.parentElement, right = box.getBoundingClientRect().right;
    const cells = [...t.querySelectorAll("th, td")].filter(shown);
    return {first: t.querySelector("th, td").textContent.trim(), cls: t.className, box: box.clientWidth,
      scroll: box.scrollWidth, table: Math.ceil(t.getBoundingClientRect().width), columns: t.rows[0].cells.length,
      headers: [...t.rows[0].cells].filter(shown).map(c => c.textContent.trim()),
      cut: cells.filter(c => c.scrollWidth > c.clientWidth + 1 || c.getBoundingClientRect().right > right + 1)
        .map(c => c.textContent.trim())};
  });
  const before = measure();
  document.getElementById("tradeoff-all").checked = true;
  const long = measure().find(t => t.cls === "data tradeoff");
  document.body.setAttribute("data-probe", JSON.stringify({before, long, window: innerHeight}));
});</script>"""


def test_at_1280_by_800_every_table_fits_its_box_and_the_long_tables_other_columns_show_on_demand(workspace,
                                                                                                   tmp_path):
    """Issue 54, item 4: in the digits report at 1280 × 800 no visible table is wider than its
    box (none scrolls sideways) and no cell's text runs past its cell or the box (no attack
    name cut); the long table shows its compared columns (setting, test acc, AUC, TPR, PPV,
    ε lb, μ and its ε) and, with "Show all columns" ticked, the other 14, scrolling inside its
    box. Measured in the browser by a probe script added to a copy of the page."""
    import json

    doc = (workspace / "reports" / "index.html").read_text()
    probe = tmp_path / "fit.html"
    probe.write_text(doc.replace("</body>", FIT_PROBE + "</body>"))
    dom, console, _ = _open(probe, tmp_path, width=1280, height=800)
    assert console == []
    found = re.search(r'data-probe="([^"]+)"', dom)
    assert found, "the probe script did not run"
    m = json.loads(html.unescape(found.group(1)))
    tables = {t["cls"]: t for t in m["before"]}
    for name in ("data compact verdicts", "data tradeoff", "data compact strongest", "data compact exposure"):
        assert name in tables, (name, list(tables))
    for t in m["before"]:
        assert t["scroll"] <= t["box"] + 1 and t["table"] <= t["box"] + 1, t       # no table wider than its box
        assert t["cut"] == [], t                                                     # no text past its cell
    long = tables["data tradeoff"]
    assert long["headers"] == ["setting", "seed", "ε", "test acc", "attack", "AUC", "TPR @ 1% FPR", "TPR @ 0.1% FPR",
                               "PPV @ 10% prior", "ε lb", "μ (GDP)", "ε (GDP)"]
    assert long["columns"] == len(long["headers"]) + 14
    every = m["long"]
    assert len(every["headers"]) == every["columns"] and every["scroll"] > every["box"], every  # scrolls in its box


def test_theory_page_loads_clean(workspace, tmp_path):
    dom, console, shot = _open(workspace / "reports" / "theory" / "index.html", tmp_path)
    assert console == []
    for name in ("smoothing", "convergence", "federated", "masked-neurons"):
        assert f'id="{name}"' in dom
    assert dom.count('src="data:image/svg+xml;base64,') == 1 + 2 + 3 + 3
    _not_blank(shot)


def test_a_script_planted_in_a_figure_does_not_run(tmp_path):
    from privaudit.reporting.papers import build_page

    folder = tmp_path / "theory"
    folder.mkdir()
    (folder / "evil.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">'
                                     '<script>console.log("planted-script-ran")</script>'
                                     '<rect width="200" height="100" fill="#0072B2"/></svg>')
    (folder / "smoothing.json").write_text('{"title": "t", "caption": "c", "figures": ["evil.svg"]}')
    _, console, _ = _open(build_page(folder), tmp_path)
    assert not any("planted-script-ran" in line for line in console)
