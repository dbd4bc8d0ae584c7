"""Weight decay, knob λ: the recipe's Adam with L2 coupled to the gradient (PyTorch's
``Adam(weight_decay=λ)``: λ·w is added to each gradient before Adam's moment estimates, not
AdamW's decoupled shrinkage), at a λ far above the recipe's default 1e-7. The setting is the
config's ``weight_decay``, so the defence is the recipe with that one number changed."""

from __future__ import annotations

from typing import Any

from privaudit.defences.base import Defence, Knob, RunConfig
from privaudit.errors import ConfigError


class WeightDecay(Defence):
    name = "weight-decay"
    tag = "wd"
    title = "weight decay"
    knob = Knob("lambda", "λ", 0.0, 10.0, grid=(0.001, 0.01, 0.1), low_open=True)
    paper = "L2 regularisation (coupled, as PyTorch's Adam applies it)"
    formula = "∇ ← ∇ℓ + λ·w before Adam's update"
    sets = ("weight_decay",)

    def recipe_fields(self, value: float) -> dict[str, Any]:
        return {"weight_decay": value}

    def validate(self, cfg: RunConfig) -> None:
        if cfg.train.weight_decay != cfg.defence.knob:
            raise ConfigError(f"`defence` weight-decay sets the weight decay to its knob ({cfg.defence.knob:g}); "
                              f"do not also give `weight_decay` ({cfg.train.weight_decay:g})")
        if cfg.model.name == "convex-relu":
            raise ConfigError("convex-relu's `weight_decay` is NoisyCGD's L2 coefficient, not a defence knob")


DEFENCE = WeightDecay()
