"""An audit as a graph of jobs: train, pool logits, attack, report.

Each job is one unit of the audit that an executor may run anywhere:

* ``train:<run>``: train (or reuse) one model (a target, its shadow, its canary model, one
  reference model; an output-side defence's model is its undefended model's weights, saved
  once those exist, without training), or one stacked run of small MLPs that the fast engine trains together:
  targets, shadows, canaries and reference pools of every setting of the audit alike, where
  they share a schedule (:func:`privaudit.training.stacked.stack_groups`, the same grouping
  a local run uses, so the numbers are the same);
* ``logits:<pool>``: the logits of every model of one reference pool on the pool samples
  and the population (:func:`privaudit.pipeline.pools.ensure_pool`, once the pool's models exist);
* ``attack:<target>``: every attack of one target (:func:`privaudit.pipeline.attacking.attack_target`),
  once its target, shadow, pool logits and canary model exist;
* ``report``: the reports, from the whole workspace, after every attack.

A job names the workspace folders it reads (``inputs``) and writes (``outputs``), relative
to the workspace root, so that an executor whose workers do not share the driver's
filesystem can ship them (:mod:`privaudit.executor.bundle`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from privaudit.core.config import RunConfig
from privaudit.pipeline.attacking import AttackPlan
from privaudit.pipeline.pools import POOLS_FOLDER, pool_name
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
            if self.epochs_series:
                return (f"train {c.role} {c.model.name} {c.defence.label} to "
                        f"{max(x.train.epochs for x in self.configs)} epochs, saved at "
                        f"{', '.join(str(x.train.epochs) for x in self.configs)}")
            if len(self.configs) > 1:
                settings = len({x.defence.label for x in self.configs})
                if settings == 1 and len({x.role for x in self.configs}) == 1:
                    return f"train {c.role} {c.model.name} {c.defence.label} ×{len(self.configs)}"
                return (f"train {c.model.name} ×{len(self.configs)} stacked ({settings} setting"
                        f"{'s' if settings > 1 else ''}: {', '.join(dict.fromkeys(x.role for x in self.configs))})")
            return f"train {c.role} {c.model.name} {c.defence.label}"
        return self.id.replace(":", " ", 1)


def _model_folder(cfg: RunConfig) -> str:
    return f"models/{cfg.run_name}"


def train_job(configs: Sequence[RunConfig]) -> Job:
    """The job that trains (or reuses) ``configs`` (one model, or one stacked group, whose id
    names its first model and its size, so that it never takes the id of that model's own job)."""
    more = f"+{len(configs) - 1}" if len(configs) > 1 else ""
    return Job(id=f"train:{configs[0].run_name}{more}", kind="train", configs=tuple(configs),
               outputs=tuple(_model_folder(c) for c in configs))


def derive_job(config: RunConfig, base_job: str) -> Job:
    """The job that saves an output-side defence's model from the weights of its undefended
    model (:attr:`RunConfig.trained_as`, trained by ``base_job``): nothing trains."""
    return Job(id=f"train:{config.run_name}", kind="train", configs=(config,), deps=(base_job,),
               inputs=(_model_folder(config.trained_as),), outputs=(_model_folder(config),))


def epochs_job(configs: Sequence[RunConfig]) -> Job:
    """The job that trains one recipe once to its longest epoch count and saves the shorter
    ones on the way (:func:`privaudit.pipeline.runs.ensure_epochs`)."""
    configs = sorted(configs, key=lambda c: c.train.epochs)
    return Job(id=f"train:{configs[-1].run_name}+epochs", kind="train", configs=tuple(configs),
               outputs=tuple(_model_folder(c) for c in configs), epochs_series=True)


def audit_jobs(targets: Sequence[RunConfig], attacks: AttackPlan,
               data_shapes: Mapping[str, tuple[tuple[int, int, int], int]]) -> list[Job]:
    """The jobs of an audit of ``targets`` with ``attacks``, in an order that respects every
    dependency (each job after the jobs it depends on), without duplicates. ``data_shapes``
    gives each dataset's (input shape, number of samples), which decide what trains stacked:
    every model the audit needs (targets, shadows, reference pools, canary models) is cut into
    training runs at once, so that models of different settings share a stacked run."""
    jobs: dict[str, Job] = {}

    def add(job: Job) -> str:
        jobs.setdefault(job.id, job)
        return job.id

    needs: list[tuple[RunConfig, list[RunConfig], list[RunConfig]]] = []  # (target, its models, its pool)
    for target in (t.validated() for t in targets):
        models = [target]
        if attacks.shadow:
            models.append(target.as_shadow().validated())
        members = ([target.recipe.as_reference(attacks.pool_size, i).validated() for i in range(attacks.pool_size)]
                   if attacks.pool_attacks else [])
        models += members
        if attacks.one_run:
            models.append(target.recipe.as_canary().validated())
        needs.append((target, models, members))

    unique = list({c.run_name: c for _, models, _ in needs for c in models}.values())
    trained = list({c.trained_as.run_name: c.trained_as for c in unique}.values())  # output-side: undefended
    job_of: dict[str, str] = {}
    for dataset in dict.fromkeys(c.data.dataset for c in trained):
        shape, size = data_shapes[dataset]
        for group in stack_groups([c for c in trained if c.data.dataset == dataset], shape, size):
            jid = add(train_job(group))
            job_of.update((c.run_name, jid) for c in group)
    for c in unique:
        if c.run_name not in job_of:  # an output-side defence's model: the undefended weights, no training
            job_of[c.run_name] = add(derive_job(c, job_of[c.trained_as.run_name]))

    attack_ids = []
    for target, models, members in needs:
        deps = list(dict.fromkeys(job_of[c.run_name] for c in models if c not in members))
        inputs = [_model_folder(target), f"attacks/{target.run_name}"]
        inputs += [_model_folder(c) for c in models[1:] if c not in members]
        if members:
            pool = pool_name(target.recipe, attacks.pool_size)
            pool_folder = f"attacks/{POOLS_FOLDER}/{pool}"
            train_ids = tuple(dict.fromkeys(job_of[m.run_name] for m in members))
            deps.append(add(Job(id=f"logits:{pool}", kind="logits", configs=(target,), deps=train_ids,
                                inputs=tuple(_model_folder(m) for m in members), outputs=(pool_folder,),
                                pool_size=attacks.pool_size)))
            inputs.append(pool_folder)
        attack_ids.append(add(Job(id=f"attack:{target.run_name}", kind="attack", configs=(target,), deps=tuple(deps),
                                  inputs=tuple(inputs), outputs=(f"attacks/{target.run_name}",), attacks=attacks)))
    add(Job(id="report", kind="report", deps=tuple(attack_ids)))
    return list(jobs.values())
