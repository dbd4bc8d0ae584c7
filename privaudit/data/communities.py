"""Regression data for the masked-neurons reproduction (docs/methods/c-masked-neurons.md C.4).

* **UCI Communities and Crime** (Redmond, 2009): a folder holding ``communities.data``
  (1,994 rows of 128 comma-separated values, no header, ``?`` for a missing value) and
  ``communities.names`` (the attribute names in its ``@attribute`` lines). The 5
  non-predictive columns (state, county, community, communityname, fold) are dropped, and
  so is every predictive attribute with a missing value in any row (22 of the 122 in the
  official file), which leaves 100 features; the target is ``ViolentCrimesPerPop``, the
  last column (in [0, 1], as every attribute is normalised by UCI).
* **any regression set** as an ``.npz`` with ``X`` (N × d) and ``y`` (N), finite (the TMLR
  version's ResNet-50 features of CIFAR-10, for instance, which this command cannot make:
  they need pretrained weights).

:func:`subset` draws the ``n`` rows of one seed (without replacement, in file order) and
scales every input row to unit norm, as the theory assumes (‖x‖ = 1).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privaudit.errors import ConfigError, DataError

FOLDER = "communities-and-crime"
DATA_FILE, NAMES_FILE = "communities.data", "communities.names"
COLUMNS = 128
NON_PREDICTIVE = ("state", "county", "community", "communityname", "fold")
TARGET = "ViolentCrimesPerPop"


@dataclass(frozen=True)
class RegressionData:
    """Inputs, targets and where they came from."""

    X: np.ndarray                # (N, d), raw (not yet normalised)
    y: np.ndarray                # (N,)
    features: tuple[str, ...]
    source: str                  # "communities" or "npz"
    path: str
    fingerprint: str             # sha256 of the data file: part of the cache key of every run on it
    dropped_missing: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, int]:
        return self.X.shape


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def locate(data: str | Path) -> Path:
    """The file or folder ``data`` names: an ``.npz`` file, a folder holding
    ``communities.data``, or a folder holding ``communities-and-crime/`` (a data directory)."""
    path = Path(data).expanduser()
    if path.is_file():
        if path.suffix != ".npz":
            raise ConfigError(f"{path}: expected an .npz file (X, y) or a folder holding {DATA_FILE}")
        return path
    if path.is_dir():
        for folder in (path, path / FOLDER):
            if (folder / DATA_FILE).is_file():
                return folder
        raise DataError(f"no {DATA_FILE} in {path} or {path / FOLDER}: point `data_dir` at the folder holding "
                        f"the UCI Communities and Crime files (or at an .npz of X and y)")
    raise DataError(f"{path} does not exist: point `data_dir` at the folder holding the UCI Communities and "
                    f"Crime files (or at an .npz of X and y)")


def attribute_names(path: Path) -> list[str]:
    """The names of the ``@attribute`` lines of ``communities.names``, in order (128 of them)."""
    if not path.is_file():
        raise DataError(f"{path} is missing: the attribute names come from it (UCI's communities.names)")
    names = [line.split()[1] for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
             if line.lower().startswith("@attribute") and len(line.split()) >= 2]
    if len(names) != COLUMNS:
        raise ConfigError(f"{path}: {len(names)} @attribute lines, expected {COLUMNS}")
    if tuple(names[:5]) != NON_PREDICTIVE or names[-1] != TARGET:
        raise ConfigError(f"{path}: the attributes are not those of Communities and Crime (expected "
                          f"{', '.join(NON_PREDICTIVE)} first and {TARGET} last)")
    return names


def load_communities(folder: str | Path) -> RegressionData:
    """The UCI folder: predictive attributes without missing values, target ViolentCrimesPerPop."""
    folder = Path(folder)
    names = attribute_names(folder / NAMES_FILE)
    path = folder / DATA_FILE
    if not path.is_file():
        raise DataError(f"{path} is missing")
    rows: list[list[str]] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            line = line.strip()
            if not line:
                continue
            fields = line.split(",")
            if len(fields) != COLUMNS:
                raise ConfigError(f"{path}: row {number} has {len(fields)} comma-separated values, expected {COLUMNS}")
            rows.append(fields[len(NON_PREDICTIVE):])
    if len(rows) < 2:
        raise ConfigError(f"{path}: {len(rows)} rows, need at least 2")
    raw = np.array(rows, dtype=object)
    missing = raw == "?"
    if missing[:, -1].any():
        row = int(np.flatnonzero(missing[:, -1])[0]) + 1
        raise ConfigError(f"{path}: row {row} has no {TARGET} ('?')")
    keep = ~missing.any(axis=0)
    values = np.empty(raw.shape)
    for j in np.flatnonzero(keep):
        try:
            values[:, j] = raw[:, j].astype(float)
        except ValueError:
            bad = next(i for i, v in enumerate(raw[:, j]) if not _is_number(v))
            raise ConfigError(f"{path}: row {bad + 1}, attribute {names[len(NON_PREDICTIVE) + j]}: "
                              f"{raw[bad, j]!r} is not a number") from None
    predictive = names[len(NON_PREDICTIVE):-1]
    kept = keep[:-1]
    X, y = values[:, :-1][:, kept], values[:, -1]
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ConfigError(f"{path}: a value is not finite")
    return RegressionData(X, y, tuple(n for n, k in zip(predictive, kept) if k), "communities", str(path),
                          _sha256(path), tuple(n for n, k in zip(predictive, kept) if not k))


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def load_npz(path: str | Path) -> RegressionData:
    """An ``.npz`` with ``X`` (N × d) and ``y`` (N, or N × 1), N ≥ 2, every value finite."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            if "X" not in z or "y" not in z:
                raise ConfigError(f"{path}: needs arrays X and y (has {', '.join(sorted(z.files)) or 'none'})")
            X, y = np.asarray(z["X"]), np.asarray(z["y"])
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable .npz ({exc})") from None
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] < 2 or X.shape[1] < 1:
        raise ConfigError(f"{path}: X must be N × d and y of length N (N ≥ 2); got X {X.shape}, y {y.shape}")
    try:
        X, y = X.astype(float), y.astype(float)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: X and y must be numeric") from None
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise ConfigError(f"{path}: X and y must be finite (found NaN or infinity)")
    return RegressionData(X, y, tuple(f"x{j}" for j in range(X.shape[1])), "npz", str(path), _sha256(path))


def load_regression(data: str | Path) -> RegressionData:
    """The data set ``data`` names (:func:`locate`)."""
    path = locate(data)
    return load_npz(path) if path.is_file() else load_communities(path)


def subset(data: RegressionData, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` rows drawn by ``seed`` without replacement (all of them when the set is no larger),
    kept in file order, inputs scaled to ‖x‖ = 1. Returns (X, y, row indices)."""
    N = data.X.shape[0]
    rows = np.arange(N) if N <= n else np.sort(np.random.default_rng([seed, 2112_02668]).choice(N, n, replace=False))
    X = data.X[rows]
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ConfigError(f"{data.path}: row {int(rows[np.flatnonzero(norms[:, 0] == 0)[0]]) + 1} has every "
                          "feature 0 and cannot be scaled to unit norm")
    return X / norms, data.y[rows].astype(float), rows
