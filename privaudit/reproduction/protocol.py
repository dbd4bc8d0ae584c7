"""The MG-noise paper's CIFAR-10 protocol as lists of model configs (docs/methods/a-mg-noise.md A.3–A.5).

Three experiments, each a list of ordinary :class:`~privaudit.core.config.RunConfig` targets, so
that every model is the cached, resumable get-or-train of :mod:`privaudit.pipeline.runs` and a model
``privaudit audit`` already trained with the same recipe is reused, not trained again:

* **accuracy** (Figure 4): test accuracy against κ for the MLP, the Standard CNN and the
  two-block Improved CNN; targets only (80 epochs, batch 128 in the paper).
* **sweep** (Figures 5–7 and 9–10): the attack pipeline's recipe (50 epochs, batch 100), the
  undefended baseline and one target per κ of the MG-vs-DP grid for the MLP and both CNNs,
  plus one DP-SGD target per σ for the Standard and the three-block Improved CNN; each is
  attacked by the paper's shadow-model attack.
* **epochs** (the epoch sweep of Figures 5–7): the Standard CNN at κ ∈ {0, 0.5, 1.2, 1.8}
  trained for 20 to 120 epochs, each attacked.

``full`` is the paper's settings; ``reduced`` keeps every experiment and every claim but
shrinks parts, epochs and grids (docs/performance.md says how long it takes, most of it the
improved CNNs);
:attr:`Protocol.reduces` says what it changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from privaudit.core.config import RunConfig, make_config
from privaudit.core.defaults import REPRODUCE_EXPERIMENTS, REPRODUCE_FAMILIES, REPRODUCE_SCALES
from privaudit.errors import ConfigError

SCALES = REPRODUCE_SCALES
EXPERIMENTS = REPRODUCE_EXPERIMENTS
#: The architectures a reproduction can be limited to (``cnn-improved`` stands for both
#: improved variants: the two-block one of Figure 4 and the three-block one of Figures 9–10).
FAMILIES = REPRODUCE_FAMILIES
_ACCURACY_MODEL = {"mlp": "mlp", "cnn": "cnn", "cnn-improved": "cnn-improved-small"}


@dataclass(frozen=True)
class Protocol:
    """Every setting of one reproduction: which models, grids, recipes and seeds."""

    scale: str
    dataset: str
    seeds: tuple[int, ...]
    part_size: int
    families: tuple[str, ...]
    experiments: tuple[str, ...]
    # Figure 4
    accuracy_kappas: tuple[float, ...]
    accuracy_epochs: int
    accuracy_batch: int
    # Figures 5-7 and 9-10
    kappas: tuple[float, ...]
    sigmas: tuple[float, ...]
    epochs: int
    batch: int
    # the epoch sweep
    epoch_kappas: tuple[float, ...]
    epoch_grid: tuple[int, ...]
    reduces: tuple[str, ...] = ()
    max_grad_norm: float = 1.0
    delta: float = 1e-5

    def _config(self, model: str, seed: int, *, kappa: float = 0.0, sigma: float | None = None, epochs: int,
                batch: int) -> RunConfig:
        return make_config(model=model, dataset=self.dataset, part_size=self.part_size, kappa=kappa,
                           dp=sigma is not None, noise_multiplier=sigma, max_grad_norm=self.max_grad_norm,
                           delta=self.delta, epochs=epochs, batch_size=batch, seed=seed)

    def accuracy_configs(self) -> list[RunConfig]:
        """Figure 4's targets: per family's Figure-4 model, κ of the grid (0 is the baseline), seed."""
        if "accuracy" not in self.experiments:
            return []
        return [self._config(_ACCURACY_MODEL[f], s, kappa=k, epochs=self.accuracy_epochs, batch=self.accuracy_batch)
                for f in self.families for k in self.accuracy_kappas for s in self.seeds]

    def sweep_configs(self) -> list[RunConfig]:
        """The attacked targets of Figures 5–7 and 9–10: baseline and κ grid for every family;
        the σ grid (DP-SGD) for the CNNs."""
        if "sweep" not in self.experiments:
            return []
        out = []
        for family in self.families:
            for s in self.seeds:
                out += [self._config(family, s, kappa=k, epochs=self.epochs, batch=self.batch)
                        for k in (0.0, *self.kappas)]
                if family != "mlp":
                    out += [self._config(family, s, sigma=sigma, epochs=self.epochs, batch=self.batch)
                            for sigma in self.sigmas]
        return _unique(out)

    def epoch_configs(self) -> list[RunConfig]:
        """The epoch sweep's attacked targets: the Standard CNN, κ × epochs × seed."""
        if "epochs" not in self.experiments or "cnn" not in self.families:
            return []
        return _unique([self._config("cnn", s, kappa=k, epochs=e, batch=self.batch)
                        for k in self.epoch_kappas for e in self.epoch_grid for s in self.seeds])

    def model_count(self) -> int:
        """Models the reproduction needs: Figure 4's targets, every attacked target and its shadow."""
        attacked = {c.run_name for c in self.sweep_configs() + self.epoch_configs()}
        trained = {c.run_name for c in self.accuracy_configs()} | attacked
        return len(trained) + len(attacked)

    def describe(self) -> dict:
        """The settings, as the page and ``--json`` show them."""
        return {"scale": self.scale, "dataset": self.dataset, "seeds": list(self.seeds), "part_size": self.part_size,
                "models": list(self.families), "experiments": list(self.experiments),
                "figure4": {"kappas": list(self.accuracy_kappas), "epochs": self.accuracy_epochs,
                            "batch_size": self.accuracy_batch},
                "sweep": {"kappas": list(self.kappas), "sigmas": list(self.sigmas), "epochs": self.epochs,
                          "batch_size": self.batch, "max_grad_norm": self.max_grad_norm, "delta": self.delta},
                "epoch_sweep": {"kappas": list(self.epoch_kappas), "epochs": list(self.epoch_grid)},
                "reduces": list(self.reduces), "models_needed": self.model_count()}


def _unique(configs: Sequence[RunConfig]) -> list[RunConfig]:
    seen: dict[str, RunConfig] = {}
    for c in configs:
        seen.setdefault(c.run_name, c)
    return list(seen.values())


# The paper's grids (docs/methods/a-mg-noise.md A.3-A.5).
PAPER_ACCURACY_KAPPAS = (0.0, 0.2, 0.5, 0.7, 1.0, 1.25, 1.5, 2.0)  # Figure 4's grid "and beyond": 1.5, 2
PAPER_KAPPAS = (0.2, 0.6, 1.0, 1.4, 1.8, 2.5, 3.0)
PAPER_SIGMAS = (0.2, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0)
PAPER_EPOCH_KAPPAS = (0.0, 0.5, 1.2, 1.8)
PAPER_EPOCHS = (20, 40, 60, 80, 100, 120)


def protocol(scale: str = "reduced", dataset: str = "cifar10", *, seeds: Sequence[int] | None = None,
             families: Sequence[str] | None = None, experiments: Sequence[str] | None = None) -> Protocol:
    """The protocol of ``scale`` on ``dataset``, limited to ``families`` and ``experiments``
    (default: all) and run over ``seeds`` (default: 0, 1, 2, the paper's three)."""
    if scale not in SCALES:
        raise ConfigError(f"unknown `scale` {scale!r}; expected one of {', '.join(SCALES)}")
    if dataset not in ("cifar10", "digits"):
        raise ConfigError(f"unknown dataset {dataset!r}; expected cifar10 or digits")
    families = tuple(dict.fromkeys(families or FAMILIES))
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise ConfigError(f"unknown model {bad[0]!r} for reproduce; expected some of {', '.join(FAMILIES)}")
    experiments = tuple(dict.fromkeys(experiments or EXPERIMENTS))
    bad = [e for e in experiments if e not in EXPERIMENTS]
    if bad:
        raise ConfigError(f"unknown experiment {bad[0]!r}; expected some of {', '.join(EXPERIMENTS)}")
    seeds = tuple(dict.fromkeys(int(s) for s in (seeds if seeds is not None else (0, 1, 2))))
    if not seeds:
        raise ConfigError("reproduce needs at least one seed")
    full = Protocol(scale="full", dataset=dataset, seeds=seeds, part_size=10_520, families=families,
                    experiments=experiments, accuracy_kappas=PAPER_ACCURACY_KAPPAS, accuracy_epochs=80,
                    accuracy_batch=128, kappas=PAPER_KAPPAS, sigmas=PAPER_SIGMAS, epochs=50, batch=100,
                    epoch_kappas=PAPER_EPOCH_KAPPAS, epoch_grid=PAPER_EPOCHS)
    if dataset == "digits":  # the bundled 8x8 digits: parts of 449, batch 64 (privaudit's digits recipe)
        full = replace(full, part_size=449, accuracy_batch=64, batch=64)
    if scale == "full":
        if dataset == "digits":
            return replace(full, reduces=("the bundled 8x8 digits instead of CIFAR-10: parts of 449 and batch 64, "
                                          "every grid and epoch count as in the paper",))
        return full
    if dataset == "digits":
        return replace(full, scale="reduced", accuracy_kappas=(0.0, 0.2, 0.5, 1.0, 2.0), accuracy_epochs=20,
                       kappas=(0.6, 1.4, 3.0), sigmas=(0.5, 2.0), epochs=20, epoch_kappas=(0.0, 1.8),
                       epoch_grid=(5, 10, 20),
                       reduces=("the bundled 8x8 digits instead of CIFAR-10 (parts of 449, batch 64)",
                                "Figure 4: 20 epochs instead of 80, κ ∈ {0, 0.2, 0.5, 1, 2}",
                                "Figures 5-7, 9-10: 20 epochs instead of 50, κ ∈ {0.6, 1.4, 3}, σ ∈ {0.5, 2}",
                                "epoch sweep: κ ∈ {0, 1.8} over 5, 10, 20 epochs instead of 20-120"))
    return replace(full, scale="reduced", part_size=1_000, accuracy_kappas=(0.0, 0.2, 0.5, 1.0, 1.25, 2.0),
                   accuracy_epochs=15, kappas=(0.6, 1.4, 2.5), sigmas=(0.5, 2.0), epochs=15,
                   epoch_kappas=(0.0, 1.2), epoch_grid=(5, 10, 15),
                   reduces=("parts of 1,000 images instead of 10,520",
                            "Figure 4: 15 epochs instead of 80, κ ∈ {0, 0.2, 0.5, 1, 1.25, 2}",
                            "Figures 5-7, 9-10: 15 epochs instead of 50, κ ∈ {0.6, 1.4, 2.5} instead of 7 values, "
                            "σ ∈ {0.5, 2} instead of 8",
                            "epoch sweep: κ ∈ {0, 1.2} over 5, 10, 15 epochs instead of κ ∈ {0, 0.5, 1.2, 1.8} "
                            "over 20-120"))
