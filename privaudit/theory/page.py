"""``reports/theory/``: each experiment's CSV, SVG figure and summary, and one HTML page.

Every experiment writes ``<name>.csv`` (the numbers), ``<name>.svg`` (its figure, labelled
axes) and ``<name>.json`` (its summary and caption); ``index.html`` is rebuilt from every
summary present, so experiments can run separately and the page always shows them all.
All files are written atomically.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

from privaudit.atomic import read_json, write_json, write_text
from privaudit.report.html import _CSS

THEORY_FOLDER = ("reports", "theory")
#: What each experiment reproduces, for the main report's "Papers' figures" section.
FIGURES = {
    "smoothing": "Figures 1–2 of the MG-noise paper: the expected ReLU under a Gaussian mask, closed form vs "
                 "Monte Carlo and the theorems' proxy",
    "convergence": "Figure 3(a) of the MG-noise paper: gradient descent under input masks converges linearly to "
                   "an error floor that grows with κ",
    "federated": "Figure 3(b) of the MG-noise paper: federated training with masked inputs, over κ and the "
                 "number of local steps",
    "masked-neurons": "The masked-neurons paper (dropout, multi-sample dropout, IST): final error over (p, ξ) "
                      "and over (p, τ)",
}
ORDER = tuple(FIGURES)  # the page's order


def theory_dir(workdir: Path) -> Path:
    folder = Path(workdir).joinpath(*THEORY_FOLDER)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_experiment(workdir: Path, name: str, table: pd.DataFrame, svgs: list[str], summary: dict,
                    extra_tables: dict[str, pd.DataFrame] | None = None) -> dict:
    """Write the experiment's files and rebuild the page; returns the paths written.

    ``extra_tables`` are written as ``<name>-<key>.csv`` next to ``<name>.csv``."""
    folder = theory_dir(workdir)
    write_text(folder / f"{name}.csv", table.to_csv(index=False))
    tables = [f"{name}.csv"]
    for key, extra in (extra_tables or {}).items():
        write_text(folder / f"{name}-{key}.csv", extra.to_csv(index=False))
        tables.append(f"{name}-{key}.csv")
    figures = []
    for i, svg in enumerate(svgs):
        fname = f"{name}.svg" if i == 0 else f"{name}-{i + 1}.svg"
        write_text(folder / fname, svg)
        figures.append(fname)
    write_json(folder / f"{name}.json", {**summary, "figures": figures, "tables": tables})
    page = build_page(folder)
    return {"csv": str(folder / f"{name}.csv"), "tables": [str(folder / t) for t in tables],
            "figures": [str(folder / f) for f in figures], "html": str(page)}




def _names(folder: Path) -> list[str]:
    return sorted((p.stem for p in folder.glob("*.json")) if folder.is_dir() else [],
                  key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


_FIGURE_NAME = re.compile(r"[A-Za-z0-9_.-]+\.svg")


def _figure(folder: Path, name: str, title: str) -> str:
    """One saved figure as an ``<img>`` with the SVG inlined as a data URI: the page stays
    self-contained, and a script someone slipped into a file on disk cannot run (browsers do
    not run scripts of SVG images). Only plain file names inside ``folder`` are read."""
    if not isinstance(name, str) or not _FIGURE_NAME.fullmatch(name) or not (folder / name).is_file():
        return ""
    data = base64.b64encode((folder / name).read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(title)}" src="data:image/svg+xml;base64,{data}"></figure>'


def _section(folder: Path, name: str, anchor: str, heading: str) -> str:
    s = read_json(folder / f"{name}.json")
    s = s if isinstance(s, dict) else {}
    title = str(s.get("title", name))
    tables = ", ".join(f"<code>{html.escape(str(t))}</code>" for t in s.get("tables", [f"{name}.csv"]))
    figs = "".join(_figure(folder, f, title) for f in s.get("figures", []))
    return (f'<section id="{html.escape(anchor)}"><{heading}>{html.escape(title)}</{heading}>'
            f'<p>{html.escape(str(s.get("caption", "")))}</p><div class="plots">{figs}</div>'
            f'<p class="muted">Numbers: {tables}.</p></section>')


def papers_section(folder: Path) -> str:
    """The main report's "Papers' figures": one part per reproduced figure, with its plots
    when ``privaudit theory`` has run (read from ``folder``), else the command that makes it."""
    present = set(_names(folder))
    parts = []
    for name, what in FIGURES.items():
        if name in present:
            parts.append(_section(folder, name, f"paper-{name}", "h3"))
        else:
            parts.append(f'<section id="paper-{name}"><h3>{html.escape(what)}</h3><p class="empty">Not run yet: '
                         f'<code>privaudit theory {name}</code> (or <code>privaudit theory all</code>).</p></section>')
    return ('<section id="papers"><h2>Papers\' figures</h2><p class="muted">The theory behind the defences, '
            'reproduced as experiments (also on <a href="theory/index.html">their own page</a>): '
            + "; ".join(html.escape(w) for w in FIGURES.values()) + ".</p>" + "".join(parts) + "</section>")


def build_page(folder: Path) -> Path:
    """``index.html`` with one section per experiment summary found in ``folder``."""
    sections = [_section(folder, name, name, "h2") for name in _names(folder)]
    body = "".join(sections) or '<p class="empty">No theory experiment has been run yet.</p>'
    page = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>privaudit theory</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            "<header><h1>privaudit theory</h1><p class=\"muted\">The papers' theory as experiments "
            "(docs/methods.md A.2 and C), each seeded and rerun by <code>privaudit theory NAME</code>.</p></header>\n"
            f"{body}\n<footer>Generated by privaudit; self-contained, loads nothing from the network."
            "</footer>\n</main>\n</body>\n</html>\n")
    write_text(folder / "index.html", page)
    return folder / "index.html"
