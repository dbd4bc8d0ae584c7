"""Progress callbacks of an audit (the command line's bars, a notebook's own display): a
light module, so that a caller builds them before the library loads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class AuditHooks:
    """Optional callbacks, each called from the driver's thread."""

    on_model_start: Callable[[Any], None] | None = None             # (config) when a model trains (local executor)
    on_epoch: Callable[[int, int, float], None] | None = None       # (epoch, epochs, loss) (local executor)
    on_plan: Callable[[list], None] | None = None                   # the job graph, once
    on_job_done: Callable[[Any, bool], None] | None = None          # (job, whether it was already done)
    on_estimate: Callable[[Any], None] | None = None                # the run's RunPlan (its time), once, at its start
