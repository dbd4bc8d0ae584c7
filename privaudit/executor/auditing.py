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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from privaudit.analysis.matching import ABOVE_TARGET, DEFAULT_TOLERANCE, match_strength
from privaudit.core.config import DP_NAMES, RunConfig
from privaudit.core.hooks import AuditHooks
from privaudit.defences import OUTPUT
from privaudit.defences import get as get_defence
from privaudit.errors import ArtifactError, ConfigError
from privaudit.executor import LocalExecutor, audit_jobs
from privaudit.executor.jobs import check_reused
from privaudit.executor.preview import estimated
from privaudit.pipeline.attacking import AttackPlan, AttackResult
from privaudit.pipeline.runs import DataCache, RunResult
from privaudit.pipeline.workspace import Workspace
from privaudit.reporting.build import ReportResult
from privaudit.training.loop import EpochCallback


def audit_plan(base: RunConfig, kappas: Sequence[float], sigmas: Sequence[float] = (),
               target_epsilons: Sequence[float] = (),
               others: Sequence[tuple[str, Sequence[float]]] = ()) -> list[RunConfig]:
    """Target configs of an audit: baseline, then MG noise per κ, then DP-SGD per σ / ε, then
    each other defence of ``others`` (its :mod:`privaudit.defences` name, its knob values).

    ``base`` carries the model, data and training recipe; its defence is replaced (and
    DP-SGD targets train in fp32 whatever ``base``'s precision; early stopping and weight
    decay replace the recipe's epochs and weight decay by their knob). κ = 0 in
    the grid is the baseline and is not repeated. Duplicates are removed, order is kept.
    """
    if sigmas and target_epsilons:
        raise ConfigError("give DP-SGD settings as `sigmas` or as `target_epsilons`, not both")
    dp = base.defence.mechanism  # DP-SGD, or NoisyCGD for convex-relu
    plan = [defended(base, "none")]
    plan += [defended(base, "mg", k) for k in kappas]
    plan += [defended(base, dp, s) for s in sigmas]
    plan += [defended(base, dp, target_epsilon=e) for e in target_epsilons]
    plan += [defended(base, name, v) for name, values in others for v in values]
    unique: dict[str, RunConfig] = {}
    for cfg in plan:
        unique.setdefault(cfg.validated().run_name, cfg)
    return list(unique.values())


def defended(base: RunConfig, name: str, value: float = 0.0, *, target_epsilon: float | None = None) -> RunConfig:
    """``base``'s target trained with the defence ``name`` of :mod:`privaudit.defences` (or
    ``none``) at knob ``value``: MG noise's κ (0: the undefended baseline), a DP defence's σ
    (or its ``target_epsilon`` instead; DP trains in fp32), any other defence's knob (early
    stopping and weight decay also set the recipe's epochs and weight decay)."""
    if name == "none" or (name == "mg" and value == 0):
        return replace(base, role="target", defence=base.defence.undefended)
    defence = get_defence(name)
    dp = defence.name in DP_NAMES
    value = 0.0 if dp and target_epsilon is not None else defence.check_knob(value)
    train = replace(base.train, **defence.recipe_fields(value))
    if dp:
        train = replace(train, precision="fp32")  # DP-SGD clips per-sample gradients in fp32
    return replace(base, role="target", train=train,
                   defence=base.defence.with_setting(defence.name, value, target_epsilon=target_epsilon))


@dataclass(frozen=True)
class TargetMatch:
    """One defence searched to one target accuracy: the knob found (None: cannot reach), the
    accuracy of its model on the search seed, whether that lies within the tolerance, the
    accuracy range the search saw, and every (knob, accuracy) it trained. A defence that stays
    more accurate than the target even at its strongest setting has that setting as its knob,
    not within the tolerance: it is audited there and reported "above the target"."""

    defence: str
    target: float
    knob: float | None
    accuracy: float
    within: bool
    tolerance: float
    reached: tuple[float, float]
    steps: tuple[tuple[float, float], ...] = ()
    run: str | None = None

    @property
    def status(self) -> str:
        """``reached``, or why not: ``cannot reach: above`` (the target lies above every
        accuracy the defence gave, beyond the tolerance), ``cannot reach: below``, or ``not
        reached`` (inside the range the search saw, but no setting it tried came within the
        tolerance: accuracy not monotone in the knob, or the budget spent)."""
        if self.within:
            return "reached"
        if self.knob is not None:
            return ABOVE_TARGET
        if self.target > self.reached[1] + self.tolerance:
            return "cannot reach: above"
        if self.target < self.reached[0] - self.tolerance:
            return "cannot reach: below"
        return "not reached"

    def to_dict(self) -> dict:
        return {"defence": self.defence, "target_accuracy": self.target, "knob": self.knob, "accuracy": self.accuracy,
                "within_tolerance": self.within, "tolerance": self.tolerance, "status": self.status,
                "accuracy_range": list(self.reached), "run": self.run,
                "steps": [{"knob": k, "accuracy": a} for k, a in self.steps]}


#: trainings a search may spend on one defence and target accuracy (on the first seed)
TARGET_SEARCH_STEPS = 8


def match_targets(base: RunConfig, defences: Sequence[str], targets: Sequence[float], workspace: Workspace,
                  data: DataCache, device: torch.device, *, tolerance: float = DEFAULT_TOLERANCE,
                  max_steps: int = TARGET_SEARCH_STEPS, known: dict[float, float] | None = None,
                  baseline_answers: bool = False, on_start: Callable[[RunConfig], None] | None = None,
                  on_epoch: EpochCallback | None = None) -> list[TargetMatch]:
    """For each defence and each target accuracy, the knob at which ``base``'s target (its
    recipe and seed) reaches that test accuracy within ``tolerance``.

    ``known``: settings already trained, strength → test accuracy, that bracket the search
    besides the baseline (``--match-accuracy``: the grid's κ); ``baseline_answers``: the
    undefended baseline may be the answer (knob 0), when it lies within the tolerance.

    A training-side defence's knob is searched (:func:`privaudit.analysis.matching.match_strength`,
    at most ``max_steps`` trainings per defence and target, the trainings of one defence shared
    by its targets); an output-side one keeps the model's accuracy, so it reaches a target only
    when the undefended baseline does (then its strongest default setting is audited). Each
    step is an ordinary cached target, so a rerun trains nothing and the audit then attacks
    the model the search trained."""
    from privaudit.pipeline.runs import ensure_model

    def accuracy(cfg: RunConfig) -> float:
        run = ensure_model(cfg, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
        return float(run.metrics["test_accuracy"])

    baseline = audit_plan(base, [])[0]
    base_acc = accuracy(baseline)
    out: list[TargetMatch] = []
    for name in defences:
        defence = get_defence(name)
        if not defence.searchable:  # one setting, its strongest: the model's accuracy does not follow the knob
            strongest = defence.knob.strongest if defence.knob is not None else 0.0
            cfg = defended(base, defence.name, strongest)
            acc = base_acc if defence.side == OUTPUT else accuracy(cfg)
            for t in targets:
                within = abs(acc - t) <= tolerance
                audited = within or acc > t + tolerance  # reached, or above the target: audited there
                out.append(TargetMatch(defence.name, t, strongest if audited else None, acc, within, tolerance,
                                       (acc, acc), (), cfg.validated().run_name if audited else None))
            continue
        first, top, to_value, rounder = defence.search_space(base)
        seen: dict[float, float] = {0.0: base_acc, **(known or {})}
        for t in targets:
            def at_strength(s: float, name: str = defence.name, to_value: Callable[[float], float] = to_value) -> float:
                return accuracy(defended(base, name, to_value(s)))

            found = match_strength(t, at_strength, seen,
                                   tolerance=tolerance, max_strength=top, max_steps=max_steps, first=first,
                                   rounder=rounder, defended_only=not baseline_answers)
            seen.update(found.steps)
            accuracies = [a for s, a in seen.items() if s > 0] or [base_acc]
            value = to_value(found.kappa) if found.kappa > 0 or baseline_answers else None
            ok = found.within and value is not None
            tried = {s: a for s, a in seen.items() if s > 0}
            acc = found.accuracy
            if not ok and tried and t < min(tried.values()) - tolerance:
                # above the target even at the strongest setting tried: audited there
                strongest = max(tried)
                value, acc = to_value(strongest), tried[strongest]
            elif not ok:
                value = None
            out.append(TargetMatch(defence.name, t, value, acc, ok, tolerance,
                                   (min(accuracies), max(accuracies)), tuple((to_value(s), a) for s, a in found.steps),
                                   defended(base, defence.name, value).validated().run_name if value is not None
                                   else None))
    return out


def search_standins(base: RunConfig, name: str, count: int) -> list[float]:
    """Up to ``count`` distinct knob values of defence ``name`` spread over the range its
    accuracy search walks from ``base`` (:meth:`~privaudit.defences.base.Defence.search_space`:
    from half its first try up to the bracket that ``count`` doublings reach, geometrically).
    ``--dry-run`` prices a search by these stand-ins, since which settings it trains depends on
    the accuracies found: one training each, at most the search's budget. A defence that is not
    searched gives its one audited setting (as :func:`match_targets` does)."""
    defence = get_defence(name)
    if not defence.searchable:
        return [defence.knob.strongest if defence.knob is not None else 0.0]
    first, top, to_value, rounder = defence.search_space(base)
    lo = first / 2 if first > 0 else min(1.0, top)
    hi = max(lo, min(top, first * 2.0 ** max(0, count - 1)))
    out: list[float] = []
    for i in range(count):
        s = rounder(lo * (hi / lo) ** (i / max(1, count - 1)) if lo > 0 else hi * i / max(1, count - 1))
        if s <= 0:
            continue
        try:
            value = defence.check_knob(to_value(s))
        except ConfigError:
            continue
        if value not in out:
            out.append(value)
    return out


TARGETS_FILE = "accuracy_targets.json"


def save_target_matches(workspace: Workspace, base: RunConfig, matches: Sequence[TargetMatch]) -> None:
    """Add the search's outcome to ``reports/accuracy_targets.json`` (written atomically; an
    earlier entry of the same recipe, defence and target replaced), where the report reads
    which setting answers which target accuracy."""
    from privaudit.files.atomic import read_json, write_json

    path = workspace.reports / TARGETS_FILE
    recipe = audit_plan(replace(base, seed=0), [])[0].run_name  # the baseline's name stands for the recipe
    try:
        entries = read_json(path) if path.is_file() else []
    except (ArtifactError, OSError):  # an unreadable file is replaced by this search's outcome
        entries = []
    entries = entries if isinstance(entries, list) else []
    new = [{"recipe": recipe, "model": base.model.name, "dataset": base.data.dataset, **m.to_dict()} for m in matches]
    keys = {(e["recipe"], e["defence"], e["target_accuracy"]) for e in new}
    kept = [e for e in entries if isinstance(e, dict)
            and (e.get("recipe"), e.get("defence"), e.get("target_accuracy")) not in keys]
    workspace.reports.mkdir(parents=True, exist_ok=True)
    write_json(path, kept + new)


def replicate(plans: Sequence[list[RunConfig]]) -> list[RunConfig]:
    """Several seeds' plans as one, in seed order (each seed's configs differ in their seed,
    so no two are the same model)."""
    return [cfg for plan in plans for cfg in plan]


def match_accuracy(plan: Sequence[RunConfig], workspace: Workspace, data: DataCache, device: torch.device, *,
                   tolerance: float = DEFAULT_TOLERANCE, on_start: Callable[[RunConfig], None] | None = None,
                   on_epoch: EpochCallback | None = None) -> list[tuple[RunConfig, TargetMatch]]:
    """``--match-accuracy``, the case of ``--target-accuracies`` (:func:`match_targets`) whose
    target accuracies are the DP-SGD targets' of ``plan`` (one seed's plan of
    :func:`audit_plan`) and whose defence is MG noise: per DP-SGD target, the κ at which an
    MG-noise target of the same recipe and seed reaches its test accuracy. The grid's MG
    targets bracket the search beside the baseline, and the baseline itself may be the answer
    (κ = 0, when it lies within the tolerance); every model it trains is an ordinary cached
    target, so a rerun trains nothing and the chosen κ's target is the one the audit then
    attacks."""
    from privaudit.pipeline.runs import ensure_model

    def accuracy(cfg: RunConfig) -> float:
        run = ensure_model(cfg, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
        return float(run.metrics["test_accuracy"])

    base = next((c for c in plan if c.defence.name == "none"), None)
    if base is None:
        raise ConfigError("`match_accuracy` needs the undefended baseline in the plan")
    known = {c.defence.kappa: accuracy(c) for c in plan if c.defence.name == "mg"}
    dp = [c for c in plan if c.defence.dp]
    found = match_targets(base, ["mg"], [accuracy(c) for c in dp], workspace, data, device, tolerance=tolerance,
                          known=known, baseline_answers=True, on_start=on_start, on_epoch=on_epoch)
    return list(zip(dp, found))


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
    with estimated("audit", jobs, workspace, data, device, hooks.on_estimate, executor=executor):
        results = executor.run(jobs, workspace, data, device, on_start=hooks.on_model_start, on_epoch=hooks.on_epoch,
                               on_job_done=hooks.on_job_done)
    trained = {r.name: r for job in jobs if job.kind == "train" for r in results[job.id]}
    return AuditResult(targets=[trained[t.run_name] for t in targets],
                       attacks=[results[f"attack:{t.run_name}"] for t in targets], report=results["report"])
