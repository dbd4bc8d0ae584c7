"""``privaudit scan``: membership-inference audit of a model from its outputs alone (docs/scan.md).

This package's own module loads nothing heavy (not even NumPy): what a scan writes, and the
first check of its input, answer before anything is imported."""

from __future__ import annotations

from pathlib import Path

from privaudit.errors import DataError

#: the files a scan (and ``audit-model``) writes into its results folder (:mod:`privaudit.scanning.report`)
FILES = ("attacks.csv", "groups.csv", "scores.npz", "roc.svg", "summary.json", "index.html")


def require_input(path: str | Path) -> Path:
    """``path`` when it exists, else the :class:`DataError` a missing scan input gets."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"scan input {p} does not exist")
    return p
