"""``privaudit epsilon``: what a setting costs in ε, or the noise that meets a target ε,
without training anything."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from privaudit.api.epsilon import DEFENSES
from privaudit.cli.common import JsonOpt, emit_json, handle_errors, info_console, number, one_of
from privaudit.cli.options import DeltaOpt, NoiseMultiplierOpt, TargetEpsilonOpt
from privaudit.defaults import MAX_BATCH_SIZE, MAX_EPOCHS


@handle_errors
def epsilon_cmd(
    defense: Annotated[str, typer.Option("--defense", "--defence", callback=one_of(*DEFENSES), help="noisycgd (hidden-state bound for the last iterate) or dpsgd (Opacus accountant).")],
    batch_size: Annotated[int, typer.Option("--batch-size", callback=number(1, MAX_BATCH_SIZE), help="NoisyCGD's fixed batch size b, or DP-SGD's expected Poisson batch size.")],
    dataset_size: Annotated[int, typer.Option("--dataset-size", callback=number(1, 10**10), help="Training set size n.")],
    epochs: Annotated[int, typer.Option("--epochs", callback=number(1, MAX_EPOCHS), help="Training epochs E.")],
    noise_multiplier: NoiseMultiplierOpt = None,
    target_epsilon: TargetEpsilonOpt = None,
    lr: Annotated[Optional[float], typer.Option("--lr", callback=number(0, 100, low_open=True), help="NoisyCGD step size eta (noisycgd only).")] = None,
    l2: Annotated[Optional[float], typer.Option("--l2", "--weight-decay", callback=number(0, 1e6, low_open=True), help="NoisyCGD L2 coefficient lambda > 0 (noisycgd only).")] = None,
    smoothness: Annotated[Optional[float], typer.Option("--smoothness", callback=number(0, 1e12, low_open=True), help="Smoothness beta of the loss, if known: the contraction becomes max(|1-eta*lambda|, |1-eta*beta|). Without it the bound assumes beta <= 2/lr - l2, and steps for which that cannot hold are refused (noisycgd only).")] = None,
    delta: DeltaOpt = 1e-5,
    as_json: JsonOpt = False,
) -> None:
    """The epsilon of a NoisyCGD or DP-SGD setting at delta, or the noise multiplier for a target epsilon."""
    from privaudit.api.epsilon import epsilon

    doc = epsilon(defense=defense, batch_size=batch_size, dataset_size=dataset_size, epochs=epochs,
                  noise_multiplier=noise_multiplier, target_epsilon=target_epsilon, lr=lr, l2=l2,
                  smoothness=smoothness, delta=delta).to_json()
    if as_json:
        emit_json(doc)
        return
    from rich.table import Table

    table = Table(title=f"privaudit epsilon: {defense}", show_header=False)
    for key, value in doc.items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    info_console(as_json).print(table)
