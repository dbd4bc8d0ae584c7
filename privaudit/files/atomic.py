"""Atomic writes: a reader sees either the old file or the complete new one, never a part.

Every file privaudit writes goes through these helpers: the content is written to a
temporary file in the destination folder, flushed to disk, then moved over the final
name with ``os.replace`` (atomic on POSIX within one file system). A command checks the
output paths it was given before any work (:func:`check_output_folder`,
:func:`check_output_file`), so a path that cannot be written is refused at once, not after
the computation.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from privaudit.errors import ArtifactError, ConfigError, write_error


def owner_tag() -> str:
    """``<pid>@<host>``: who owns a temporary folder, as its name records it (the host with
    ``-`` and ``@`` made ``_``, so the tag holds no ``-``)."""
    return f"{os.getpid()}@{socket.gethostname().replace('-', '_').replace('@', '_')}"


def folder_owner(name: str, prefix: str) -> tuple[int, str | None] | None:
    """The (pid, host) that a folder named ``<prefix><pid>[@<host>]-…`` records (host None:
    a name written before folders recorded their host), None for other names."""
    if not name.startswith(prefix):
        return None
    pid, _, host = name[len(prefix):].split("-", 1)[0].partition("@")
    return (int(pid), host or None) if pid.isdigit() else None


def remove_orphans(parent: Path, prefix: str) -> None:
    """Remove the ``<prefix><owner_tag>-…`` folders in ``parent`` that processes of this host
    left behind when they died (killed mid-write). Folders of live processes, and of other
    hosts (``parent`` on a file system that several machines share), are left alone."""
    here = owner_tag().split("@", 1)[1]
    for folder in Path(parent).glob(f"{prefix}*"):
        owner = folder_owner(folder.name, prefix)
        if owner is None or owner[1] not in (None, here) or owner[0] == os.getpid():
            continue
        try:
            os.kill(owner[0], 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # PermissionError: alive, another user's
            continue


def umask() -> int:
    """The process's umask (the system call reads it only by setting it, so it is set back at
    once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_mode(path: Path | int, folder: bool = False) -> None:
    """Give a file (a path or an open descriptor) or a folder that :mod:`tempfile` made private
    (0600, 0700) the permissions ``open()`` or ``mkdir()`` would have given it: 0666 or 0777
    less the umask, so a report or a model is as readable as any other file the user writes."""
    mode = (0o777 if folder else 0o666) & ~umask()
    if isinstance(path, int):
        os.fchmod(path, mode)
    else:
        os.chmod(path, mode)


def _write_via_temp(path: Path, write: Callable[[Any], None], binary: bool) -> None:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(f"cannot write {path}: {exc.strerror or exc}", exc) from exc
    try:
        text: dict[str, Any] = {} if binary else {"encoding": "utf-8"}
        with os.fdopen(fd, "wb" if binary else "w", **text) as fh:
            write(fh)
            fh.flush()
            shared_mode(fh.fileno())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _remove_quietly(tmp)
        raise write_error(f"cannot write {path}: {exc.strerror or exc}", exc) from exc
    except BaseException:
        _remove_quietly(tmp)
        raise


# -- output paths checked before any work ------------------------------------------------------

def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (the folder where writing would begin)."""
    p = path
    while not p.exists() and not p.is_symlink() and p != p.parent:
        p = p.parent
    return p


def _probe(folder: Path, option: str, path: Path) -> None:
    """Create and remove a temporary file in ``folder``: the test that files can be written
    there (permissions, a read-only file system), as the writes themselves would do it; if
    not, an error naming ``option``: :class:`UnwritableError` (exit status 1) when the machine
    refused, an :class:`ArtifactError` (2) when the path is wrong (:func:`write_error`)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".privaudit-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise write_error(f"{option} {path}: folder {folder} is not writable ({exc.strerror or exc})", exc) from None


def _creatable(path: Path, option: str, what: str) -> None:
    """The folders missing on the way to ``path`` can be created: the nearest one that exists
    is a folder (not a file) and is writable."""
    base = _nearest_existing(path.parent if what == "file" else path)
    if base.is_symlink() and not base.exists():
        raise ConfigError(f"{option} {path}: {base} is a broken symbolic link")
    if not base.is_dir():
        raise ConfigError(f"{option} {path}: {base} is a file, not a folder, so the {what} cannot be created "
                          "under it")
    _probe(base, option, path)


def check_output_folder(path: str | Path, option: str = "`out`", files: tuple[str, ...] = ()) -> Path:
    """Refuse, before any work, a results folder that could not be written: ``path`` is an
    existing file; one of the ``files`` to be written in it is a folder; a folder on the way
    is a file; or the folder where writing would begin is not writable. A folder that does
    not exist yet is fine (it is created, with its parents, when the results are written).
    Raises :class:`ConfigError` (the command line's exit status 2) naming ``option``, or
    :class:`~privaudit.errors.UnwritableError` (exit status 1) when the folder is not writable."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{option} {p} is an existing file, not a folder; give a new folder or an existing one")
    for name in files:
        if (p / name).is_dir():
            raise ConfigError(f"{option} {p}: {p / name} is a folder, where the file {name} is to be written")
    _creatable(p, option, "folder")
    return p


def check_output_file(path: str | Path, option: str = "`out`") -> Path:
    """Refuse, before any work, an output file that could not be written: ``path`` is a
    folder; a folder on the way is a file; or the folder where writing would begin is not
    writable. Missing parent folders are fine (created when the file is written); an existing
    file is replaced, atomically. Raises :class:`ConfigError` naming ``option`` (or
    :class:`~privaudit.errors.UnwritableError` when the folder is not writable)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{option} {p} is a folder; it must name the file to write")
    _creatable(p, option, "file")
    return p


def _remove_quietly(path: str | Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    _write_via_temp(path, lambda fh: fh.write(text), binary=False)


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    _write_via_temp(path, lambda fh: fh.write(data), binary=True)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


def _finite(obj: Any) -> Any:
    """Replace NaN and infinities by None so that the JSON is standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps_json(obj: Any) -> str:
    """Standard JSON (no NaN), keys sorted, indented: stable across runs."""
    return json.dumps(plain_json(obj), indent=2, sort_keys=True) + "\n"


def plain_json(obj: Any) -> Any:
    """``obj`` as plain JSON values: NumPy and torch scalars and arrays as numbers and lists,
    paths as text, NaN and infinities as None."""
    return _finite(json.loads(json.dumps(obj, default=_json_default)))


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically."""
    write_text(path, dumps_json(obj))


def read_json(path: Path) -> Any:
    """Read a JSON artifact, turning damage into an :class:`ArtifactError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise ArtifactError(f"missing file {path}") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"cannot read {path}: it is not valid JSON ({exc})") from exc
