"""Advisory file locks, so that processes sharing a workspace never corrupt each other.

Two kinds of lock per artifact, both ``fcntl.flock`` on a file under ``<parent>/.locks/``:

* ``commit``: held while :meth:`Workspace.commit_folder` swaps a finished folder into
  place, so two writers of the same artifact cannot interleave their renames;
* ``work``: held by the get-or-train functions (a model, a pool's logits, a target's
  attacks) from the check "does it exist?" to the save, so a second audit waits for the
  first one's artifact and reuses it instead of computing it again.

A process takes ``work`` locks in the order attack → pool → model and each ``commit``
lock only on its own, so no two processes wait on each other in a cycle. The lock is
released when the holder exits, even on ``kill -9``. Where ``fcntl`` does not exist (Windows)
the locks do nothing; on network filesystems they are as good as the filesystem's
``flock``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FOLDER = ".locks"


@contextmanager
def artifact_lock(parent: Path, name: str, kind: str) -> Iterator[None]:
    """Hold the exclusive ``kind`` lock of artifact ``parent/name`` for the ``with`` block."""
    if fcntl is None:
        yield
        return
    folder = Path(parent) / LOCK_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.{kind}", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
