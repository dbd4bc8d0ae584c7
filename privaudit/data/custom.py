"""The user's own images: ``--dataset npz:PATH`` and ``--dataset folder:PATH``.

* ``npz:PATH``: an ``.npz`` with ``x``, uint8 images of shape (N, H, W, C) or (N, C, H, W)
  (C = 1 or 3; (N, H, W) for grey images), and ``y``, integer labels 0 … K−1 of shape (N,).
  Read with ``allow_pickle=False``.
* ``folder:PATH``: one sub-folder per class (``PATH/<class>/<image>``), the classes in the
  sorted order of their names, as torchvision's ``ImageFolder`` has them; images read with
  PIL (every format it reads), all of one size, converted to RGB unless every image is
  grey (then one channel).

Both are pooled data: the ML-Leaks protocol cuts its four parts from all N images. A
dataset's *fingerprint* (SHA-256 of its contents: the archive's bytes; or every class
folder, file name and file's bytes) is part of each model's config, so a model is reused
only on the very data it was trained on, and a changed file is caught when an earlier
model is attacked again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from privaudit.errors import DataError, brief
from privaudit.files.npfiles import npz_member, open_npz

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
CHUNK = 1 << 20


def split_spec(name: str) -> tuple[str, Path]:
    """(``npz`` or ``folder``, the path) of a custom dataset name."""
    kind, _, path = name.partition(":")
    if kind not in ("npz", "folder") or not path.strip():
        raise DataError(f"dataset {name!r}: expected npz:PATH or folder:PATH")
    return kind, Path(path)


def _folder_files(root: Path) -> list[tuple[str, Path]]:
    """(class name, image path) for every image under ``root``, classes and files sorted."""
    if not root.is_dir():
        raise DataError(f"folder:{root}: not a folder (expected one sub-folder per class)")
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(classes) < 2:
        raise DataError(f"folder:{root}: needs at least 2 class sub-folders, found {len(classes)}")
    files = []
    for c in classes:
        images = sorted(p for p in c.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise DataError(f"folder:{root}: class folder {c.name!r} holds no images ({', '.join(IMAGE_SUFFIXES)})")
        files += [(c.name, p) for p in images]
    return files


def fingerprint(name: str) -> str:
    """SHA-256 (first 16 hex digits) of a custom dataset's contents."""
    kind, path = split_spec(name)
    h = hashlib.sha256()
    if kind == "npz":
        if not path.is_file():
            raise DataError(f"npz:{path}: no such file")
        _hash_file(h, path)
    else:
        for cls, f in _folder_files(path):
            h.update(f"{cls}/{f.name}\0".encode())
            _hash_file(h, f)
    return h.hexdigest()[:16]


def _hash_file(h, path: Path) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)


def load_custom(name: str):
    """The images of ``npz:PATH`` or ``folder:PATH`` as pooled :class:`ImageData` (uint8 NCHW)."""
    from privaudit.data.images import ImageData

    kind, path = split_spec(name)
    x, y, classes = _read_npz(path) if kind == "npz" else _read_folder(path)
    return ImageData(name, np.ascontiguousarray(x), y, classes, fingerprint(name))


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    label = f"npz:{path}"
    if not path.is_file():
        raise DataError(f"{label}: no such file")
    with open_npz(path, label) as npz:  # a file that is no .npz is refused as what it is (privaudit.files.npfiles)
        missing = [k for k in ("x", "y") if k not in npz.files]
        if missing:
            raise DataError(f"{label}: {_missing(missing[0])}")
        try:
            x, y = npz_member(npz, "x", label), npz_member(npz, "y", label)
        except DataError as exc:
            raise DataError(f"{label}: {exc}") from None
    problem = _x_problem(x.dtype, x.shape)
    if problem:
        raise DataError(f"{label}: {problem}")
    if x.ndim == 3:
        x = x[:, None]
    if x.shape[1] not in (1, 3):
        x = np.transpose(x, (0, 3, 1, 2))  # NHWC → NCHW
    return x, _labels(label, y, len(x)), int(np.max(y)) + 1


def _missing(key: str) -> str:
    return f"no array {key!r} (expected x: uint8 images, y: integer labels)"


def _x_problem(dtype, shape: tuple[int, ...]) -> str | None:
    """Why images of ``dtype`` and ``shape`` are not an ``npz:`` image set's ``x``; None when
    they are."""
    if dtype != np.uint8:
        return f"x must be uint8 pixel values (0-255), got {dtype}"
    if len(shape) not in (3, 4):
        return f"x must have shape (N, H, W, C), (N, C, H, W) or (N, H, W), got {shape}"
    if len(shape) == 4 and shape[1] not in (1, 3) and shape[3] not in (1, 3):
        return f"x must have 1 or 3 channels first or last, got shape {shape}"
    return None


def npz_images_problem(path: Path) -> str | None:
    """Why the ``.npz`` at ``path`` is not an image set, judged from its arrays' headers alone
    (``x`` and ``y`` present, ``x`` uint8 images, ``y`` one label per image), so that
    ``--dataset npz:PATH`` is refused at once, before anything loads; None when the headers
    are right (the labels' values are checked when the data loads)."""
    from privaudit.files.npfiles import npz_headers

    headers = npz_headers(path)
    for key in ("x", "y"):
        if key not in headers:
            return _missing(key)
    (x_shape, x_dtype), (y_shape, _) = headers["x"], headers["y"]
    problem = _x_problem(x_dtype, x_shape)
    if problem:
        return problem
    if len(y_shape) != 1 or y_shape[0] != x_shape[0]:
        return f"y must have shape ({x_shape[0]},), got {y_shape}"
    return None


def _labels(label: str, y: np.ndarray, n: int) -> np.ndarray:
    if y.ndim != 1 or len(y) != n:
        raise DataError(f"{label}: y must have shape ({n},), got {y.shape}")
    if y.dtype.kind not in "iu" and not (y.dtype.kind == "f" and np.all(y == np.round(y))):
        raise DataError(f"{label}: y must hold integer class labels, got {y.dtype}")
    y = y.astype(np.int64)
    if n and y.min() < 0:
        raise DataError(f"{label}: class labels must be >= 0 (found {y.min()})")
    found = np.unique(y)
    if len(found) < 2:
        raise DataError(f"{label}: needs at least 2 classes, found {len(found)}")
    return y


def _read_folder(root: Path) -> tuple[np.ndarray, np.ndarray, int]:
    from PIL import Image, UnidentifiedImageError

    label = f"folder:{root}"
    files = _folder_files(root)
    classes = sorted({c for c, _ in files})
    index = {c: i for i, c in enumerate(classes)}
    images, modes = [], set()
    for _, f in files:
        try:
            with Image.open(f) as im:
                im.load()
                modes.add("L" if im.mode in ("1", "L", "I;16", "I", "F") else "RGB")
                images.append(im.copy())
        except (UnidentifiedImageError, OSError) as exc:
            raise DataError(f"{label}: cannot read image {f.relative_to(root)} ({brief(exc)})") from None
    mode = "L" if modes == {"L"} else "RGB"
    size = images[0].size
    arrays = []
    for (_, f), im in zip(files, images):
        if im.size != size:
            raise DataError(f"{label}: image {f.relative_to(root)} is {im.size[0]}x{im.size[1]}, the first is "
                            f"{size[0]}x{size[1]}: every image must have one size")
        a = np.asarray(im.convert(mode), dtype=np.uint8)
        arrays.append(a[None] if a.ndim == 2 else np.transpose(a, (2, 0, 1)))
    y = np.array([index[c] for c, _ in files], dtype=np.int64)
    return np.stack(arrays), y, len(classes)
