"""``privaudit epsilon``: what a setting costs in ε, or the noise that meets a target ε,
without training anything."""

from __future__ import annotations

from typing import Annotated

import typer

from privaudit.analysis.accounting import REPLACE_ONE_MAX_BOUND
from privaudit.api.epsilon import DEFENCES
from privaudit.cli.callbacks import number, one_of
from privaudit.cli.failures import handle_errors
from privaudit.cli.options import DeltaOpt, JsonOpt, SigmaOpt, TargetEpsilonOpt, option
from privaudit.cli.output import emit_json, info_console
from privaudit.core.defaults import MAX_BATCH_SIZE, MAX_EPOCHS


@handle_errors
def epsilon_cmd(
    defence: Annotated[str, option("defence", callback=one_of(*DEFENCES),
                                   help="noisycgd (hidden-state bound for the last iterate) or dpsgd (Opacus "
                                        "accountant).")],
    batch_size: Annotated[int, option("batch-size", callback=number(1, MAX_BATCH_SIZE),
                                      help="NoisyCGD's fixed batch size b, or DP-SGD's expected Poisson batch size.")],
    dataset_size: Annotated[int, typer.Option("--dataset-size", callback=number(1, 10**10),
                                              help="Training set size n.")],
    epochs: Annotated[int, option("epochs", callback=number(1, MAX_EPOCHS), help="Training epochs E.")],
    noise_multiplier: SigmaOpt = None,
    target_epsilon: TargetEpsilonOpt = None,
    lr: Annotated[float | None, option("lr", callback=number(0, 100, low_open=True),
                                       help="NoisyCGD step size eta (noisycgd only).")] = None,
    l2: Annotated[float | None, option("weight-decay", callback=number(0, 1e6, low_open=True),
                                       help="NoisyCGD L2 coefficient λ > 0 (noisycgd only).")] = None,
    smoothness: Annotated[float | None, typer.Option("--smoothness", callback=number(0, 1e12, low_open=True),
                                                     help="Smoothness beta of the loss, if known: the contraction "
                                                          "becomes max(|1-eta*lambda|, |1-eta*beta|). Without it the "
                                                          "bound assumes beta <= 2/lr - weight-decay, and steps for "
                                                          "which that cannot hold are refused (noisycgd "
                                                          "only).")] = None,
    delta: DeltaOpt = 1e-5,
    as_json: JsonOpt = False,
) -> None:
    """The epsilon of a NoisyCGD or DP-SGD setting at delta, or the noise multiplier for a target epsilon."""
    from privaudit.api.epsilon import epsilon

    doc = epsilon(defence=defence, batch_size=batch_size, dataset_size=dataset_size, epochs=epochs,
                  noise_multiplier=noise_multiplier, target_epsilon=target_epsilon, lr=lr, l2=l2,
                  smoothness=smoothness, delta=delta).to_dict()
    if as_json:
        emit_json(doc)
        return
    info_console(as_json).print(epsilon_table(doc, calibrated=target_epsilon is not None))


#: what each key of ``privaudit epsilon --json`` is, as the terminal table says it
#: (docs/methods/b-hidden-state.md B.3; the keys themselves are the stable API and do not
#: change). A key with two meanings has them by defence: (dpsgd, noisycgd).
LABELS: dict[str, str | tuple[str, str]] = {
    "defense": "defence",
    "delta": "δ: the δ of the (ε, δ) guarantee",
    "dataset_size": "training set size n",
    "batch_size": ("expected batch size b (Poisson sampling)", "batch size b (fixed, cyclic order)"),
    "epochs": "epochs E",
    "batches_per_epoch": ("steps per epoch, ⌈n/b⌉", "batches per epoch l = ⌊n/b⌋"),
    "noise_multiplier": ("noise multiplier σ (noise std σ·C on the clipped gradient sum)",
                         "noise multiplier σ (noise std σ·C/b on the batch mean)"),
    "sample_rate": "sampling rate q = 1 / steps per epoch",
    "steps": "steps T = steps per epoch × E",
    "adjacency": ("adjacency of ε (add-remove: one sample added or removed)",
                  "adjacency of ε (replace-one: one sample swapped for another)"),
    "epsilon": ("ε at δ, add-remove adjacency (what train --dp reports)",
                "ε at δ, replace-one: hidden-state bound (last iterate only)"),
    "accountant": "accountant of ε",
    "epsilon_replace_one": "ε at δ, replace-one adjacency, exact (PLD accountant)",
    "accountant_replace_one": "accountant of the replace-one ε",
    "epsilon_replace_one_sigma_half": "ε at δ, replace-one, the paper's stand-in: add-remove ε at σ/2 (an upper "
                                      "bound, looser)",
    "accountant_replace_one_sigma_half": "accountant of the σ/2 stand-in",
    "mu": "μ_E: the GDP parameter after E epochs (ε follows from μ_E and δ)",
    "contraction": "contraction c of one noiseless step (1 − lr·λ, or with --smoothness)",
    "lr": "step size η (--lr)",
    "l2": "L2 coefficient λ (--weight-decay)",
    "smoothness": "smoothness β of the loss (--smoothness)",
    "assumes_smoothness_at_most": "largest smoothness β the bound assumes (2/lr − λ)",
    "assumption": "assumption",
    "dpsgd_same_noise_epsilon_replace_one": "DP-SGD at this σ and schedule: ε at δ, replace-one, exact (PLD)",
    "dpsgd_same_noise_epsilon_replace_one_sigma_half": "DP-SGD at this σ and schedule: the paper's stand-in, "
                                                       "add-remove ε at σ/2 (an upper bound)",
}


#: the replace-one ε rows when the exact PLD is not computed (its σ/2 bound exceeds
#: REPLACE_ONE_MAX_BOUND; privaudit.analysis.accounting.replace_one_epsilon returns that bound then)
EXACT_OR_BOUND = {
    "epsilon_replace_one": "ε at δ, replace-one adjacency: the σ/2 upper bound (over 1,000, the exact PLD is "
                           "not computed)",
    "dpsgd_same_noise_epsilon_replace_one": "DP-SGD at this σ and schedule: ε at δ, replace-one, the σ/2 upper "
                                            "bound (over 1,000, the exact PLD is not computed)",
}


def label(key: str, defence: str) -> str:
    """The terminal's words for ``--json`` key ``key`` (the key itself when it has none)."""
    text = LABELS.get(key, key)
    return text if isinstance(text, str) else text[0 if defence == "dpsgd" else 1]


#: the terminal width from which the table shows each row's --json key as a third column
KEY_COLUMN_WIDTH = 110


def epsilon_table(doc: dict, *, calibrated: bool = False, width: int | None = None):
    """The terminal table of ``privaudit epsilon``: a row per ``--json`` key, in words (what
    it is) and its value; on a terminal at least :data:`KEY_COLUMN_WIDTH` wide (``width``,
    default the console's), also the key that ``--json`` gives it under."""
    from rich import box
    from rich.table import Table

    from privaudit.cli.output import out

    defence = doc.get("defense", "")
    keys = (width or out.width) >= KEY_COLUMN_WIDTH
    table = Table(title=f"privaudit epsilon: {defence}", box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="(ε, δ): the differential-privacy guarantee of the setting; add-remove and replace-one: "
                          "which training sets count as neighbours, one sample added or removed, or swapped for "
                          "another (docs/methods/b-hidden-state.md B.3)"
                          + ("" if keys else "; --json gives each row under its key"))
    table.add_column("what", overflow="fold")
    table.add_column("value", overflow="fold", max_width=34)
    if keys:
        table.add_column("--json key", style="dim", no_wrap=True)
    for key, value in doc.items():
        words = label(key, defence)
        if key == "noise_multiplier" and calibrated:
            words += ", calibrated to --target-epsilon"
        if key in EXACT_OR_BOUND and isinstance(value, float) and value > REPLACE_ONE_MAX_BOUND:
            words = EXACT_OR_BOUND[key]
        if value is None:
            shown = "not given" if key == "smoothness" else "—"
        else:
            shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        table.add_row(words, shown, *([key] if keys else []))
    return table
