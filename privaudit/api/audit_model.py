"""``privaudit.audit_model()``: audit a model trained elsewhere from its weights file, with
reference models trained on data it did not see; ``privaudit audit-model`` prints what it
returns."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.recipe import Recipe
from privaudit.api.scan import ScanReport, _stem
from privaudit.core.defaults import MAX_SEED
from privaudit.core.timing import importing, phase
from privaudit.errors import ConfigError, DataError

if TYPE_CHECKING:
    from privaudit.core.config import RunConfig
    from privaudit.training.loop import EpochCallback

#: the range of each numeric option (:func:`privaudit.api.params.bounded`)
BOUNDS = {"references": (2, 1024), "epochs": (1, 100_000), "batch_size": (1, 1_000_000), "lr": (0, 100, True),
          "kappa": params.RANGES["kappa"], "seed": (0, MAX_SEED), "delta": (0, 1, True)}


@dataclass(repr=False)
class ModelAudit(ScanReport):
    """A scan of the audited model's outputs (:class:`~privaudit.api.scan.ScanReport`: a row
    per attack, per class and slice, the headline, the page) with how well the reference
    models match it (:attr:`references`)."""

    #: accuracies, KS distance and warnings of the references' match
    references: dict[str, Any] = field(default_factory=dict)
    _command = "audit-model"

    @property
    def warnings(self) -> list[str]:
        """Where the references match the audited model poorly (each a sentence)."""
        return list(self.references.get("warnings", []))

    def _notes_html(self) -> str:
        m = self.references
        return (f"<p>References: accuracy on non-members {m.get('reference_test_accuracy', math.nan):.3f} vs the "
                f"model's {m.get('target_test_accuracy', math.nan):.3f}; KS distance "
                f"{m.get('ks_distance', math.nan):.2f}</p>"
                + "".join(f"<p>warning: {html.escape(w)}</p>" for w in self.warnings))


def _floats(value: str | Sequence[float] | None, option: str) -> list[float]:
    """``"0.5,0.5,0.5"`` (commas or spaces) or a sequence of numbers → finite floats."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    try:
        values = [float(t) for t in (value.replace(",", " ").split() if isinstance(value, str) else value)]
    except (TypeError, ValueError):
        raise ConfigError(f"{option} takes comma-separated numbers, got {value!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{option} takes finite numbers, got {value!r}")
    return values


def _check_paths(weights: Path, members: str, non_members: str | None, workdir: Path, out: Path | None) -> Path:
    """What audit-model reads and writes, checked from the file system before anything heavy
    loads: the weights file exists, a ``members`` / ``non_members`` file exists (and an .npy is
    one), and the results folder and the workspace can be written. Returns the results folder."""
    from privaudit.files.atomic import check_output_folder
    from privaudit.files.npfiles import ids_problem
    from privaudit.scanning import FILES

    if weights.is_dir():
        raise DataError(f"weights file {weights} is a folder (give the .safetensors or torch.save file)")
    if not weights.is_file():
        raise DataError(f"weights file {weights} does not exist")
    for text, option in ((members, "--members"), (non_members, "--non-members")):
        problem = ids_problem(text, option) if text else None
        if problem:
            raise DataError(problem)
    check_output_folder(workdir, "--workdir")
    folder = out or workdir / "reports" / "audit-model" / _stem(str(weights))
    check_output_folder(folder, "--out" if out else "the default --out", FILES)
    return folder


@params.options_named
def audit_model(*, weights: str | Path, members: str, model: str = "mlp",
                model_args: Sequence[str] | dict[str, Any] | None = None, width: int | None = None,
                dataset: str = "cifar10",
                data_dir: str | Path | None = None, download: bool = False, non_members: str | None = None,
                references: int = 8, epochs: int = 10, batch_size: int = 128, lr: float = 1e-3,
                weight_decay: float | None = None, augment: str = "none", kappa: float = 0.0,
                mean: str | Sequence[float] | None = None, std: str | Sequence[float] | None = None, seed: int = 0,
                delta: float = 1e-5, device: str = "auto", workdir: str | Path = ".", out: str | Path | None = None,
                command: str = "", on_start: Callable[[RunConfig], None] | None = None,
                on_epoch: EpochCallback | None = None) -> ModelAudit:
    """Audit the model in ``weights`` (a .safetensors file, or a state dict saved by
    torch.save, loaded with ``weights_only``) that trained on ``members`` (indices into the
    dataset's pooled samples: a .npy or text file, a range ``"a:b"`` or ``"i,j,k"``): train
    ``references`` reference models with its recipe (``model``, ``width``, ``epochs``, …) on
    data it did not see, run every attack (offline LiRA and RMIA included) with intervals, say
    how well the references match it, and write the results into ``out`` (default
    ``workdir``/reports/audit-model/<weights name>). Keyword arguments are ``privaudit
    audit-model``'s options (``model_args`` for ``--model-arg``; ``mean`` and ``std`` as
    ``"0.49,0.48,0.45"`` or lists); the paths are checked before anything heavy loads.
    ``command``: the command line recorded on the page; ``on_start(config)`` and
    ``on_epoch(epoch, epochs, loss)`` report the references' training."""
    mean_v, std_v = _floats(mean, "--mean"), _floats(std, "--std")
    params.bounded(BOUNDS, references=references, epochs=epochs, batch_size=batch_size, lr=lr, kappa=kappa, seed=seed,
                   delta=delta)
    params.one_of(device, "--device", "auto", "cpu", "cuda")
    model = params.model_name(model)
    dataset = params.dataset_name(dataset)
    weights, workdir = params.path(weights, "--weights"), params.path(workdir, "--workdir")
    folder = _check_paths(weights, members, non_members, workdir, params.path(out, "--out"))  # before torch loads
    with importing():
        dataset_kwargs, data = params.dataset_config(dataset, data_dir, download)
        from privaudit.pipeline.runs import DataCache
        from privaudit.pipeline.workspace import Workspace
        from privaudit.scanning.external import audit_model as run_audit_model
        from privaudit.scanning.external import parse_ids
        from privaudit.scanning.report import write
        from privaudit.training import resolve_device

    data = data or DataCache(data_dir, download)
    n = len(data.get(dataset).y)
    member_ids = parse_ids(members, n, "--members")
    non_ids = parse_ids(non_members, n, "--non-members") if non_members else None
    recipe = Recipe(model=model, dataset=dataset, width=width, model_args=model_args, epochs=epochs,
                    batch_size=batch_size, lr=lr, weight_decay=weight_decay, augment=augment)
    base = recipe.config(seed=seed, kappa=kappa, dataset_kwargs=data.config_kwargs(dataset))
    ws = Workspace(workdir).ensure_writable()
    result, match = run_audit_model(weights, base, member_ids, ws, data, resolve_device(device),
                                    non_members=non_ids, references=references, mean=mean_v, std=std_v,
                                    delta=delta, on_start=on_start, on_epoch=on_epoch)
    with phase("report"):
        summary = write(result, folder, command=command, references=match)
    return ModelAudit.of(result, summary, folder, references=match)
