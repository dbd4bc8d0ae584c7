"""Decode a dataset once: a checksummed uint8 array cache, memory-mapped on later runs.

Reading CIFAR-10 means unpickling six batches and concatenating 184 MB, on every run
(docs/performance.md). The first run writes the decoded arrays as ``x.npy`` and ``y.npy``
with ``meta.json`` (shapes, class count, the SHA-256 of both files) under the cache folder
(``$PRIVAUDIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/privaudit``, else ``~/.cache/privaudit``),
in a sub-folder named after the dataset and a signature of its source files (name, size and
modification time of each): a changed source file gives another signature, so the cache is
rebuilt. Later runs check both files against their SHA-256 and memory-map ``x.npy``;
a cache that fails the check is one :class:`~privaudit.errors.DataError` naming the folder
(it is never trusted, and nothing else is touched: delete it to rebuild).

``PRIVAUDIT_CACHE_DIR=off`` turns the cache off. A cache folder that cannot be written (a
read-only or full disk) is skipped: the decoded data are used as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from privaudit.errors import DataError, brief
from privaudit.files.atomic import shared_mode

if TYPE_CHECKING:
    from privaudit.data.images import ImageData

CACHE_ENV = "PRIVAUDIT_CACHE_DIR"
SCHEMA = 1
CHUNK = 1 << 22


def cache_root() -> Path | None:
    """The cache folder, or None when ``$PRIVAUDIT_CACHE_DIR`` is ``off``."""
    env = os.environ.get(CACHE_ENV)
    if env == "off":
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "privaudit"


def source_signature(files: list[Path]) -> str:
    """16 hex digits over each source file's name, size and modification time (ns)."""
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def cached(name: str, files: list[Path], decode: Callable[[], ImageData]) -> ImageData:
    """``decode()``'s data, from the cache when it holds them for exactly these ``files``."""
    root = cache_root()
    if root is None:
        return decode()
    folder = root / f"{name}-{source_signature(files)}"
    if (folder / "meta.json").is_file():
        return _load(name, folder)
    data = decode()
    try:
        _write(folder, data)
    except OSError:
        pass  # an unwritable cache costs the next run a decode, nothing else
    return data


def _load(name: str, folder: Path):
    from privaudit.data.images import ImageData

    damaged = f"the {name} cache {folder} is damaged"
    try:
        meta = json.loads((folder / "meta.json").read_text())
        for key in ("x", "y"):
            if _sha256(folder / f"{key}.npy") != meta[f"{key}_sha256"]:
                raise DataError(f"{damaged} ({key}.npy does not match its checksum): delete the folder and rerun "
                                "to rebuild it")
        x = np.load(folder / "x.npy", mmap_mode="r", allow_pickle=False)
        y = np.load(folder / "y.npy", allow_pickle=False)
        if meta.get("schema") != SCHEMA or list(x.shape) != meta["x_shape"] or len(y) != len(x):
            raise DataError(f"{damaged} (its arrays do not match meta.json): delete the folder and rerun to rebuild it")
        return ImageData(name, x, y, int(meta["num_classes"]))
    except DataError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{damaged} ({type(exc).__name__}: {brief(exc, 160)}): delete the folder and "
                        "rerun to rebuild it") from None


def _write(folder: Path, data) -> None:
    """The cache folder, written under a temporary name and renamed when complete."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        shared_mode(tmp, folder=True)
        np.save(tmp / "x.npy", np.ascontiguousarray(data.x, dtype=np.uint8), allow_pickle=False)
        np.save(tmp / "y.npy", np.asarray(data.y, dtype=np.int64), allow_pickle=False)
        meta = {"schema": SCHEMA, "name": data.name, "x_shape": list(data.x.shape),
                "num_classes": int(data.num_classes),
                "x_sha256": _sha256(tmp / "x.npy"), "y_sha256": _sha256(tmp / "y.npy")}
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in folder.parent.glob(f"{folder.name.rsplit('-', 1)[0]}-*"):  # earlier versions of the same source
        if old != folder and old.is_dir() and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
