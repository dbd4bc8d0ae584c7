"""``privaudit.epsilon()``: what a NoisyCGD or DP-SGD setting costs in ε (or the noise that
meets a target ε), without training anything; ``privaudit epsilon`` prints it."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from privaudit.api import params
from privaudit.api.results import ShortRepr
from privaudit.core.config import either_spelling
from privaudit.core.defaults import MAX_BATCH_SIZE, MAX_EPOCHS
from privaudit.errors import ConfigError

DEFENCES = ("noisycgd", "dpsgd")


@dataclass(repr=False)
class EpsilonResult(ShortRepr):
    """The accounting of one setting: ``epsilon`` at ``delta``, the noise multiplier, the
    schedule, and (DP-SGD) the replace-one comparators. ``result["epsilon"]`` reads a value."""

    values: dict[str, Any]
    repr_first = ("epsilon", "noise_multiplier")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def epsilon(self) -> float:
        value: float = self.values["epsilon"]
        return value

    @property
    def noise_multiplier(self) -> float:
        value: float = self.values["noise_multiplier"]
        return value

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit epsilon --json`` prints."""
        return dict(self.values)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(f'{v:.6g}' if isinstance(v, float) else str(v))}"
                       f"</td></tr>" for k, v in self.values.items())
        return f"<table><caption>privaudit epsilon: {html.escape(self.values['defense'])}</caption>{rows}</table>"


def _dpsgd(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> dict[str, Any]:
    """DP-SGD's ε: under add/remove adjacency through Opacus's accountants, as ``privaudit
    train --dp`` reports it; under replace-one adjacency (the notion of the NoisyCGD bound)
    exactly, from dp_accounting's PLD accountant; and the paper's conservative replace-one
    comparator, Opacus's ε at noise multiplier σ/2 (docs/methods/b-hidden-state.md B.3)."""
    from privaudit.analysis.accounting import epsilon_from_history, replace_one_epsilon, replace_one_epsilon_sigma_half

    eps, accountant = epsilon_from_history([(noise_multiplier, sample_rate, steps)], delta)
    eps_r1, accountant_r1 = replace_one_epsilon(noise_multiplier, sample_rate, steps, delta)
    eps_half, accountant_half = replace_one_epsilon_sigma_half(noise_multiplier, sample_rate, steps, delta)
    return {"epsilon": eps, "accountant": accountant, "epsilon_replace_one": eps_r1,
            "accountant_replace_one": accountant_r1, "epsilon_replace_one_sigma_half": eps_half,
            "accountant_replace_one_sigma_half": accountant_half}


@params.options_named
@either_spelling
def epsilon(*, defence: str, batch_size: int, dataset_size: int, epochs: int, noise_multiplier: float | None = None,
            target_epsilon: float | None = None, lr: float | None = None, l2: float | None = None,
            smoothness: float | None = None, delta: float = 1e-5) -> EpsilonResult:
    """The ε at ``delta`` of ``defense`` (``noisycgd``: the hidden-state bound for the last
    iterate; ``dpsgd``: Opacus's accountant) for ``epochs`` over ``dataset_size`` samples in
    batches of ``batch_size``, at ``noise_multiplier``, or the noise multiplier that meets
    ``target_epsilon`` (give exactly one). NoisyCGD needs ``lr`` and ``l2`` (the contraction
    1 − lr·l2) and takes the loss's ``smoothness`` when known."""
    params.one_of(defence, "--defence", *DEFENCES)
    params.in_range(batch_size, "--batch-size", 1, MAX_BATCH_SIZE)
    params.in_range(dataset_size, "--dataset-size", 1, 10**10)
    params.in_range(epochs, "--epochs", 1, MAX_EPOCHS)
    params.bounded(params.RANGES, noise_multiplier=noise_multiplier)
    params.in_range(target_epsilon, "--target-epsilon", 0, 1e4, True)
    params.in_range(delta, "--delta", 0, 1, True)
    params.in_range(lr, "--lr", 0, 100, True)
    params.in_range(l2, "--weight-decay", 0, 1e6, True)  # λ > 0: the bound needs strong convexity
    params.in_range(smoothness, "--smoothness", 0, 1e12, True)
    if (noise_multiplier is None) == (target_epsilon is None):
        raise ConfigError("give exactly one of --sigma and --target-epsilon")
    if not (1 <= batch_size <= dataset_size) or epochs < 1:
        raise ConfigError(f"need 1 <= --batch-size <= --dataset-size and --epochs >= 1 "
                          f"(got {batch_size}, {dataset_size}, {epochs})")
    # NoisyCGD: ⌊n/b⌋ full batches; DP-SGD: privaudit's Poisson schedule, ⌈n/b⌉ steps an epoch
    per_epoch = dataset_size // batch_size if defence == "noisycgd" else -(-dataset_size // batch_size)
    if per_epoch * epochs > 10**9:
        raise ConfigError(f"{per_epoch * epochs:,} steps ({per_epoch:,} an epoch for {epochs:,} epochs) is beyond "
                          "what an accountant can compose; check --dataset-size, --batch-size and --epochs")
    doc: dict[str, Any] = {"defense": defence, "delta": delta, "dataset_size": dataset_size, "batch_size": batch_size,
                 "epochs": epochs, "batches_per_epoch": per_epoch}
    if defence == "noisycgd":
        if lr is None or l2 is None:
            raise ConfigError("--defence noisycgd needs --lr and --weight-decay (the bound depends on the contraction "
                              "1 - lr·λ)")
        from privaudit.analysis.accounting import replace_one_epsilon, replace_one_epsilon_sigma_half
        from privaudit.analysis.hidden_state import noisycgd_epsilon, noisycgd_noise_for_epsilon, smoothness_ceiling

        if noise_multiplier is not None:
            p = noisycgd_epsilon(noise_multiplier, dataset_size, batch_size, epochs, lr, l2, delta, smoothness)
        else:
            assert target_epsilon is not None  # exactly one of --sigma and --target-epsilon is given
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
            raise ConfigError("--lr, --weight-decay and --smoothness are for --defence noisycgd")
        from privaudit.analysis.accounting import calibrate_noise_multiplier

        q, steps = 1.0 / per_epoch, per_epoch * epochs
        if noise_multiplier is None:
            assert target_epsilon is not None  # exactly one of --sigma and --target-epsilon is given
            noise_multiplier, _ = calibrate_noise_multiplier(target_epsilon, delta, q, steps)
        doc.update(noise_multiplier=noise_multiplier, sample_rate=q, steps=steps, adjacency="add-remove",
                   **_dpsgd(noise_multiplier, q, steps, delta))
    return EpsilonResult(doc)
