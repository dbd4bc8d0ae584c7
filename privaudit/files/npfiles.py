"""The user's NumPy files (``.npz`` archives, ``.npy`` arrays), read safely and, when a file
is not what its name says, refused with what it actually is.

``np.load(..., allow_pickle=False)`` takes any file that is neither an ``.npy`` nor a zip for
a pickle and answers "This file contains pickled (object) data. If you trust the file you can
load it unsafely using the `allow_pickle=` keyword argument": for a text file named ``.npz``
that is the wrong cause, and advice privaudit must never pass on. So the first bytes of a file
are looked at before NumPy reads it: a file that is not a zip (``.npz``) or has no ``.npy``
header is refused as "not a NumPy .npz archive (a zip of .npy files): it holds text" (or is
empty, a single ``.npy``, a Python pickle, …). Only a genuine object array inside a valid
file gets :data:`OBJECTS`, and no advice to enable pickle: nothing here ever unpickles.

This module loads NumPy only when it reads an array, so a file can be checked
(:func:`npz_problem`) before anything heavy is imported.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from privaudit.errors import DataError, brief

NPY_MAGIC = b"\x93NUMPY"
#: a zip's first local file header, or the end record of an empty zip (as np.load tells them)
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
#: what is said of an object array (np.save pickles one): refused, never unpickled
OBJECTS = "holds Python objects, which privaudit does not load (unsafe); store numbers or strings"
_HEAD = 64


def npz_bytes(arrays: Any, compressed: bool = False) -> bytes:
    """``arrays`` (a mapping of names to arrays) as an ``.npz`` archive's bytes, compressed or
    not, for an atomic write; plain numeric arrays, so it loads without pickle."""
    import io

    import numpy as np

    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD)
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def what_is(head: bytes) -> str:
    """What a file is, judged by its first bytes (for a file that is not what its name says)."""
    if not head:
        return "empty (0 bytes)"
    if head.startswith(NPY_MAGIC):
        return "a single .npy array"
    if head.startswith(ZIP_MAGICS):
        return "a zip archive"
    if head[:1] == b"\x80":
        return "a Python pickle"
    if head[:2] == b"\x1f\x8b":
        return "gzip-compressed"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:  # a multi-byte character cut at the end is still text
        try:
            text = head[:-3].decode("utf-8")
        except UnicodeDecodeError:
            return "unrecognised binary data"
    if all(c.isprintable() or c in "\t\r\n" for c in text):
        return "text"
    return "unrecognised binary data"


def npz_problem(path: str | Path) -> str | None:
    """Why ``path`` is not an ``.npz`` archive (a phrase), or None when it is a readable zip."""
    p = Path(path)
    head = _head(p)
    if head.startswith(ZIP_MAGICS):
        if zipfile.is_zipfile(p):
            return None
        return "a damaged or truncated .npz archive (its zip directory cannot be read)"
    return f"not a NumPy .npz archive (a zip of .npy files): it is {what_is(head)}"


def npz_headers(path: str | Path) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Each ``.npy`` member of an ``.npz`` (its key) → (shape, dtype), read from the member's
    header alone: no array is loaded, so a large file is checked in milliseconds. A member
    whose header cannot be read here is left out (loading it says what is wrong)."""
    import numpy as np

    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    out: dict[str, tuple[tuple[int, ...], Any]] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with archive.open(info) as fh:
                    try:
                        read = readers.get(np.lib.format.read_magic(fh))
                        if read is not None:
                            shape, _, dtype = read(fh)
                            out[info.filename[:-4]] = (tuple(shape), dtype)
                    except (ValueError, OSError, EOFError):
                        continue
    except (OSError, zipfile.BadZipFile):
        return {}
    return out


def open_npz(path: str | Path, label: str):
    """``np.load(path, allow_pickle=False)`` of an ``.npz`` (use it as a context manager), or
    one :class:`DataError` starting with ``label`` that says what the file is instead."""
    problem = npz_problem(path)
    if problem is not None:
        raise DataError(f"{label}: {problem}")
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{label}: a damaged .npz archive ({brief(exc)})") from None


def npz_member(npz, key: str, where: str):
    """The array ``key`` of an open ``.npz`` archive, or a :class:`DataError` naming the key:
    an object array (:data:`OBJECTS`), a member that is not an ``.npy`` array, a damaged one."""
    import numpy as np

    try:
        value = npz[key]
    except ValueError as exc:
        if "Object arrays cannot be loaded" in str(exc):
            raise DataError(f"{key}: {OBJECTS}") from None
        raise DataError(f"{key}: damaged in {where} ({brief(exc)})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{key}: damaged in {where} ({brief(exc)})") from None
    if not isinstance(value, np.ndarray):  # NumPy hands back the raw bytes of a non-.npy member
        raise DataError(f"{key}: not a NumPy array inside {where} (no .npy header)")
    return value


def load_npy(path: str | Path, label: str):
    """``np.load(path, allow_pickle=False)`` of an ``.npy`` file, or one :class:`DataError`
    starting with ``label``: not an .npy (what it is instead), an object array, damaged."""
    p = Path(path)
    head = _head(p)
    if not head.startswith(NPY_MAGIC):
        kind = what_is(head)
        hint = " (an .npz archive? name it .npz)" if kind == "a zip archive" else ""
        raise DataError(f"{label}: not a NumPy .npy file: it is {kind}{hint}")
    import numpy as np

    try:
        return np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "Object arrays cannot be loaded" in str(exc):
            raise DataError(f"{label}: {OBJECTS}") from None
        raise DataError(f"{label}: a damaged or truncated .npy file ({brief(exc)})") from None
    except (OSError, EOFError) as exc:
        raise DataError(f"{label}: a damaged or truncated .npy file ({brief(exc)})") from None


def ids_problem(text: str, what: str) -> str | None:
    """Why a sample-indices argument (``--members``: an .npy or text file, a range ``a:b`` or a
    list ``i,j,k``) cannot be read, judged from the file system and a file's first bytes: it
    names a file that does not exist, a folder, or an ``.npy`` that is not one. None when it
    may be read (the reader then checks the indices themselves)."""
    p = Path(text)
    forms = "give an .npy or text file of sample indices, a range a:b or a list i,j,k"
    if p.is_dir():
        return f"{what}: {p} is a folder; {forms}"
    if p.is_file():
        head = _head(p)
        if p.suffix.lower() == ".npy" and not head.startswith(NPY_MAGIC):
            return f"{what} {p}: not a NumPy .npy file: it is {what_is(head)}"
        return None
    inline = text.replace(",", " ").replace(":", " ").split()
    if inline and all(part.lstrip("-").isdigit() for part in inline):
        return None
    if p.suffix.lower() in (".npy", ".txt", ".csv", ".tsv") or "/" in text or "\\" in text:
        return f"{what}: file {p} does not exist ({forms})"
    return None
