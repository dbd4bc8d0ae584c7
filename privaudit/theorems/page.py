"""``reports/theory/``: each experiment's CSV, SVG figure and summary, and one HTML page
(drawn by :mod:`privaudit.reporting.papers`).

Every experiment writes ``<name>.csv`` (the numbers), ``<name>.svg`` (its figure, labelled
axes) and ``<name>.json`` (its summary and caption); ``index.html`` is rebuilt from every
summary present, so experiments can run separately and the page always shows them all.
All files are written atomically.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from privaudit.files.atomic import write_json, write_text
from privaudit.reporting.papers import THEORY_FOLDER, build_page


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
