"""Workspace folders as bytes, for workers that do not share the driver's filesystem.

A bundle maps each workspace-relative folder (``models/<run>``, ``attacks/<target>``,
``attacks/pools/<pool>``) to ``{relative file path: bytes}``. The driver packs a job's
inputs, the worker unpacks them into a private workspace, runs the job there and packs
the job's outputs, and the driver writes those into its workspace, each folder atomically
(:meth:`privaudit.pipeline.workspace.Workspace.commit_folder`), as a local run would.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from privaudit.errors import ArtifactError
from privaudit.files.atomic import write_bytes
from privaudit.pipeline.workspace import Workspace

Bundle = dict[str, dict[str, bytes]]


def _safe(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ArtifactError(f"refusing a bundle path outside the workspace: {rel!r}")
    return path


def pack(workspace: Workspace, folders: Iterable[str]) -> Bundle:
    """The files of each existing folder among ``folders`` (missing ones are left out)."""
    bundle: Bundle = {}
    for rel in folders:
        root = workspace.root / _safe(rel)
        if not root.is_dir():
            continue
        bundle[rel] = {p.relative_to(root).as_posix(): p.read_bytes()
                       for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}
    return bundle


def unpack(workspace: Workspace, bundle: Bundle) -> list[Path]:
    """Write every folder of ``bundle`` into ``workspace``, each one atomically; returns them."""
    written = []
    for rel, files in bundle.items():
        path = _safe(rel)
        parent = workspace.root.joinpath(*path.parts[:-1])
        parent.mkdir(parents=True, exist_ok=True)

        def write(tmp: Path, files=files) -> None:
            for name, data in files.items():
                target = tmp / _safe(name)
                target.parent.mkdir(parents=True, exist_ok=True)
                write_bytes(target, data)

        written.append(workspace.commit_folder(parent, path.parts[-1], write))
    return written
