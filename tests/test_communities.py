"""The regression-data loader of the masked-neurons reproduction (privaudit/data/communities.py):
the UCI Communities and Crime folder (the real file when the shared data folder is present),
bad folders built in tmp_path, and .npz sets."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from privaudit.data.communities import (
    COLUMNS,
    NON_PREDICTIVE,
    TARGET,
    load_communities,
    load_npz,
    load_regression,
    locate,
    subset,
)
from privaudit.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parents[1]
#: the shared data folder (beside the project, as benchmarks/README.md uses it), or $PRIVAUDIT_SHARED_DATA
SHARED = Path(os.environ.get("PRIVAUDIT_SHARED_DATA", ROOT.parent / "shared" / "data"))
REAL = SHARED / "communities-and-crime"
SHA256 = "4ef4ea5d75ea95c382cc973af861f85bc91790d62986ba28380f1e8484a43f82"


def write_communities(folder: Path, rows: int = 12, *, missing_columns=(20, 21), seed: int = 0,
                      bad_row: int | None = None, bad_value: tuple[int, int, str] | None = None) -> Path:
    """A synthetic folder in the official layout: ``communities.names`` with 128 @attribute
    lines and ``communities.data`` with ``rows`` rows of 128 values (``?`` in ``missing_columns``
    of the first row); ``bad_row`` (1-based) loses its last value."""
    folder.mkdir(parents=True, exist_ok=True)
    names = list(NON_PREDICTIVE) + [f"attr{j}" for j in range(COLUMNS - len(NON_PREDICTIVE) - 1)] + [TARGET]
    (folder / "communities.names").write_text(
        "Title: synthetic\n\n" + "\n".join(f"@attribute {n} {'string' if n == 'communityname' else 'numeric'}"
                                           for n in names) + "\n\n@data\n", encoding="utf-8")
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(rows):
        values = [f"{v:.2f}" for v in rng.random(COLUMNS)]
        values[:5] = ["8", "?", "?", f"Town{i}", "1"]
        if i == 0:
            for j in missing_columns:
                values[j] = "?"
        if bad_value is not None and i + 1 == bad_value[0]:
            values[bad_value[1]] = bad_value[2]
        if bad_row is not None and i + 1 == bad_row:
            values = values[:-1]
        lines.append(",".join(values))
    (folder / "communities.data").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.mark.skipif(not (REAL / "communities.data").is_file(), reason="the shared Communities and Crime copy is absent")
def test_the_official_file():
    assert hashlib.sha256((REAL / "communities.data").read_bytes()).hexdigest() == SHA256
    d = load_regression(SHARED)          # a data directory holding communities-and-crime/
    assert d.X.shape == (1994, 100) and d.y.shape == (1994,)
    assert len(d.dropped_missing) == 22 and len(d.features) == 100
    assert "ViolentCrimesPerPop" not in d.features and "fold" not in d.features
    assert np.isfinite(d.X).all() and np.isfinite(d.y).all()
    assert d.X.min() >= 0 and d.X.max() <= 1 and d.y.min() >= 0 and d.y.max() <= 1
    X, y, rows = subset(d, 100, seed=0)
    assert X.shape == (100, 100) and np.allclose(np.linalg.norm(X, axis=1), 1.0)
    assert np.array_equal(rows, np.sort(rows)) and len(set(rows)) == 100
    assert np.array_equal(subset(d, 100, seed=0)[2], rows)          # seeded
    assert not np.array_equal(subset(d, 100, seed=1)[2], rows)


def test_a_synthetic_folder(tmp_path):
    folder = write_communities(tmp_path / "communities-and-crime", rows=12)
    d = load_regression(tmp_path)
    assert d.X.shape == (12, 122 - 2) and d.dropped_missing == ("attr15", "attr16")
    assert locate(folder) == folder and load_communities(folder).fingerprint == d.fingerprint
    X, y, rows = subset(d, 100, seed=3)                              # fewer rows than asked: all of them
    assert len(rows) == 12 and np.allclose(np.linalg.norm(X, axis=1), 1.0)


def test_a_row_with_the_wrong_number_of_columns_is_named(tmp_path):
    write_communities(tmp_path, rows=8, bad_row=5)
    with pytest.raises(ConfigError, match=r"communities\.data: row 5 has 127 comma-separated values, expected 128"):
        load_regression(tmp_path)


def test_a_value_that_is_not_a_number_is_named(tmp_path):
    write_communities(tmp_path, rows=8, bad_value=(3, 40, "abc"))
    with pytest.raises(ConfigError, match=r"row 3, attribute attr35: 'abc' is not a number"):
        load_regression(tmp_path)


def test_missing_files(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_regression(tmp_path / "nowhere")
    with pytest.raises(DataError, match="no communities.data"):
        load_regression(tmp_path)
    write_communities(tmp_path, rows=4)
    (tmp_path / "communities.names").unlink()
    with pytest.raises(DataError, match="communities.names is missing"):
        load_regression(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="expected an .npz"):
        load_regression(tmp_path / "notes.txt")


def test_npz(tmp_path):
    rng = np.random.default_rng(0)
    good = tmp_path / "features.npz"
    np.savez(good, X=rng.random((30, 7)), y=rng.random((30, 1)))
    d = load_regression(good)
    assert d.source == "npz" and d.X.shape == (30, 7) and d.y.shape == (30,)
    for name, arrays, match in (("shape", {"X": rng.random((30, 7)), "y": rng.random(29)}, "X must be N × d"),
                                ("flat", {"X": rng.random(30), "y": rng.random(30)}, "X must be N × d"),
                                ("nan", {"X": np.full((5, 2), np.nan), "y": np.zeros(5)}, "finite"),
                                ("keys", {"features": rng.random((5, 2))}, "needs arrays X and y")):
        path = tmp_path / f"{name}.npz"
        np.savez(path, **arrays)
        with pytest.raises(ConfigError, match=match):
            load_npz(path)
