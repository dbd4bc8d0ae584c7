"""Checksums of artifact folders: what was written is what is reused.

Every folder committed by :meth:`privaudit.pipeline.workspace.Workspace.commit_folder` (a model, an
attack, a pool's logits) gets a ``manifest.json`` written inside it before the atomic rename::

    {"schema": 1, "files": {"weights.npz": {"sha256": "<64 hex>", "size": 123}, ...}}

listing every file of the folder (relative POSIX paths; hidden files and the manifest itself
left out). When a folder is reused, :func:`verify_folder` recomputes the SHA-256 of each
listed file and raises :class:`~privaudit.errors.DamagedArtifactError` naming the folder
and the way out (delete it and rerun) when a file is missing, has another size or another
checksum, or the manifest itself is unreadable; the commands that compute such a folder set it
aside and compute it again instead (:mod:`privaudit.api.repair`). Files not listed are ignored.

A folder written by an earlier version has no manifest: :func:`verify_folder` returns
``False`` and the caller decides (a model folder is still accepted when its weights load,
:meth:`privaudit.pipeline.workspace.Workspace.verify_model`).

A folder that arrives with a manifest (a bundle shipped from a Ray worker,
:mod:`privaudit.executor.bundle`) is checked against it before it is committed, so damage
in transit is refused rather than blessed with a fresh manifest.

Cost: one SHA-256 pass over the folder's files (~1 GB/s). Digests are cached per process,
keyed by the file's device, inode, size and modification/change times; a file modified less
than :data:`RACY_SECONDS` before it was hashed is not cached (its timestamp might not change
on a quick rewrite), so an edit is never hidden by the cache.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable
from pathlib import Path

from privaudit.errors import ArtifactError, DamagedArtifactError
from privaudit.files.atomic import read_json, write_json

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = 1
RACY_SECONDS = 2.0
_CHUNK = 1 << 20

_digests: dict[tuple, str] = {}


def stat_key(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_digest(path: Path) -> tuple[int, str]:
    """(size, SHA-256 hex) of ``path``, cached per process while the file is unchanged."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = stat_key(st)
        cached = _digests.get(key)
        if cached is not None:
            return st.st_size, cached
        h = hashlib.sha256()
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    if settled(st):
        _digests[key] = digest
    return st.st_size, digest


def settled(st: os.stat_result) -> bool:
    """Whether a result computed from a file with this stat may be cached: its last change is
    old enough that a later rewrite would change its timestamps."""
    now = time.time()
    return now - st.st_mtime > RACY_SECONDS and now - st.st_ctime > RACY_SECONDS


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.name != MANIFEST
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def manifest_of(folder: Path) -> dict:
    """The manifest of ``folder``'s files as they are now."""
    files = {}
    for p in _files(folder):
        size, digest = file_digest(p)
        files[p.relative_to(folder).as_posix()] = {"sha256": digest, "size": size}
    return {"schema": MANIFEST_SCHEMA, "files": files}


def write_manifest(folder: Path) -> None:
    """Record the checksum and size of every file of ``folder`` in ``folder/manifest.json``."""
    write_json(folder / MANIFEST, manifest_of(folder))


def _problem(folder: Path, only: Iterable[str] | None) -> str | None:
    """What is wrong with ``folder`` against its manifest, or None (the manifest exists)."""
    try:
        manifest = read_json(folder / MANIFEST)
    except ArtifactError as exc:
        return f"{MANIFEST} cannot be read ({exc})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA or not isinstance(files, dict)
            or not all(isinstance(v, dict) for v in files.values())):
        return f"{MANIFEST} is not a privaudit manifest"
    wanted = set(only) if only is not None else None
    for rel, entry in sorted(files.items()):
        if wanted is not None and rel not in wanted:
            continue
        path = folder / rel
        try:
            size, digest = file_digest(path)
        except FileNotFoundError:
            return f"{rel} is missing"
        except OSError as exc:
            return f"{rel} cannot be read ({exc.strerror or exc})"
        if size != entry.get("size"):
            return f"{rel} has {size} bytes, {entry.get('size')} were written"
        if digest != entry.get("sha256"):
            return f"{rel} does not match the checksum recorded when it was written"
    for rel in sorted(wanted or ()):
        if rel not in files and not (folder / rel).is_file():
            return f"{rel} is missing"
    return None


def verify_folder(folder: Path, kind: str, only: Iterable[str] | None = None) -> bool:
    """Check ``folder`` (a ``kind`` folder: model, attack, pool) against its manifest.

    Returns True when every listed file (or, with ``only``, every listed one of those names)
    matches, False when the folder has no manifest (written by an earlier version; the caller
    decides what else to check). Raises :class:`DamagedArtifactError` naming the folder
    otherwise. A folder swapped for a newer complete version while it is read (another
    process committing the same artifact) is read again, not reported as damaged.
    """
    folder = Path(folder)
    only = list(only) if only is not None else None
    for _ in range(3):
        try:
            before = os.stat(folder)
        except FileNotFoundError:
            raise DamagedArtifactError(f"{kind} folder {folder} is missing", kind=kind, folder=str(folder)) from None
        if not (folder / MANIFEST).is_file():
            if os.stat(folder).st_ino == before.st_ino:
                return False
            continue
        problem = _problem(folder, only)
        if problem is None:
            return True
        try:
            if os.stat(folder).st_ino != before.st_ino:
                continue  # replaced while we read it: read the new one
        except FileNotFoundError:
            continue
        raise damaged(kind, folder, problem)
    raise damaged(kind, folder, "it keeps changing while it is read")


def damaged(kind: str, folder: Path, problem: str) -> DamagedArtifactError:
    """The error for a damaged ``kind`` folder: names it, what is wrong and the way out."""
    return DamagedArtifactError(f"{kind} folder {folder} is damaged: {problem}; delete the folder and rerun",
                                kind=kind, folder=str(folder), problem=problem)


def check_incoming(folder: Path, kind: str, name: str) -> None:
    """Before committing ``folder`` (about to become ``name``): where it already holds a
    manifest (a shipped copy), its files must match it."""
    if (folder / MANIFEST).is_file():
        problem = _problem(folder, None)
        if problem is not None:
            raise DamagedArtifactError(f"{kind} folder {name} arrived damaged: {problem}; rerun", kind=kind,
                                       folder=name, problem=problem)
