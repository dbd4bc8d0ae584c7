"""``privaudit epsilon``: what a setting costs in ε, or the noise that meets a target ε,
without training anything."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from privaudit.cli.common import JsonOpt, emit_json, fail, handle_errors, info_console, number, one_of
from privaudit.cli.options import DeltaOpt, NoiseMultiplierOpt, TargetEpsilonOpt
from privaudit.defaults import MAX_BATCH_SIZE, MAX_EPOCHS

DEFENSES = ("noisycgd", "dpsgd")


def _dpsgd(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> dict:
    """DP-SGD's ε: under add/remove adjacency through Opacus's accountants, as ``privaudit
    train --dp`` reports it; under replace-one adjacency (the notion of the NoisyCGD bound)
    exactly, from dp_accounting's PLD accountant; and the paper's conservative replace-one
    comparator, Opacus's ε at noise multiplier σ/2 (docs/methods.md B.3)."""
    from privaudit.accounting import epsilon_from_history, replace_one_epsilon, replace_one_epsilon_sigma_half

    eps, accountant = epsilon_from_history([(noise_multiplier, sample_rate, steps)], delta)
    eps_r1, accountant_r1 = replace_one_epsilon(noise_multiplier, sample_rate, steps, delta)
    eps_half, accountant_half = replace_one_epsilon_sigma_half(noise_multiplier, sample_rate, steps, delta)
    return {"epsilon": eps, "accountant": accountant, "epsilon_replace_one": eps_r1,
            "accountant_replace_one": accountant_r1, "epsilon_replace_one_sigma_half": eps_half,
            "accountant_replace_one_sigma_half": accountant_half}


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
    if (noise_multiplier is None) == (target_epsilon is None):
        fail("give exactly one of --noise-multiplier and --target-epsilon")
    if not (1 <= batch_size <= dataset_size) or epochs < 1:
        fail(f"need 1 <= --batch-size <= --dataset-size and --epochs >= 1 "
             f"(got {batch_size}, {dataset_size}, {epochs})")
    # NoisyCGD: ⌊n/b⌋ full batches; DP-SGD: privaudit's Poisson schedule, ⌈n/b⌉ steps an epoch
    per_epoch = dataset_size // batch_size if defense == "noisycgd" else -(-dataset_size // batch_size)
    if per_epoch * epochs > 10**9:
        fail(f"{per_epoch * epochs:,} steps ({per_epoch:,} an epoch for {epochs:,} epochs) is beyond what an "
             "accountant can compose; check --dataset-size, --batch-size and --epochs")
    doc: dict = {"defense": defense, "delta": delta, "dataset_size": dataset_size, "batch_size": batch_size,
                 "epochs": epochs, "batches_per_epoch": per_epoch}
    if defense == "noisycgd":
        if lr is None or l2 is None:
            fail("--defense noisycgd needs --lr and --l2 (the bound depends on the contraction 1 - lr*l2)")
        from privaudit.hidden_state import noisycgd_epsilon, noisycgd_noise_for_epsilon, smoothness_ceiling
        from privaudit.accounting import replace_one_epsilon, replace_one_epsilon_sigma_half

        if noise_multiplier is not None:
            p = noisycgd_epsilon(noise_multiplier, dataset_size, batch_size, epochs, lr, l2, delta, smoothness)
        else:
            p = noisycgd_noise_for_epsilon(target_epsilon, dataset_size, batch_size, epochs, lr, l2, delta,
                                           smoothness)
        doc.update(epsilon=p.epsilon, noise_multiplier=p.noise_multiplier, mu=p.mu, contraction=p.contraction,
                   lr=lr, l2=l2, adjacency="replace-one", accountant="shifted-interpolation GDP")
        if smoothness is None:  # the contraction 1 - lr*l2 is an assumption about the loss: say so
            doc.update(smoothness=None, assumes_smoothness_at_most=smoothness_ceiling(lr, l2),
                       assumption=f"contraction 1 - lr*l2 assumes a loss at most "
                                  f"{smoothness_ceiling(lr, l2):.4g}-smooth (2/lr - l2); give --smoothness if known")
        else:
            doc.update(smoothness=smoothness)
        # DP-SGD at the same sigma (Poisson rate b/n, the same steps), replace-one: exact, and the
        # paper's comparator (Opacus at sigma/2)
        same = (p.noise_multiplier, 1.0 / per_epoch, per_epoch * epochs, delta)
        doc["dpsgd_same_noise_epsilon_replace_one"], _ = replace_one_epsilon(*same)
        doc["dpsgd_same_noise_epsilon_replace_one_sigma_half"], _ = replace_one_epsilon_sigma_half(*same)
    else:
        if lr is not None or l2 is not None or smoothness is not None:
            fail("--lr, --l2 and --smoothness are for --defense noisycgd")
        from privaudit.accounting import calibrate_noise_multiplier

        q, steps = 1.0 / per_epoch, per_epoch * epochs
        if noise_multiplier is None:
            noise_multiplier, _ = calibrate_noise_multiplier(target_epsilon, delta, q, steps)
        doc.update(noise_multiplier=noise_multiplier, sample_rate=q, steps=steps, adjacency="add-remove",
                   **_dpsgd(noise_multiplier, q, steps, delta))
    if as_json:
        emit_json(doc)
        return
    from rich.table import Table

    table = Table(title=f"privaudit epsilon: {defense}", show_header=False)
    for key, value in doc.items():
        table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    info_console(as_json).print(table)
