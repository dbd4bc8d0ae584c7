"""Membership-inference attacks: pure functions over model outputs (logits).

The package's names load on first use, so that :mod:`privaudit.attacks.registry` (the table of
attacks, which the command line reads for its choices) imports no NumPy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from privaudit.attacks.scores import confidence_scores, loss_scores, softmax, top_k_posteriors
    from privaudit.attacks.shadow import ShadowAttack

_LAZY = {"ShadowAttack": "privaudit.attacks.shadow", "confidence_scores": "privaudit.attacks.scores",
         "loss_scores": "privaudit.attacks.scores", "softmax": "privaudit.attacks.scores",
         "top_k_posteriors": "privaudit.attacks.scores"}
__all__ = ["ShadowAttack", "confidence_scores", "loss_scores", "softmax", "top_k_posteriors"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privaudit.attacks' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
