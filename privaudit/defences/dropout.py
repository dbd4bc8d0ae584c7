"""Dropout on the hidden layer, knob p: during training each hidden unit is zeroed with
probability p and the others scaled by 1/(1 − p); at evaluation the layer is the identity
(Srivastava et al., *Dropout: A Simple Way to Prevent Neural Networks from Overfitting*,
JMLR 2014). For ``mlp`` after its ReLU hidden layer, for ``cnn`` after its dense tanh layer
(:func:`privaudit.models.build_model`); the improved CNNs already carry dropout of their own."""

from __future__ import annotations

from typing import Any

from privaudit.defences.base import Defence, Knob, RunConfig
from privaudit.errors import ConfigError

MODELS = ("mlp", "cnn")


class Dropout(Defence):
    name = "dropout"
    tag = "do"
    title = "dropout"
    knob = Knob("p", "p", 0.0, 0.95, grid=(0.25, 0.5, 0.75), low_open=True)
    paper = "Srivastava et al., Dropout: A Simple Way to Prevent Neural Networks from Overfitting (JMLR 2014)"
    formula = "h ← h ⊙ m / (1 − p), m_j ~ Bernoulli(1 − p), training only"

    def validate(self, cfg: RunConfig) -> None:
        if cfg.model.name not in MODELS:
            raise ConfigError(f"`defence` dropout adds dropout to {' and '.join(MODELS)}, not to {cfg.model.name} "
                              "(the improved CNNs carry their own dropout; convex-relu and your own models have no "
                              "hidden layer privaudit knows)")

    def model_kwargs(self, value: float) -> dict[str, Any]:
        return {"dropout": value}


DEFENCE = Dropout()
