"""A saved model as its queries see it: the model followed by its defence's output
transform (:meth:`privaudit.defences.base.Defence.release`: top-k scores, rounded scores,
the label alone, HAMP's output modification). The workspace loads every model through
:func:`released`, so every attack queries what the defended model releases, never more."""

from __future__ import annotations

from torch import nn

from privaudit.defences import Defence, of_config


class Released(nn.Module):
    """``model`` whose outputs pass through ``defense.release(·, knob)``."""

    def __init__(self, model: nn.Module, defence: Defence, knob: float):
        super().__init__()
        self.model = model
        self.defence = defence
        self.knob = knob

    def forward(self, x):
        return self.defence.release(self.model(x), self.knob)


def released(model: nn.Module, defence) -> nn.Module:
    """``model`` as queried under the defence config ``defence`` (itself when its defence
    does not change outputs)."""
    chosen = of_config(defence)
    if chosen is None or not chosen.transforms_output:
        return model
    return Released(model, chosen, defence.knob)
