"""The defences privaudit trains and audits, one module each, behind one interface
(:class:`privaudit.defences.base.Defence`).

:data:`DEFENCES` lists them by name in the order the report shows them: the paper's two (MG
noise, DP-SGD) first, then the other training-side defences, then the output-side ones.
:func:`get` and :func:`parse` turn the command line's names into defences, or into one-line
errors that list what exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.defences import (
    advreg,
    confidence_penalty,
    distillation,
    dpsgd,
    dropout,
    early_stopping,
    hamp,
    input_noise,
    label_smoothing,
    mg_noise,
    mixup,
    output,
    relaxloss,
    weight_decay,
)
from privaudit.defences.base import OUTPUT, TRAINING, Defence, Knob
from privaudit.defences.hooks import TrainingContext, TrainingHooks
from privaudit.errors import ConfigError

__all__ = ["DEFENCES", "Defence", "Knob", "TrainingContext", "TrainingHooks", "OUTPUT", "TRAINING", "get", "parse",
           "names", "of_config"]

DEFENCES: dict[str, Defence] = {d.name: d for d in (
    mg_noise.DEFENCE, dpsgd.DEFENCE, dpsgd.NOISYCGD, input_noise.DEFENCE, dropout.DEFENCE, weight_decay.DEFENCE,
    label_smoothing.DEFENCE, confidence_penalty.DEFENCE, early_stopping.DEFENCE, mixup.DEFENCE,
    relaxloss.DEFENCE, hamp.DEFENCE, advreg.DEFENCE, distillation.DEFENCE,
    output.TOP_K, output.ROUNDING, output.LABEL_ONLY,
)}
#: the paper's defences, with grid options (``--kappas``, ``--sigmas``) and table columns (``kappa``,
#: ``noise_multiplier``, ``epsilon``) of their own; in a config every defence is a (name, knob)
FIELD_DEFENCES = ("mg", "dpsgd", "noisycgd")
ALIASES = {"mg-noise": "mg", "dp-sgd": "dpsgd", "dp": "dpsgd", "topk": "top-k", "labelonly": "label-only",
           "label-smooth": "label-smoothing"}


def help_text() -> str:
    """Every defence with its knob, for the command line's help: ``mg (κ), ..., label-only``."""
    return ", ".join(d.name if d.knob is None else f"{d.name} ({d.knob.symbol} in {d.knob.range_text()})"
                     for d in DEFENCES.values())


def names(side: str | None = None) -> list[str]:
    """Every defence's name (of one ``side``: ``training`` or ``output``)."""
    return [n for n, d in DEFENCES.items() if side is None or d.side == side]


def get(name: str) -> Defence:
    """The defence called ``name`` (or an alias of it), else a one-line error listing them."""
    key = ALIASES.get(name, name) if isinstance(name, str) else name
    if key not in DEFENCES:
        raise ConfigError(f"unknown defence {name!r}; expected one of {', '.join(DEFENCES)}")
    return DEFENCES[key]


def parse(text: str | Sequence[object]) -> list[Defence]:
    """``"all"``, ``"label-smoothing,mixup"`` or a list of names → the defences, in the
    order given, each once (``all``: every defence but NoisyCGD, which is convex-relu's)."""
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else [str(s).strip() for s in text]
    items = [s for s in items if s]
    if not items:
        raise ConfigError(f"`defences` needs at least one name: all, or some of {', '.join(DEFENCES)}")
    out: list[Defence] = []
    for item in items:
        chosen = [d for n, d in DEFENCES.items() if n != "noisycgd"] if item == "all" else [get(item)]
        out += [d for d in chosen if d not in out]
    return out


def other(name: object) -> Defence | None:
    """The defence a table row's ``defence`` names when it is neither the baseline, MG noise
    nor DP (those the table describes by their own columns), else None."""
    if isinstance(name, str) and name in DEFENCES and name not in FIELD_DEFENCES:
        return DEFENCES[name]
    return None


def of_config(defence: object) -> Defence | None:
    """The registry defence of a config's defence when it is neither none, MG noise nor DP
    (whose knobs the training engines read as ``kappa`` and ``noise_multiplier``), else None."""
    method = getattr(defence, "method", "")
    return get(method) if method else None
