"""Loading the image datasets as in-memory arrays.

The loaders return the *pooled* data (for CIFAR-10: the 50,000 training and 10,000 test
images concatenated, in that order) as raw values, because the ML-Leaks protocol pools
them before cutting its four parts (docs/methods/a-mg-noise.md A.3).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from privaudit.core.defaults import CUSTOM_DATASET_PREFIXES, DATA_DIR_ENV, NAMED_DATASETS
from privaudit.data.images import DOWNLOAD_ERRORS, ImageData, _read_batch  # noqa: F401  (re-exported)
from privaudit.errors import DataError, brief

CIFAR_FOLDER = "cifar-10-batches-py"
CIFAR_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST_BATCH = "test_batch"
# The official archive and its MD5 (Krizhevsky's page, as listed by torchvision).
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_MD5 = "c58f30108f718f92721af3b95e74349a"


def load_dataset(name: str, data_dir: str | Path | None = None, download: bool = False) -> ImageData:
    """Load ``digits`` (bundled with scikit-learn), ``cifar10`` (python-pickle batches), one of
    torchvision's ``cifar100``, ``mnist``, ``fashion-mnist``, ``svhn`` (their standard files,
    :mod:`privaudit.data.formats`), or the user's ``npz:PATH`` / ``folder:PATH``
    (:mod:`privaudit.data.custom`)."""
    if name == "digits":
        return load_digits()
    if name == "cifar10":
        return load_cifar10(data_dir, download=download)
    if name in NAMED_DATASETS:
        from privaudit.data.formats import load_named

        return load_named(name, data_dir, download=download)
    if name.startswith(CUSTOM_DATASET_PREFIXES):
        from privaudit.data.custom import load_custom

        return load_custom(name)
    raise DataError(f"unknown dataset {name!r}; expected one of {', '.join(NAMED_DATASETS)}, npz:PATH or folder:PATH")


def load_digits() -> ImageData:
    """scikit-learn's 1,797 8x8 handwritten digits, values 0-16, shape (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits as _load

    bunch = _load()
    x = bunch.images.astype(np.uint8)[:, None, :, :]
    return ImageData("digits", np.ascontiguousarray(x), bunch.target.astype(np.int64), 10)


def find_cifar10(data_dir: str | Path | None) -> Path | None:
    """The ``cifar-10-batches-py`` folder under ``data_dir`` (or ``data_dir`` itself)."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    candidates = [Path(data_dir)] if data_dir is not None else [Path("data")]
    for base in candidates:
        for folder in (base / CIFAR_FOLDER, base):
            if (folder / CIFAR_TEST_BATCH).is_file():
                return folder
    return None


def cifar10_missing(data_dir: str | Path | None) -> str:
    """What to say when CIFAR-10 is not in ``data_dir`` (:func:`find_cifar10` found nothing)."""
    where = data_dir or os.environ.get(DATA_DIR_ENV) or "./data"
    return (f"CIFAR-10 not found in {where}: point `data_dir` (or ${DATA_DIR_ENV}) at the folder holding "
            f"{CIFAR_FOLDER}, add `download` to fetch it, or use `dataset` digits")


def load_cifar10(data_dir: str | Path | None = None, download: bool = False) -> ImageData:
    """CIFAR-10, pooled: 50,000 training then 10,000 test images, shape (60000, 3, 32, 32).

    ``data_dir`` is the folder holding ``cifar-10-batches-py`` (or that folder itself);
    by default ``$PRIVAUDIT_DATA_DIR``, else ``./data``. With ``download`` the official
    archive is fetched through torchvision into ``data_dir`` when it is not found.
    """
    folder = find_cifar10(data_dir)
    if folder is None and download:
        target = Path(data_dir or os.environ.get(DATA_DIR_ENV) or "data")
        _download_cifar10(target)
        folder = find_cifar10(target)
    if folder is None:
        raise DataError(cifar10_missing(data_dir))
    files = [folder / name for name in CIFAR_TRAIN_BATCHES + (CIFAR_TEST_BATCH,)]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise DataError(f"CIFAR-10 batch {missing[0].name} is missing in {folder}")

    def decode() -> ImageData:
        xs, ys = zip(*(_read_batch(f) for f in files))
        return ImageData("cifar10", np.ascontiguousarray(np.concatenate(xs)), np.concatenate(ys), 10)

    from privaudit.data.cache import cached

    return cached("cifar10", files, decode)  # decoded once, memory-mapped after (privaudit.data.cache)


def _download_cifar10(root: Path) -> None:
    """Fetch the official archive with torchvision's downloader, check its MD5, unpack it.

    Only the archive's checksum is verified (by torchvision); the batches are then read by
    :func:`load_cifar10` like any local copy.
    """
    try:
        from torchvision.datasets.utils import download_and_extract_archive

        root.mkdir(parents=True, exist_ok=True)
        download_and_extract_archive(CIFAR_URL, str(root), filename=CIFAR_URL.rsplit("/", 1)[-1], md5=CIFAR_MD5)
    except DOWNLOAD_ERRORS as exc:
        raise DataError(f"could not download CIFAR-10 into {root}: {brief(exc)}") from exc
