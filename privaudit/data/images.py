"""What every loader returns (:class:`ImageData`), the safe reader of the CIFAR
python-pickle batches that the CIFAR-10 and CIFAR-100 loaders share, and how their downloads
fail (:data:`DOWNLOAD_ERRORS`). It imports nothing else
of :mod:`privaudit.data`, so that the loaders, the formats and the cache all build on it
without an import circle."""

from __future__ import annotations

import http.client
import pickle
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privaudit.errors import DataError, brief

#: how a download through torchvision fails: torchvision missing (ImportError), the network or disk
#: (OSError, urllib's errors among them), a broken HTTP reply (HTTPException), a bad checksum or too
#: many redirects (RuntimeError), a URL it cannot use (ValueError), a damaged archive (EOFError,
#: tarfile, zlib); anything else is a bug and propagates
DOWNLOAD_ERRORS = (ImportError, OSError, RuntimeError, ValueError, EOFError, tarfile.TarError, zlib.error,
                   http.client.HTTPException)


@dataclass(frozen=True)
class ImageData:
    """A pooled image dataset.

    x: raw pixel values, shape (N, C, H, W), uint8 (0-255 for CIFAR-10, 0-16 for digits).
    y: integer labels, shape (N,), int64.
    fingerprint: SHA-256 prefix of the contents of the user's own data (``npz:``/``folder:``),
    "" for the datasets privaudit knows by name.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    num_classes: int
    fingerprint: str = ""  # the user's own data only (privaudit.data.custom)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.x.shape[1:])  # type: ignore[return-value]


class _BatchUnpickler(pickle.Unpickler):
    """Unpickler for the CIFAR-10 batches that refuses every class but numpy's arrays.

    The batches are dicts of lists, bytes and numpy arrays; a file that asks for any other
    callable (e.g. ``os.system``) is refused instead of executed.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 store bytes
    }

    def find_class(self, module: str, name: str):  # noqa: D401
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_batch(path: Path, label_key: str = "labels", classes: int = 10,
                what: str = "CIFAR-10 batch") -> tuple[np.ndarray, np.ndarray]:
    """One python-pickle batch of the CIFAR datasets (``data`` rows of 3,072 bytes and the
    labels under ``label_key``, in [0, ``classes``)), as (N, 3, 32, 32) uint8 and (N,) int64."""
    try:
        with open(path, "rb") as fh:
            batch = _BatchUnpickler(fh, encoding="latin1").load()
        data = np.asarray(batch["data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int64)
    except FileNotFoundError as exc:
        raise DataError(f"{what} {path.name} is missing in {path.parent}") from exc
    except Exception as exc:  # unpickling damaged bytes can raise any type: each is a bad file
        raise DataError(f"cannot read {what} {path}: {brief(exc)}") from exc
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise DataError(f"{what} {path} has an unexpected layout {data.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise DataError(f"{what} {path} has labels outside 0-{classes - 1}")
    return data.reshape(-1, 3, 32, 32), labels
