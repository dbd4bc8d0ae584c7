"""``privaudit scan``: audit a model from its outputs alone (logits from any framework)."""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from privaudit.files.atomic import check_output_file
from privaudit.cli.common import (DataDirOpt, DeviceOpt, DownloadOpt, JsonOpt, WorkdirOpt, dataset_config, emit_json,
                                  err, handle_errors, importing, info_console, number, parse_model_args, path_option,
                                  require_workspace, training_progress)
from privaudit.cli.options import AugmentOpt, DatasetOpt, DeltaOpt, ModelArgOpt, ModelOpt, WeightDecayOpt, WidthOpt
from privaudit.core.defaults import MAX_SEED

InputArg = Annotated[str, typer.Argument(
    callback=path_option, show_default=False,
    help="An .npz, a folder of .npy files or a CSV holding the audited model's outputs on its members and "
         "non-members (logits_in/logits_out or probs_*/loss_*, labels_in/labels_out), optionally a shadow "
         "model's (shadow_*) and reference models' (reference_logits, keep) outputs; see docs/scan.md.")]


@handle_errors
def scan_cmd(
    input_path: InputArg,
    out: Annotated[Optional[str], typer.Option("--out", callback=path_option, help="Folder for the results; default reports/scan/<input name>/ under the current folder.")] = None,
    delta: DeltaOpt = 1e-5,
    folds: Annotated[int, typer.Option("--folds", callback=number(2, 100), help="Folds of the cross-validation that trains the attack classifier and chooses thresholds when no shadow or reference model is given.")] = 5,
    seed: Annotated[int, typer.Option("--seed", callback=number(0, MAX_SEED), help="Seed of the cross-validation folds and the attack classifier.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Run every attack the arrays allow (loss, confidence, entropy, modified entropy, a cross-validated attack classifier; the shadow attack with a shadow model; LiRA, RMIA and the many-shadow attack with reference models), with intervals, per class and per slice; write attacks.csv, groups.csv, summary.json and a self-contained index.html. Nothing in the input is unpickled."""
    from privaudit.api.scan import scan

    command = "privaudit scan " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else ""
    report = scan(input_path, out=out, delta=delta, folds=folds, seed=seed, command=command)
    summary, result, folder = report.summary, report.result, report.folder
    if as_json:
        emit_json(summary)
        return
    from privaudit.cli.summary import scan_table

    console = info_console(as_json)
    console.print(scan_table(result))
    console.print(summary["headline"].get("verdict", ""))
    console.print(f"report: {summary['html']}  table: {folder / 'attacks.csv'}")


@handle_errors
def export_cmd(
    target: Annotated[str, typer.Argument(show_default=False, help="A trained target's run name (see models/).")],
    out: Annotated[str, typer.Option("--out", callback=path_option, help="The .npz file to write.")],
    pool_size: Annotated[Optional[int], typer.Option("--pool-size", callback=number(4, 4096), help="Add the reference pool of this size (trained earlier by attack or audit) and its population.")] = None,
    data_dir: DataDirOpt = None,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Write a trained target's outputs (and its shadow model's, and a pool's) in the format privaudit scan reads: the arrays attack computes from, for use in other tools or to check scan against attack."""
    if not str(out).endswith(".npz"):
        from privaudit.errors import ConfigError

        raise ConfigError(f"--out must name an .npz file, got {str(out)!r}")
    check_output_file(out, "--out")  # before any work: a path that cannot be written is refused now
    root = require_workspace(workdir)
    if not (root / "models" / target).is_dir():  # said before torch loads (Workspace.read_model_config says the same)
        from privaudit.errors import ArtifactError

        raise ArtifactError(f"no model folder {root / 'models' / target}")
    with importing():
        from privaudit.files.atomic import write_bytes
        from privaudit.pipeline.runs import DataCache
        from privaudit.scanning.export import export_arrays, npz_bytes
        from privaudit.training import resolve_device
        from privaudit.pipeline.workspace import Workspace

    arrays = export_arrays(Workspace(root), target, DataCache(data_dir, False), resolve_device(device),
                           pool_size=pool_size)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_bytes(Path(out), npz_bytes(arrays))
    if as_json:
        emit_json({"path": str(out), "arrays": {k: list(v.shape) for k, v in arrays.items()}})
        return
    info_console(as_json).print(f"wrote {out}: " + ", ".join(f"{k} {tuple(v.shape)}" for k, v in arrays.items()))


def _check_audit_model_paths(weights, members: str, non_members: Optional[str], workdir, out) -> None:
    """What audit-model reads and writes, checked from the file system before anything heavy
    loads: the weights file exists, a --members / --non-members file exists (and an .npy is
    one), and the results folder and the workspace can be written."""
    from privaudit.api.scan import _stem
    from privaudit.files.atomic import check_output_folder
    from privaudit.errors import DataError
    from privaudit.files.npfiles import ids_problem
    from privaudit.scanning import FILES

    w = Path(weights)
    if w.is_dir():
        raise DataError(f"weights file {w} is a folder (give the .safetensors or torch.save file)")
    if not w.is_file():
        raise DataError(f"weights file {w} does not exist")
    for text, option in ((members, "--members"), (non_members, "--non-members")):
        problem = ids_problem(text, option) if text else None
        if problem:
            raise DataError(problem)
    check_output_folder(workdir, "--workdir")
    folder = Path(out) if out else Path(workdir) / "reports" / "audit-model" / _stem(str(weights))
    check_output_folder(folder, "--out" if out else "the default --out", FILES)


def _floats(text: Optional[str], option: str) -> list[float]:
    if not text:
        return []
    try:
        values = [float(t) for t in text.replace(",", " ").split()]
    except ValueError:
        from privaudit.errors import ConfigError

        raise ConfigError(f"{option} takes comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        from privaudit.errors import ConfigError

        raise ConfigError(f"{option} takes finite numbers, got {text!r}")
    return values


@handle_errors
def audit_model_cmd(
    weights: Annotated[str, typer.Option("--weights", callback=path_option, help="The model's weights: a .safetensors file, or a state dict saved by torch.save (loaded with weights_only=True: a file that needs a full pickle is refused).")],
    members: Annotated[str, typer.Option("--members", help="The samples the model trained on, as indices into the dataset's pooled samples (training then test images): a .npy or text file, a range a:b, or i,j,k.")],
    model: ModelOpt = "mlp",
    model_arg: ModelArgOpt = None,
    width: WidthOpt = None,
    dataset: DatasetOpt = "cifar10",
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    non_members: Annotated[Optional[str], typer.Option("--non-members", help="Samples it did not train on (same forms as --members); default: as many, drawn from the rest of the dataset.")] = None,
    references: Annotated[int, typer.Option("--references", callback=number(2, 1024), help="Reference models to train with the stated recipe, none on an audited sample (even).")] = 8,
    epochs: Annotated[int, typer.Option("--epochs", callback=number(1, 100_000), help="The target's training epochs (the references train the same way).")] = 10,
    batch_size: Annotated[int, typer.Option("--batch-size", callback=number(1, 1_000_000), help="The target's batch size.")] = 128,
    lr: Annotated[float, typer.Option("--lr", callback=number(0, 100, low_open=True), help="The target's Adam learning rate.")] = 1e-3,
    weight_decay: WeightDecayOpt = None,
    augment: AugmentOpt = "none",
    kappa: Annotated[float, typer.Option("--kappa", callback=number(0, 100), help="MG noise the target trained with (0: none).")] = 0.0,
    mean: Annotated[Optional[str], typer.Option("--mean", help="Per-channel mean of the target's input normalisation after pixel/255 (torchvision's Normalize), e.g. 0.4914,0.4822,0.4465; default 0.")] = None,
    std: Annotated[Optional[str], typer.Option("--std", help="Per-channel std of the target's input normalisation after pixel/255; default 1.")] = None,
    seed: Annotated[int, typer.Option("--seed", callback=number(0, MAX_SEED), help="Seed of the non-member draw, the references (data and training) and the cross-validation.")] = 0,
    delta: DeltaOpt = 1e-5,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    out: Annotated[Optional[str], typer.Option("--out", callback=path_option, help="Folder for the results; default reports/audit-model/<weights name>/ in the workspace.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Audit a model trained elsewhere: load its weights safely, train reference models with its recipe on data it did not see, run every attack (offline LiRA and RMIA included) with intervals, and say how well the references match it."""
    mean_v, std_v = _floats(mean, "--mean"), _floats(std, "--std")
    _check_audit_model_paths(weights, members, non_members, workdir, out)  # before torch loads
    dataset_kwargs, data = dataset_config(dataset, data_dir, download)
    with importing():
        from privaudit.pipeline.runs import DataCache
        from privaudit.scanning.external import Recipe, audit_model, parse_ids
        from privaudit.scanning.report import write
        from privaudit.training import resolve_device
        from privaudit.pipeline.workspace import Workspace

    data = data or DataCache(data_dir, download)
    n = len(data.get(dataset).y)
    member_ids = parse_ids(members, n, "--members")
    non_ids = parse_ids(non_members, n, "--non-members") if non_members else None
    recipe = Recipe(model=model, width=width, model_args=parse_model_args(model_arg), epochs=epochs,
                    batch_size=batch_size, lr=lr, weight_decay=weight_decay, augment=augment, kappa=kappa)
    ws = Workspace(workdir).ensure_writable()
    with training_progress() as bars:
        result, match = audit_model(weights, recipe, dataset, member_ids, ws, data, resolve_device(device),
                                    non_members=non_ids, references=references, seed=seed, mean=mean_v, std=std_v,
                                    delta=delta, on_epoch=bars.on_epoch)
    from privaudit.api.scan import _stem

    folder = Path(out) if out else ws.reports / "audit-model" / _stem(str(weights))
    command = "privaudit audit-model " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else ""
    from privaudit.core.timing import phase

    with phase("report"):
        summary = write(result, folder, command=command, references=match)
    if as_json:
        emit_json(summary)
        return
    from privaudit.cli.summary import scan_table

    console = info_console(as_json)
    console.print(scan_table(result))
    console.print(f"references: accuracy on non-members {match['reference_test_accuracy']:.3f} vs the model's "
                  f"{match['target_test_accuracy']:.3f}; KS distance {match['ks_distance']:.2f}", markup=False)
    for w in match["warnings"]:
        err.print(f"[yellow]warning:[/] {w}", soft_wrap=True, highlight=False)
    console.print(summary["headline"].get("verdict", ""))
    console.print(f"report: {summary['html']}  table: {folder / 'attacks.csv'}")
