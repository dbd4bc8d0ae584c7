"""``privaudit epsilon``: what a setting costs in ε, or the noise that meets a target ε,
without training anything."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from privaudit.cli.common import JsonOpt, emit_json, fail, handle_errors, info_console
from privaudit.cli.options import DeltaOpt
from privaudit.hidden_state import noisycgd_epsilon, noisycgd_noise_for_epsilon
from privaudit.training.dpsgd import calibrate_noise_multiplier, epsilon_from_history

DEFENSES = ("noisycgd", "dpsgd")


def _dpsgd(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> dict:
    """DP-SGD's ε through Opacus's accountants, as ``privaudit train --dp`` reports it
    (add/remove adjacency), and the replace-one ε (noise multiplier σ/2), the adjacency of
    the NoisyCGD bound and of the paper's comparison (papers.md B.3)."""
    eps, accountant = epsilon_from_history([(noise_multiplier, sample_rate, steps)], delta)
    eps_r1, accountant_r1 = epsilon_from_history([(noise_multiplier / 2, sample_rate, steps)], delta)
    return {"epsilon": eps, "accountant": accountant, "epsilon_replace_one": eps_r1,
            "accountant_replace_one": accountant_r1}


@handle_errors
def epsilon_cmd(
    defense: Annotated[str, typer.Option("--defense", "--defence", help="noisycgd (hidden-state bound for the last iterate) or dpsgd (Opacus accountant).")],
    batch_size: Annotated[int, typer.Option("--batch-size", help="NoisyCGD's fixed batch size b, or DP-SGD's expected Poisson batch size.")],
    dataset_size: Annotated[int, typer.Option("--dataset-size", help="Training set size n.")],
    epochs: Annotated[int, typer.Option("--epochs", help="Training epochs E.")],
    noise_multiplier: Annotated[Optional[float], typer.Option("--noise-multiplier", help="Noise multiplier sigma (noise std sigma*C, per batch mean sigma*C/b); give this or --target-epsilon.")] = None,
    target_epsilon: Annotated[Optional[float], typer.Option("--target-epsilon", help="Print the noise multiplier that meets this epsilon instead.")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", help="NoisyCGD step size eta (noisycgd only).")] = None,
    l2: Annotated[Optional[float], typer.Option("--l2", help="NoisyCGD L2 coefficient lambda > 0 (noisycgd only).")] = None,
    smoothness: Annotated[Optional[float], typer.Option("--smoothness", help="Smoothness beta of the loss, if known: the contraction becomes max(|1-eta*lambda|, |1-eta*beta|) (noisycgd only).")] = None,
    delta: DeltaOpt = 1e-5,
    as_json: JsonOpt = False,
) -> None:
    """The epsilon of a NoisyCGD or DP-SGD setting at delta, or the noise multiplier for a target epsilon."""
    if defense not in DEFENSES:
        fail(f"unknown --defense {defense!r}; expected noisycgd or dpsgd")
    if (noise_multiplier is None) == (target_epsilon is None):
        fail("give exactly one of --noise-multiplier and --target-epsilon")
    if not (1 <= batch_size <= dataset_size) or epochs < 1:
        fail(f"need 1 <= --batch-size <= --dataset-size and --epochs >= 1 "
             f"(got {batch_size}, {dataset_size}, {epochs})")
    # NoisyCGD: ⌊n/b⌋ full batches; DP-SGD: privaudit's Poisson schedule, ⌈n/b⌉ steps an epoch
    per_epoch = dataset_size // batch_size if defense == "noisycgd" else -(-dataset_size // batch_size)
    doc: dict = {"defense": defense, "delta": delta, "dataset_size": dataset_size, "batch_size": batch_size,
                 "epochs": epochs, "batches_per_epoch": per_epoch}
    if defense == "noisycgd":
        if lr is None or l2 is None:
            fail("--defense noisycgd needs --lr and --l2 (the bound depends on the contraction 1 - lr*l2)")
        if noise_multiplier is not None:
            p = noisycgd_epsilon(noise_multiplier, dataset_size, batch_size, epochs, lr, l2, delta, smoothness)
        else:
            p = noisycgd_noise_for_epsilon(target_epsilon, dataset_size, batch_size, epochs, lr, l2, delta,
                                           smoothness)
        doc.update(epsilon=p.epsilon, noise_multiplier=p.noise_multiplier, mu=p.mu, contraction=p.contraction,
                   lr=lr, l2=l2, adjacency="replace-one", accountant="shifted-interpolation GDP")
        # The paper's comparator at the same sigma: DP-SGD, Poisson rate b/n, replace-one (sigma/2).
        doc["dpsgd_same_noise_epsilon_replace_one"], _ = epsilon_from_history(
            [(p.noise_multiplier / 2, 1.0 / per_epoch, per_epoch * epochs)], delta)
    else:
        if lr is not None or l2 is not None or smoothness is not None:
            fail("--lr, --l2 and --smoothness are for --defense noisycgd")
        q, steps = 1.0 / per_epoch, per_epoch * epochs
        if noise_multiplier is None:
            noise_multiplier, _ = calibrate_noise_multiplier(target_epsilon, delta, q, steps)
        doc.update(noise_multiplier=noise_multiplier, sample_rate=q, steps=steps, adjacency="add-remove",
                   **_dpsgd(noise_multiplier, q, steps, delta))
    if as_json:
        emit_json(doc)
        return
    table = Table(title=f"privaudit epsilon: {defense}", show_header=False)
    for key, value in doc.items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    info_console(as_json).print(table)
