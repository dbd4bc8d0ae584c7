"""An audit as a graph of jobs: train, pool logits, attack, report.

Each job is one unit of the audit that an executor may run anywhere:

* ``train:<run>``: train (or reuse) one model (a target, its shadow, its canary model, one
  reference model), or one stacked group of reference models where the fast engine trains
  them together (:func:`privaudit.training.stacked.stack_groups`, the same grouping a local
  run uses, so the numbers are the same);
* ``logits:<pool>``: the logits of every model of one reference pool on the pool samples
  and the population (:func:`privaudit.pools.ensure_pool`, once the pool's models exist);
* ``attack:<target>``: every attack of one target (:func:`privaudit.attacking.attack_target`),
  once its target, shadow, pool logits and canary model exist;
* ``report``: the reports, from the whole workspace, after every attack.

A job names the workspace folders it reads (``inputs``) and writes (``outputs``), relative
to the workspace root, so that an executor whose workers do not share the driver's
filesystem can ship them (:mod:`privaudit.executor.bundle`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from privaudit.attacking import AttackPlan
from privaudit.config import RunConfig
from privaudit.pools import POOLS_FOLDER, pool_name
from privaudit.training.stacked import stack_groups

@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    configs: tuple[RunConfig, ...] = ()   # train: the models; logits, attack: the target recipe
    deps: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()          # workspace-relative folders read
    outputs: tuple[str, ...] = ()         # workspace-relative folders written
    pool_size: int = 0
    attacks: AttackPlan | None = field(default=None, compare=False)
    epochs_series: bool = False           # train: one recipe at several epoch counts, in one run

    @property
    def label(self) -> str:
        if self.kind == "train":
            c = self.configs[0]
            many = (f" to {max(x.train.epochs for x in self.configs)} epochs, saved at "
                    f"{', '.join(str(x.train.epochs) for x in self.configs)}" if self.epochs_series
                    else f" ×{len(self.configs)}" if len(self.configs) > 1 else "")
            return f"train {c.role} {c.model.name} {c.defence.label}{many}"
        return self.id.replace(":", " ", 1)


def _model_folder(cfg: RunConfig) -> str:
    return f"models/{cfg.run_name}"


def train_job(configs: Sequence[RunConfig]) -> Job:
    """The job that trains (or reuses) ``configs`` (one model, or one stacked group)."""
    return Job(id=f"train:{configs[0].run_name}", kind="train", configs=tuple(configs),
               outputs=tuple(_model_folder(c) for c in configs))


def epochs_job(configs: Sequence[RunConfig]) -> Job:
    """The job that trains one recipe once to its longest epoch count and saves the shorter
    ones on the way (:func:`privaudit.runs.ensure_epochs`)."""
    configs = sorted(configs, key=lambda c: c.train.epochs)
    return Job(id=f"train:{configs[-1].run_name}+epochs", kind="train", configs=tuple(configs),
               outputs=tuple(_model_folder(c) for c in configs), epochs_series=True)


def audit_jobs(targets: Sequence[RunConfig], attacks: AttackPlan,
               input_shape: tuple[int, int, int]) -> list[Job]:
    """The jobs of an audit of ``targets`` with ``attacks``, in an order that respects every
    dependency (each job after the jobs it depends on), without duplicates."""
    jobs: dict[str, Job] = {}

    def add(job: Job) -> str:
        jobs.setdefault(job.id, job)
        return job.id

    attack_ids = []
    for target in (t.validated() for t in targets):
        deps = [add(train_job([target]))]
        inputs = [_model_folder(target), f"attacks/{target.run_name}"]
        if attacks.shadow:
            shadow = target.as_shadow().validated()
            deps.append(add(train_job([shadow])))
            inputs.append(_model_folder(shadow))
        if attacks.pool_attacks:
            recipe = target.recipe
            members = [recipe.as_reference(attacks.pool_size, i).validated() for i in range(attacks.pool_size)]
            groups = stack_groups(members, input_shape) or [[m] for m in members]
            train_ids = [add(train_job(g)) for g in groups]
            pool = pool_name(recipe, attacks.pool_size)
            pool_folder = f"attacks/{POOLS_FOLDER}/{pool}"
            deps.append(add(Job(id=f"logits:{pool}", kind="logits", configs=(target,), deps=tuple(train_ids),
                                inputs=tuple(_model_folder(m) for m in members), outputs=(pool_folder,),
                                pool_size=attacks.pool_size)))
            inputs.append(pool_folder)
        if attacks.one_run:
            canary = target.recipe.as_canary().validated()
            deps.append(add(train_job([canary])))
            inputs.append(_model_folder(canary))
        attack_ids.append(add(Job(id=f"attack:{target.run_name}", kind="attack", configs=(target,), deps=tuple(deps),
                                  inputs=tuple(inputs), outputs=(f"attacks/{target.run_name}",), attacks=attacks)))
    add(Job(id="report", kind="report", deps=tuple(attack_ids)))
    return list(jobs.values())
