"""torchvision's other small image datasets, read from their standard files.

Each reader returns the *pooled* data (training images, then test images) as uint8
(N, C, H, W), like :func:`privaudit.data.loaders.load_cifar10`, and reads the files that
torchvision's dataset classes download, in their layout under ``--data-dir``:

| dataset | files | classes |
| --- | --- | --- |
| ``cifar100`` | ``cifar-100-python/train``, ``cifar-100-python/test`` (python pickles; ``fine_labels``) | 100 |
| ``mnist`` | ``MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte`` (or ``.gz``) | 10 |
| ``fashion-mnist`` | ``FashionMNIST/raw/`` with the same four IDX files | 10 |
| ``svhn`` | ``train_32x32.mat``, ``test_32x32.mat`` (MATLAB; label 10 means the digit 0) | 10 |

Nothing is unpickled but numpy arrays (CIFAR-100's batches go through the same restricted
unpickler as CIFAR-10's), the IDX files are parsed by their header, and the MATLAB files
by ``scipy.io.loadmat``. ``--download`` fetches them through torchvision.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from privaudit.core.defaults import DATA_DIR_ENV
from privaudit.data.images import DOWNLOAD_ERRORS
from privaudit.errors import DataError, brief

# name → torchvision's dataset class (for --download)
TORCHVISION_CLASSES = {"cifar100": "CIFAR100", "mnist": "MNIST", "fashion-mnist": "FashionMNIST", "svhn": "SVHN"}
IDX_FOLDERS = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}
IDX_FILES = (("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))
CIFAR100_FOLDER = "cifar-100-python"
SVHN_FILES = ("train_32x32.mat", "test_32x32.mat")


def _root(data_dir: str | Path | None) -> Path:
    return Path(data_dir or os.environ.get(DATA_DIR_ENV) or "data")


LOOKED_FOR = {"cifar100": f"{CIFAR100_FOLDER}/train and /test", "mnist": "MNIST/raw/t10k-images-idx3-ubyte",
              "fashion-mnist": "FashionMNIST/raw/t10k-images-idx3-ubyte", "svhn": " and ".join(SVHN_FILES)}


def load_named(name: str, data_dir: str | Path | None = None, download: bool = False):
    """``cifar100``, ``mnist``, ``fashion-mnist`` or ``svhn`` as pooled :class:`ImageData`."""
    root = _root(data_dir)
    data = _cached_read(name, root)
    if data is None and download:
        _download(name, root)
        data = _cached_read(name, root)
    if data is None:
        raise DataError(f"{name} not found in {data_dir or os.environ.get(DATA_DIR_ENV) or './data'} (looked for "
                        f"{LOOKED_FOR[name]}): point `data_dir` (or ${DATA_DIR_ENV}) at the folder holding it, or add "
                        "`download` to fetch it")
    return data


def _cached_read(name: str, root: Path):
    """The dataset's files decoded once (:mod:`privaudit.data.cache`), or None when absent."""
    from privaudit.data.cache import cached

    reader = {"cifar100": _cifar100, "mnist": _idx, "fashion-mnist": _idx, "svhn": _svhn}[name]
    files = _source_files(name, root)
    if files is None:
        return None
    return cached(name, files, lambda: reader(name, root))


def _source_files(name: str, root: Path) -> list[Path] | None:
    """The files a reader reads for ``name`` under ``root`` (None when they are not there)."""
    if name == "cifar100":
        folder = next((f for f in (root / CIFAR100_FOLDER, root) if (f / "test").is_file() and (f / "train").is_file()),
                      None)
        return None if folder is None else [folder / "train", folder / "test"]
    if name == "svhn":
        folder = next((f for f in (root, root / "svhn", root / "SVHN") if (f / SVHN_FILES[1]).is_file()), None)
        return None if folder is None else [folder / f for f in SVHN_FILES if (folder / f).is_file()]
    folder = _idx_folder(name, root)
    if folder is None:
        return None
    return [p for stem in (s for pair in IDX_FILES for s in pair)
            for p in (folder / stem, folder / f"{stem}.gz") if p.is_file()]


def _idx_folder(name: str, root: Path) -> Path | None:
    sub = IDX_FOLDERS[name]
    stem = IDX_FILES[1][0]
    return next((f for f in (root / sub / "raw", root / sub, root / name, root)
                 if (f / stem).is_file() or (f / f"{stem}.gz").is_file()), None)


def _download(name: str, root: Path) -> None:
    """Fetch ``name`` with torchvision's downloader (and its checksums) into ``root``."""
    try:
        import torchvision.datasets as tvd

        root.mkdir(parents=True, exist_ok=True)
        cls = getattr(tvd, TORCHVISION_CLASSES[name])
        splits = [{"split": s} for s in ("train", "test")] if name == "svhn" else [{"train": t} for t in (True, False)]
        for kw in splits:
            cls(str(root), download=True, **kw)
    except DOWNLOAD_ERRORS as exc:
        raise DataError(f"could not download {name} into {root}: {brief(exc)}") from exc


# -- CIFAR-100 ---------------------------------------------------------------------------------

def _cifar100(name: str, root: Path):
    from privaudit.data.images import ImageData, _read_batch

    folder = next((f for f in (root / CIFAR100_FOLDER, root) if (f / "test").is_file() and (f / "train").is_file()),
                  None)
    if folder is None:
        return None
    parts = [_read_batch(folder / part, "fine_labels", 100, "CIFAR-100 file") for part in ("train", "test")]
    xs, ys = zip(*parts)
    return ImageData(name, np.ascontiguousarray(np.concatenate(xs)), np.concatenate(ys), 100)


# -- MNIST and Fashion-MNIST (IDX files) -------------------------------------------------------

def _open_idx(folder: Path, stem: str) -> bytes | None:
    for candidate, opener in ((folder / stem, open), (folder / f"{stem}.gz", gzip.open)):
        if candidate.is_file():
            with opener(candidate, "rb") as fh:
                return fh.read()
    return None


def parse_idx(raw: bytes, what: str) -> np.ndarray:
    """An IDX array (LeCun's format): magic 0x0000 0x08 (uint8) and the number of dimensions,
    then each dimension as a big-endian uint32, then the data."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{what} is not an IDX file of unsigned bytes")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{what} is truncated (its header)")
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    size = int(np.prod(shape, dtype=np.int64))
    if len(raw) - header != size:
        raise DataError(f"{what} holds {len(raw) - header} bytes of data where its header says {size}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _idx(name: str, root: Path):
    from privaudit.data.images import ImageData

    folder = _idx_folder(name, root)
    if folder is None:
        return None
    xs, ys = [], []
    for images, labels in IDX_FILES:
        raw_x, raw_y = _open_idx(folder, images), _open_idx(folder, labels)
        if raw_x is None or raw_y is None:
            raise DataError(f"{name}: {images if raw_x is None else labels} is missing in {folder}")
        x, y = parse_idx(raw_x, f"{folder / images}"), parse_idx(raw_y, f"{folder / labels}")
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y) or (y.size and y.max() > 9):
            raise DataError(f"{name}: {folder / images} and its labels do not match ({x.shape}, {y.shape})")
        xs.append(x[:, None])
        ys.append(y.astype(np.int64))
    return ImageData(name, np.ascontiguousarray(np.concatenate(xs)), np.concatenate(ys), 10)


# -- SVHN (MATLAB files) ------------------------------------------------------------------------

def _svhn(name: str, root: Path):
    from scipy.io import loadmat

    from privaudit.data.images import ImageData

    folder = next((f for f in (root, root / "svhn", root / "SVHN") if (f / SVHN_FILES[1]).is_file()), None)
    if folder is None:
        return None
    xs, ys = [], []
    for fname in SVHN_FILES:
        path = folder / fname
        try:
            mat = loadmat(path)
            x, y = np.asarray(mat["X"]), np.asarray(mat["y"]).ravel().astype(np.int64)
        except Exception as exc:  # scipy's MAT reader raises many types for a damaged file: each is a bad file
            raise DataError(f"cannot read SVHN file {path}: {brief(exc)}") from exc
        if (x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != len(y)
                or (y.size and (y.min() < 1 or y.max() > 10))):
            raise DataError(f"SVHN file {path} has an unexpected layout {x.shape}")
        xs.append(np.transpose(x, (3, 2, 0, 1)).astype(np.uint8))  # (H, W, C, N) → (N, C, H, W)
        ys.append(np.where(y == 10, 0, y))  # SVHN writes the digit 0 as class 10
    return ImageData(name, np.ascontiguousarray(np.concatenate(xs)), np.concatenate(ys), 10)
