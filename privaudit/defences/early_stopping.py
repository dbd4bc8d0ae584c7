"""Early stopping, knob: the number of epochs. The recipe trained for fewer epochs than its
default, so the model fits its members less (less accuracy, less leakage). The setting is the
config's ``epochs``: the defence is the recipe with that one number changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from privaudit.defences.base import Defence, Knob, RunConfig
from privaudit.errors import ConfigError


class EarlyStopping(Defence):
    name = "early-stopping"
    tag = "es"
    title = "early stopping"
    knob = Knob("epochs", "epochs", 1, 100_000, grid=(20.0, 10.0, 5.0), integer=True, stronger="lower")
    paper = "stopping before convergence (e.g. Song & Mittal, Systematic Evaluation of Privacy Risks, arXiv 2003.10595)"
    formula = "train for fewer epochs"
    sets = ("epochs",)

    def recipe_fields(self, value: float) -> dict[str, Any]:
        return {"epochs": int(value)}

    def search_space(self, cfg: RunConfig) -> tuple[float, float, Callable[[float], float],
                                                    Callable[[float], float]]:
        """Strength s = E − epochs below the recipe's E epochs (s = 0: the full recipe), whole
        numbers up to E − 1 (one epoch)."""
        assert self.knob is not None  # the class's own knob
        full = int(cfg.train.epochs)
        first = float(max(0, full - min(self.knob.grid)))
        return (min(first, full - 1.0), float(full - 1), lambda s: float(full - int(round(s))),
                lambda s: float(min(max(0, round(s)), full - 1)))

    def validate(self, cfg: RunConfig) -> None:
        if cfg.train.epochs != int(cfg.defence.knob):
            raise ConfigError(f"`defence` early-stopping sets the epochs to its knob ({int(cfg.defence.knob)}); "
                              f"do not also give `epochs` ({cfg.train.epochs})")


DEFENCE = EarlyStopping()
