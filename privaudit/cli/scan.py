"""``privaudit scan``: audit a model from its outputs alone (logits from any framework)."""

from __future__ import annotations

import shlex
import sys
from typing import Annotated

import typer

from privaudit.api.audit_model import BOUNDS
from privaudit.api.export_logits import BOUNDS as EXPORT_BOUNDS
from privaudit.cli.callbacks import number, path_option
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import (
    AugmentOpt,
    DataDirOpt,
    DatasetOpt,
    DeltaOpt,
    DeviceOpt,
    DownloadOpt,
    JsonOpt,
    ModelArgOpt,
    ModelOpt,
    WeightDecayOpt,
    WidthOpt,
    WorkdirOpt,
    option,
)
from privaudit.cli.output import emit_json, err, info_console
from privaudit.cli.progress import training_progress
from privaudit.core.defaults import MAX_SEED

InputArg = Annotated[str, typer.Argument(
    callback=path_option, show_default=False,
    help="An .npz, a folder of .npy files or a CSV holding the audited model's outputs on its members and "
         "non-members (logits_in/logits_out or probs_*/loss_*, labels_in/labels_out), optionally a shadow "
         "model's (shadow_*) and reference models' (reference_logits, keep) outputs; see docs/scan.md.")]


@handle_errors
def scan_cmd(
    input_path: InputArg,
    out: Annotated[str | None, typer.Option("--out", callback=path_option,
                                            help="Folder for the results; default reports/scan/<input name>/ under the "
                                                 "current folder.")] = None,
    delta: DeltaOpt = 1e-5,
    folds: Annotated[int, typer.Option("--folds", callback=number(2, 100),
                                       help="Folds of the cross-validation that trains the attack classifier and "
                                            "chooses thresholds when no shadow or reference model is given.")] = 5,
    seed: Annotated[int, option("seed", callback=number(0, MAX_SEED),
                                help="Seed of the cross-validation folds and the attack classifier.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Run every attack the arrays allow (loss, confidence, entropy, modified entropy, a cross-validated attack
    classifier; the shadow attack with a shadow model; LiRA, RMIA and the many-shadow attack with reference models),
    with intervals, per class and per slice; write attacks.csv, groups.csv, summary.json and a self-contained
    index.html. Nothing in the input is unpickled."""
    from privaudit.api.scan import scan

    report = scan(input_path, out=out, delta=delta, folds=folds, seed=seed, command=_command("scan"))
    if as_json:
        emit_json(report.to_dict())
        return
    _print_scan(report)


def _command(name: str) -> str:
    """The command line as typed, recorded on the results page."""
    return f"privaudit {name} " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else ""


def _print_scan(report, between=None) -> None:
    """A scan's table, what ``between(console)`` prints, the verdict, and where the results are."""
    from privaudit.cli.summary import scan_table

    console = info_console(False)
    console.print(scan_table(report.result))
    if between is not None:
        between(console)
    console.print(report.verdict, markup=False)
    family = report.headline.get("familywise") or {}
    if family.get("text"):
        console.print(family["text"], markup=False, highlight=False)
    console.print(f"report: {report.report_path}  table: {report.folder / 'attacks.csv'}")


@handle_errors
def export_cmd(
    target: Annotated[str, typer.Argument(show_default=False, help="A trained target's run name (see models/).")],
    out: Annotated[str, typer.Option("--out", callback=path_option, help="The .npz file to write.")],
    pool_size: Annotated[int | None, option("pool-size", callback=number(*EXPORT_BOUNDS["pool_size"]),
                                            help="Add the reference pool of this size (trained earlier by attack or "
                                                 "audit) and its population.")] = None,
    data_dir: DataDirOpt = None,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    as_json: JsonOpt = False,
) -> None:
    """Write a trained target's outputs (and its shadow model's, and a pool's) in the format privaudit scan reads:
    the arrays attack computes from, for use in other tools or to check scan against attack."""
    from privaudit.api.export_logits import export_logits

    result = export_logits(target, out=out, pool_size=pool_size, data_dir=data_dir, device=device, workdir=workdir)
    if as_json:
        emit_json(result.to_dict())
        return
    info_console(as_json).print(f"wrote {result.path}: " + ", ".join(f"{k} {v}" for k, v in result.shapes.items()))


@handle_errors
def audit_model_cmd(
    weights: Annotated[str, typer.Option("--weights", callback=path_option,
                                         help="The model's weights: a .safetensors file, or a state dict saved by "
                                              "torch.save (loaded with weights_only=True: a file that needs a full "
                                              "pickle is refused).")],
    members: Annotated[str, typer.Option("--members", help="The samples the model trained on, as indices into the "
                                                           "dataset's pooled samples (training then test images): a "
                                                           ".npy or text file, a range a:b, or i,j,k.")],
    model: ModelOpt = "mlp",
    model_arg: ModelArgOpt = None,
    width: WidthOpt = None,
    dataset: DatasetOpt = "cifar10",
    data_dir: DataDirOpt = None,
    download: DownloadOpt = False,
    non_members: Annotated[str | None, typer.Option("--non-members",
                                                    help="Samples it did not train on (same forms as --members); "
                                                         "default: as many, drawn from the rest of the "
                                                         "dataset.")] = None,
    references: Annotated[int, option("pool-size", callback=number(*BOUNDS["references"]),
                                      help="Reference models to train with the stated recipe, none on an audited "
                                           "sample (even).")] = 8,
    epochs: Annotated[int, option("epochs", callback=number(*BOUNDS["epochs"]),
                                  help="The target's training epochs (the references train the same way).")] = 10,
    batch_size: Annotated[int, option("batch-size", callback=number(*BOUNDS["batch_size"]),
                                      help="The target's batch size.")] = 128,
    lr: Annotated[float, option("lr", callback=number(*BOUNDS["lr"]), help="The target's Adam learning rate.")] = 1e-3,
    weight_decay: WeightDecayOpt = None,
    augment: AugmentOpt = "none",
    kappa: Annotated[float, option("kappa", callback=number(*BOUNDS["kappa"]),
                                   help="MG noise the target trained with (0: none).")] = 0.0,
    mean: Annotated[str | None, typer.Option("--mean", help="Per-channel mean of the target's input normalisation "
                                                            "after pixel/255 (torchvision's Normalize), e.g. "
                                                            "0.4914,0.4822,0.4465; default 0.")] = None,
    std: Annotated[str | None, typer.Option("--std", help="Per-channel std of the target's input normalisation after "
                                                          "pixel/255; default 1.")] = None,
    seed: Annotated[int, option("seed", callback=number(*BOUNDS["seed"]),
                                help="Seed of the non-member draw, the references (data and training) and the "
                                     "cross-validation.")] = 0,
    delta: DeltaOpt = 1e-5,
    device: DeviceOpt = "auto",
    workdir: WorkdirOpt = ".",
    out: Annotated[str | None, typer.Option("--out", callback=path_option,
                                            help="Folder for the results; default reports/audit-model/<weights name>/ "
                                                 "in the workspace.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Audit a model trained elsewhere: load its weights safely, train reference models with its recipe on data it
    did not see, run every attack (offline LiRA and RMIA included) with intervals, and say how well the references
    match it."""
    from privaudit.api.audit_model import audit_model

    with training_progress() as bars:
        result = audit_model(weights=weights, members=members, model=model, model_args=model_arg, width=width,
                             dataset=dataset, data_dir=data_dir, download=download, non_members=non_members,
                             references=references, epochs=epochs, batch_size=batch_size, lr=lr,
                             weight_decay=weight_decay, augment=augment, kappa=kappa, mean=mean, std=std, seed=seed,
                             delta=delta, device=device, workdir=workdir, out=out, command=_command("audit-model"),
                             on_start=bars.start, on_epoch=bars.on_epoch)
    if as_json:
        emit_json(result.to_dict())
        return
    match = result.references

    def references_line(console) -> None:
        console.print(f"references: accuracy on non-members {match['reference_test_accuracy']:.3f} vs the model's "
                      f"{match['target_test_accuracy']:.3f}; KS distance {match['ks_distance']:.2f}", markup=False)
        for w in result.warnings:
            err.print(f"[yellow]warning:[/] {w}", soft_wrap=True, highlight=False)

    _print_scan(result, references_line)
