"""The main job: a defence grid for one model, trained, attacked and reported.

For one architecture and dataset the plan is the undefended baseline, one MG-noise target
per κ of the grid and one DP-SGD target per σ (or per target ε) of the grid. Every target
gets its shadow model with the identical recipe, every target is attacked, and the reports
are rebuilt from the whole workspace. With a reference pool the strongest attacks (LiRA,
RMIA, many shadows) and the empirical ε lower bounds are added (:mod:`privaudit.pipeline.attacking`).
The audit is a graph of jobs (:mod:`privaudit.executor`) run in this process or on Ray;
each job is the cached get-or-train of :mod:`privaudit.pipeline.runs`, so an interrupted audit
resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import torch

from privaudit.pipeline.attacking import AttackPlan, AttackResult
from privaudit.core.config import RunConfig
from privaudit.defenses import get as get_defense
from privaudit.errors import ConfigError
from privaudit.executor import LocalExecutor, audit_jobs
from privaudit.executor.jobs import check_reused
from privaudit.executor.preview import estimated
from privaudit.core.hooks import AuditHooks
from privaudit.analysis.matching import DEFAULT_TOLERANCE, KappaMatch, match_kappa
from privaudit.reporting.build import ReportResult
from privaudit.pipeline.runs import DataCache, RunResult
from privaudit.training.trainer import EpochCallback
from privaudit.pipeline.workspace import Workspace



def audit_plan(base: RunConfig, kappas: Sequence[float], sigmas: Sequence[float] = (),
               target_epsilons: Sequence[float] = (),
               others: Sequence[tuple[str, Sequence[float]]] = ()) -> list[RunConfig]:
    """Target configs of an audit: baseline, then MG noise per κ, then DP-SGD per σ / ε, then
    each other defence of ``others`` (its :mod:`privaudit.defenses` name, its knob values).

    ``base`` carries the model, data and training recipe; its defence is replaced (and
    DP-SGD targets train in fp32 whatever ``base``'s precision; early stopping and weight
    decay replace the recipe's epochs and weight decay by their knob). κ = 0 in
    the grid is the baseline and is not repeated. Duplicates are removed, order is kept.
    """
    if sigmas and target_epsilons:
        raise ConfigError("give DP-SGD settings as --sigmas or as --target-epsilons, not both")
    plain = replace(base.defence, kappa=0.0, dp=False, noise_multiplier=None, target_epsilon=None)
    plan = [replace(base, role="target", defence=plain)]
    plan += [replace(base, role="target", defence=replace(plain, kappa=float(k))) for k in kappas]
    dp_base = replace(base, train=replace(base.train, precision="fp32"))  # DP-SGD clips in fp32
    plan += [replace(dp_base, role="target", defence=replace(plain, dp=True, noise_multiplier=float(s)))
             for s in sigmas]
    plan += [replace(dp_base, role="target", defence=replace(plain, dp=True, target_epsilon=float(e)))
             for e in target_epsilons]
    for name, values in others:
        defense = get_defense(name)
        for v in values:
            value = defense.check_knob(v)
            sets = defense.config_kwargs(value)
            train = replace(base.train, **{k: sets[k] for k in ("epochs", "weight_decay") if k in sets})
            plan.append(replace(base, role="target", train=train,
                                defence=replace(plain, method=sets["method"], knob=value)))
    unique: dict[str, RunConfig] = {}
    for cfg in plan:
        unique.setdefault(cfg.validated().run_name, cfg)
    return list(unique.values())


def replicate(plans: Sequence[list[RunConfig]]) -> list[RunConfig]:
    """Several seeds' plans as one, in seed order (each seed's configs differ in their seed,
    so no two are the same model)."""
    return [cfg for plan in plans for cfg in plan]


def match_accuracy(plan: Sequence[RunConfig], workspace: Workspace, data: DataCache, device: torch.device, *,
                   tolerance: float = DEFAULT_TOLERANCE, on_start: Callable[[RunConfig], None] | None = None,
                   on_epoch: EpochCallback | None = None) -> list[tuple[RunConfig, KappaMatch]]:
    """For each DP-SGD target of ``plan`` (one seed's plan of :func:`audit_plan`), the κ at
    which an MG-noise target of the same recipe and seed reaches its test accuracy
    (:func:`privaudit.analysis.matching.match_kappa`). The baseline and the grid's MG targets bracket
    the search; every model it trains is an ordinary cached target, so a rerun trains nothing
    and the chosen κ's target is the one the audit then attacks."""
    from privaudit.pipeline.runs import ensure_model

    def accuracy(cfg: RunConfig) -> float:
        run = ensure_model(cfg, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
        return float(run.metrics["test_accuracy"])

    mg = [c for c in plan if not c.defence.dp]
    baseline = next((c for c in mg if c.defence.kappa == 0), None)
    if baseline is None:
        raise ConfigError("--match-accuracy needs the undefended baseline in the plan")
    known = {c.defence.kappa: accuracy(c) for c in mg}
    out = []
    for dp_cfg in (c for c in plan if c.defence.dp):
        found = match_kappa(accuracy(dp_cfg),
                            lambda k: accuracy(replace(baseline, defence=replace(baseline.defence, kappa=k))),
                            known, tolerance=tolerance)
        known.update(found.steps)
        out.append((dp_cfg, found))
    return out


@dataclass
class AuditResult:
    targets: list[RunResult] = field(default_factory=list)
    attacks: list[AttackResult] = field(default_factory=list)
    report: ReportResult | None = None


def audit_graph(plan: Sequence[RunConfig], data: DataCache, attacks: AttackPlan) -> list:
    """The job graph of an audit of ``plan`` (:func:`privaudit.executor.audit_jobs`), each
    dataset's input shape and size read from ``data`` (they decide what trains stacked)."""
    targets = [cfg.validated() for cfg in plan]
    shapes = {}
    for cfg in targets:
        if cfg.data.dataset not in shapes:
            images = data.images(cfg)
            shapes[cfg.data.dataset] = (images.input_shape, len(images.y))
    return audit_jobs(targets, attacks, shapes)


def run_audit(plan: Sequence[RunConfig], workspace: Workspace, data: DataCache, device: torch.device,
              hooks: AuditHooks | None = None, attacks: AttackPlan | None = None, executor=None) -> AuditResult:
    """Train (or reuse) every target of ``plan`` and what its attacks need (shadow, reference
    pool, canary model), attack it as ``attacks`` says, rebuild reports: the job graph of
    :func:`audit_graph`, run by ``executor`` (default: in this process). With
    ``hooks.on_estimate`` the graph is priced first (:func:`privaudit.executor.preview.preview`)
    and the run's actual time is kept to correct later estimates."""
    hooks = hooks or AuditHooks()
    attacks = attacks or AttackPlan()
    workspace.ensure_writable()
    targets = [cfg.validated() for cfg in plan]
    jobs = audit_graph(targets, data, attacks)
    if hooks.on_plan:
        hooks.on_plan(jobs)
    check_reused(jobs, workspace)  # a damaged model, pool or attack folder stops the audit before it trains
    executor = executor or LocalExecutor()
    with estimated("audit", jobs, workspace, data, device, hooks.on_estimate):
        results = executor.run(jobs, workspace, data, device, on_start=hooks.on_model_start, on_epoch=hooks.on_epoch,
                               on_job_done=hooks.on_job_done)
    trained = {r.name: r for job in jobs if job.kind == "train" for r in results[job.id]}
    return AuditResult(targets=[trained[t.run_name] for t in targets],
                       attacks=[results[f"attack:{t.run_name}"] for t in targets], report=results["report"])
