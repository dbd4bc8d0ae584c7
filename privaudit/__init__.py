"""privaudit: membership-inference audits of image classifiers and their defences.

From Python (a notebook), each command is a function with the command's options as keyword
arguments, returning a result object::

    import privaudit
    report = privaudit.audit(dataset="digits", kappas=[0.5, 1], sigmas=[1], seeds=[0, 1])
    report.table            # the trade-off table (pandas)
    report.verdicts         # which defence leaks less at equal accuracy, with intervals
    report.scores()         # per-sample membership scores of every attack
    privaudit.attack("mlp", attacks="lira", workdir="ws").metrics   # a row per target and attack
    privaudit.report(workdir="ws").verdicts                         # the reports rebuilt
    privaudit.scan(logits_in=..., labels_in=..., logits_out=..., labels_out=...).table
    privaudit.export_logits("target-mlp-…", out="t.npz", workdir="ws").shapes
    privaudit.audit_model(weights="model.pt", members="0:5000", dataset="digits").references
    privaudit.epsilon(defense="dpsgd", batch_size=128, dataset_size=10_520, epochs=50, noise_multiplier=1.0).epsilon
    privaudit.theory("smoothing", kappas=[0.5, 1]).headline
    privaudit.reproduce("mg-noise", dataset="digits").counts

The names load on first use (``import privaudit`` does not import torch):
:func:`audit`, :func:`train`, :func:`attack`, :func:`report`, :func:`scan`,
:func:`export_logits`, :func:`audit_model`, :func:`epsilon`, :func:`theory`,
:func:`reproduce`, their results :class:`AuditReport`, :class:`TrainedModels`,
:class:`AttackResults`, :class:`WorkspaceReport`, :class:`ScanReport`,
:class:`ExportedLogits`, :class:`ModelAudit`, :class:`EpsilonResult`, :class:`TheoryResult`,
:class:`Reproduction`, and :mod:`privaudit.errors` (``__init__.pyi`` declares them for type
checkers).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "audit": "privaudit.api.audit", "AuditReport": "privaudit.api.audit",
    "train": "privaudit.api.train", "TrainedModels": "privaudit.api.train", "Recipe": "privaudit.api.recipe",
    "epsilon": "privaudit.api.epsilon", "EpsilonResult": "privaudit.api.epsilon",
    "scan": "privaudit.api.scan", "ScanReport": "privaudit.api.scan",
    "reproduce": "privaudit.api.reproduce", "Reproduction": "privaudit.api.reproduce",
    "attack": "privaudit.api.attack", "AttackResults": "privaudit.api.attack",
    "report": "privaudit.api.report", "WorkspaceReport": "privaudit.api.report",
    "export_logits": "privaudit.api.export_logits", "ExportedLogits": "privaudit.api.export_logits",
    "audit_model": "privaudit.api.audit_model", "ModelAudit": "privaudit.api.audit_model",
    "theory": "privaudit.api.theory", "TheoryResult": "privaudit.api.theory",
}
__all__ = ["__version__", "errors", *_LAZY]


def __getattr__(name: str) -> Any:
    if name == "errors":
        return importlib.import_module("privaudit.errors")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privaudit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
