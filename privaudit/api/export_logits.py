"""``privaudit.export_logits()``: a trained target's outputs (and its shadow model's, and a
pool's) written as the .npz that :func:`privaudit.scan` reads; ``privaudit export-logits``
prints what it returns."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.results import ShortRepr
from privaudit.core.timing import importing
from privaudit.errors import ArtifactError, ConfigError
from privaudit.files.atomic import check_output_file

if TYPE_CHECKING:
    import numpy as np

#: the range of each numeric option (:func:`privaudit.api.params.bounded`)
BOUNDS = {"pool_size": (4, 4096)}


@dataclass(repr=False)
class ExportedLogits(ShortRepr):
    """The file written and the arrays in it (docs/scan.md names each)."""

    path: Path                                          #: the .npz written
    arrays: dict[str, np.ndarray] = field(repr=False, default_factory=dict)  #: name → NumPy array, as written

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each array's shape."""
        return {k: tuple(v.shape) for k, v in self.arrays.items()}

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit export-logits --json`` prints."""
        return {"path": str(self.path), "arrays": {k: list(v) for k, v in self.shapes.items()}}

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
                       for k, v in self.shapes.items())
        return f"<table><caption>privaudit export-logits: {html.escape(str(self.path))}</caption>{rows}</table>"


@params.options_named
def export_logits(target: str, *, out: str | Path, pool_size: int | None = None, data_dir: str | Path | None = None,
                  device: str = "auto", workdir: str | Path = ".") -> ExportedLogits:
    """Write the trained target ``target``'s outputs on its members and non-members (and its
    shadow model's when trained, and the reference pool of ``pool_size`` with its population
    when given: it must exist, nothing is trained here) to the .npz file ``out``: the arrays
    ``privaudit attack`` computes from, so that :func:`privaudit.scan` of the file gives
    attack's numbers. Keyword arguments are ``privaudit export-logits``' options; ``out`` is
    checked, and the target looked up, before anything heavy loads."""
    out = params.path(out, "--out")
    if not str(out).endswith(".npz"):
        raise ConfigError(f"--out must name an .npz file, got {str(out)!r}")
    params.bounded(BOUNDS, pool_size=pool_size)
    params.one_of(device, "--device", "auto", "cpu", "cuda")
    check_output_file(out, "--out")  # before any work: a path that cannot be written is refused now
    root = params.require_workspace(workdir)
    if not (root / "models" / target).is_dir():  # said before torch loads (Workspace.read_model_config says the same)
        raise ArtifactError(f"no model folder {root / 'models' / target}")
    with importing():
        from privaudit.files.atomic import write_bytes
        from privaudit.files.npfiles import npz_bytes
        from privaudit.pipeline.runs import DataCache
        from privaudit.pipeline.workspace import Workspace
        from privaudit.scanning.export import export_arrays
        from privaudit.training import resolve_device

    arrays = export_arrays(Workspace(root), target, DataCache(data_dir, False), resolve_device(device),
                           pool_size=pool_size)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(out, npz_bytes(arrays, compressed=True))
    return ExportedLogits(path=out, arrays=arrays)
