"""``privaudit.audit()``: the main job from Python, and what it returns.

The command line's ``privaudit audit`` is this function with its options as keyword
arguments (the same names, with ``-`` as ``_``, and the same defaults), its output the
:class:`AuditReport` printed: ``--json`` is :meth:`AuditReport.to_dict`.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.grids import AuditGrids, GridRequest, resolve_grids
from privaudit.api.recipe import Recipe
from privaudit.api.repair import computes_damage_again
from privaudit.api.results import ShortRepr
from privaudit.core.config import either_spelling
from privaudit.core.defaults import DEFAULT_POOL_SIZE
from privaudit.core.hooks import AuditHooks
from privaudit.core.timing import CLOCK, importing
from privaudit.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.core.config import RunConfig
    from privaudit.executor.auditing import AuditResult, TargetMatch
    from privaudit.executor.plan import Job
    from privaudit.executor.preview import RunPlan
    from privaudit.pipeline.attacking import AttackResult
    from privaudit.pipeline.runs import DataCache, RunResult
    from privaudit.pipeline.workspace import Workspace


@dataclass(repr=False)
class AuditReport(ShortRepr):
    """What an audit produced: the trade-off table, the verdicts, the report's paths, and
    per-sample scores on demand. A notebook cell that ends with it shows the first screen of
    the report (:meth:`_repr_html_`)."""

    table: pd.DataFrame            #: the trade-off table (``reports/tradeoff.csv``): a row per target and attack
    verdicts: pd.DataFrame         #: "which defence leaks less?" at equal accuracy, with intervals
    report_path: Path                #: the self-contained HTML report
    csv_path: Path                   #: the trade-off table as CSV
    workdir: Path
    seeds: list[int]
    executor: str
    jobs: int
    wall_seconds: float
    phase_seconds: dict[str, float]
    #: privaudit.pipeline.runs.RunResult, one per target
    targets: list[RunResult] = field(repr=False, default_factory=list)
    #: each target's config, in the order of ``targets``
    configs: list[RunConfig] = field(repr=False, default_factory=list)
    #: privaudit.pipeline.attacking.AttackResult, one per target
    attacks: list[AttackResult] = field(repr=False, default_factory=list)
    summary: Any = field(repr=False, default=None)            #: privaudit.reporting.summary.Summary
    match_accuracy: list[tuple[RunConfig, TargetMatch]] = field(repr=False, default_factory=list)
    #: privaudit.executor.auditing.TargetMatch
    target_matches: list[TargetMatch] = field(repr=False, default_factory=list)
    attack_plan: Any = field(repr=False, default=None)

    def scores(self, target: str | None = None) -> pd.DataFrame:
        """Per-sample membership scores of every attack on ``target`` (a run name; default:
        the first target, the undefended baseline): one row per sample, ``member`` (1 for a
        training member) and a column per attack (higher: more likely a member)."""
        import numpy as np
        import pandas as pd

        names = [a.target for a in self.attacks]
        name = target or (names[0] if names else None)
        if name not in names:
            raise ConfigError(f"no attacked target {target!r} in this audit; expected one of {', '.join(names)}")
        path = self.workdir / "attacks" / name / "scores.npz"
        with np.load(path, allow_pickle=False) as z:
            frame = {"member": z["labels"].astype(int)}
            frame.update({k[len("score_"):]: z[k] for k in z.files if k.startswith("score_")})
        return pd.DataFrame(frame)

    def summary_rows(self) -> list[tuple[RunConfig, dict[str, Any], dict[str, Any], dict[str, Any]]]:
        """Per target: (its config, its model's metrics, the metrics of the attacks asked for,
        the attacks' extras), what the command line's summary table prints."""
        asked = self.attack_plan.asked if self.attack_plan is not None else (lambda m: m)
        return [(cfg, run.metrics, asked(a.metrics), a.extras)
                for cfg, run, a in zip(self.configs, self.targets, self.attacks)]

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit audit --json`` prints."""
        asked = self.attack_plan.asked if self.attack_plan is not None else (lambda m: m)
        return {
            "wall_seconds": self.wall_seconds,
            "executor": self.executor,
            "jobs": self.jobs,
            "phase_seconds": self.phase_seconds,
            "seeds": self.seeds,
            "match_accuracy": [{"dp_run": c.run_name, **m.to_dict()} for c, m in self.match_accuracy],
            "target_accuracies": [m.to_dict() for m in self.target_matches],
            "targets": [{"run": t.name, "path": str(t.path), "reused": t.reused,
                         "metrics": {k: v for k, v in t.metrics.items() if k != "loss_history"}} for t in self.targets],
            "attacks": [{"target": a.target, "shadow": a.shadow, "path": str(a.path), "metrics": asked(a.metrics),
                         **a.extras} for a in self.attacks],
            "report": {"csv": str(self.csv_path), "html": str(self.report_path)},
            "summary": self.summary.to_dict() if self.summary is not None else None,
        }

    def _repr_html_(self) -> str:
        """The report's first screen in a notebook: the verdicts and each target's strongest
        attack, with a link to the whole page."""
        columns = [c for c in ("comparison", "attack", "metric", "n_seeds", "acc_low", "acc_high", "gap", "gap_lo",
                               "gap_hi", "verdict", "reason") if c in self.verdicts.columns]
        verdicts = (self.verdicts[columns].to_html(index=False, border=0, float_format=lambda v: f"{v:.3f}")
                    if len(self.verdicts) and columns else "<p>No verdicts: the audit compared no defences.</p>")
        keep = [c for c in ("target_run", "attack", "test_accuracy", "auc", "auc_lo", "auc_hi", "tpr_at_0p1pct_fpr",
                            "eps_lower_bound") if c in self.table.columns]
        table = self.table[keep].head(20).to_html(index=False, border=0, float_format=lambda v: f"{v:.3f}")
        return (f"<div><h3>privaudit audit: {len(self.targets)} targets, {len(self.seeds)} seed"
                f"{'s' if len(self.seeds) > 1 else ''}</h3><h4>At equal test accuracy, which defence leaks less?</h4>"
                f"{verdicts}<h4>Trade-off table (first 20 of {len(self.table)} rows)</h4>{table}"
                f"<p>Report: <a href=\"{html.escape(self.report_path.resolve().as_uri())}\">"
                f"{html.escape(str(self.report_path))}</a></p></div>")


@params.options_named
@either_spelling
@computes_damage_again
def audit(recipe: Recipe | None = None, *, data_dir: str | Path | None = None,
          download: bool = False, kappas: params.Grid = None, sigmas: params.Grid = None,
          target_epsilons: params.Grid = None, defences: str | Sequence[str] | None = None,
          knobs: Sequence[str] | dict[str, Any] | None = None, attacks: str | Sequence[str] = "all",
          pool_size: int = DEFAULT_POOL_SIZE, shadow_dataset: str | None = None,
          seed: int = 0, seeds: params.Seeds = None, match_accuracy: bool = False,
          target_accuracies: params.Grid = None,
          match_tolerance: float = 0.01, device: str = "auto", executor: str = "local",
          ray_address: str | None = None, cpus_per_job: int | None = None, workdir: str | Path = ".",
          hooks: AuditHooks | None = None, log: Callable[[str], None] | None = None,
          dry_run: bool = False, **overrides: Any) -> AuditReport | RunPlan:
    """Train the undefended baseline, an MG-noise target per κ and a DP-SGD target per σ (or
    target ε), and with ``defenses`` (``"all"`` or names of :mod:`privaudit.defences`) a target
    per knob value of each defence named (its default grid, or ``knobs``: ``"mixup=0.2,0.5"``
    entries or a mapping; MG noise and DP-SGD rows then come only when named or when
    ``kappas`` / ``sigmas`` are given); ``target_accuracies`` searches each defence's knob to
    each accuracy instead of a grid; ``canaries`` (``"mislabeled:N"``, ``"ood:N"``) plants
    worst-case points and reports each attack's TPR on them; each with its shadow (and the reference pool the strongest
    attacks need), attack every target, and write the trade-off table and the report under ``workdir``.

    ``recipe`` (a :class:`~privaudit.api.recipe.Recipe`) sets how every model trains; its fields
    may also be given, or overridden, as keyword arguments (``model=``, ``dataset=``,
    ``epochs=``, ...). Keyword arguments are the command line's options (``privaudit audit
    --help``): grids as
    ``"0.5,1"``, ``"none"`` or lists of numbers; ``seeds`` as ``"0,1,2"`` or a list (it
    replaces ``seed``); ``attacks`` as ``"all"``, ``"shadow,lira"`` or a list. A rerun with
    the same workdir reuses every finished artifact. ``hooks``: progress callbacks
    (:class:`privaudit.core.hooks.AuditHooks`); ``log``: receives the one-line notes the command
    line prints on stderr. Bad values raise :class:`privaudit.errors.ConfigError` with the
    command line's message."""
    t0 = time.perf_counter()
    recipe = params.recipe(recipe, overrides)
    model, dataset = recipe.model, recipe.dataset
    params.one_of(executor, "--executor", "local", "ray")
    grids = resolve_grids(GridRequest(model=model, dataset=dataset, kappas=kappas, sigmas=sigmas,
                                      target_epsilons=target_epsilons, defences=defences, knobs=knobs,
                                      target_accuracies=target_accuracies, match_accuracy=match_accuracy))
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    seed_list = params.seeds(seeds, seed)
    if not 0 < match_tolerance <= 1:
        raise ConfigError(f"--match-tolerance must be > 0 and <= 1 (got {match_tolerance:g})")
    params.writable_workdir(workdir)
    dataset_kwargs, data = params.dataset_config(dataset, data_dir, download)
    bases = [recipe.config(seed=s, dataset_kwargs=dataset_kwargs) for s in seed_list]  # validated

    with importing():
        from privaudit.executor.auditing import replicate

    plans = _grid_plans(bases, grids)
    attack_plan = params.attacks(attacks, pool_size, shadow_dataset)

    with importing():
        from privaudit.executor import make_executor
        from privaudit.pipeline.runs import DataCache
        from privaudit.pipeline.workspace import Workspace
        from privaudit.training import resolve_device

    say = log or (lambda line: None)
    hooks = hooks or AuditHooks()
    runner = make_executor(executor, address=ray_address, cpus_per_job=cpus_per_job)
    dev = resolve_device(device)
    data = data or DataCache(data_dir, download)
    if dry_run:
        return _preview(bases, plans, grids, attack_plan, Workspace(workdir), data, dev, runner, say)
    ws = Workspace(workdir).ensure_writable(log=say)
    ws.set_aside_legacy_results(say)
    matches: list[tuple[RunConfig, TargetMatch]] = []
    reached: list[TargetMatch] = []
    if grids.targets:
        plans, reached = _search_targets(bases, plans, grids, ws, data, dev, match_tolerance, hooks, say)
    if match_accuracy:
        plans, matches = _match_accuracy(bases, plans, grids, ws, data, dev, match_tolerance, hooks, say)
    plan = replicate(plans)
    say(f"audit: {len(plan)} targets ({model} on {dataset}, {len(seed_list)} seed"
        f"{'s' if len(seed_list) > 1 else ''}, device {dev}, executor {runner.name}) in {ws.root}")
    result, jobs = _run_jobs(plan, ws, data, dev, hooks, attack_plan, runner)
    rep = result.report
    assert rep is not None  # the audit's job graph ends with its report
    import pandas as pd

    summary = rep.summary
    verdicts = summary.verdicts if summary is not None else pd.DataFrame()
    return AuditReport(table=rep.table, verdicts=verdicts, report_path=Path(rep.html), csv_path=Path(rep.csv),
                       workdir=Path(ws.root), seeds=seed_list, executor=runner.name, jobs=jobs,
                       wall_seconds=time.perf_counter() - t0, phase_seconds=CLOCK.snapshot(),
                       targets=result.targets, configs=[c.validated() for c in plan], attacks=result.attacks,
                       summary=summary, match_accuracy=matches,
                       target_matches=reached,
                       attack_plan=attack_plan)


def _grid_plans(bases: list[RunConfig], grids: AuditGrids, extra_kappas: Sequence[float] = ()
                ) -> list[list[RunConfig]]:
    """Each seed's plan of the grids: the baseline, a target per MG-noise κ (and per κ in
    ``extra_kappas``), per DP-SGD σ or target ε, and per knob of every other defence."""
    from privaudit.executor.auditing import audit_plan

    return [audit_plan(b, grids.kappas + list(extra_kappas), grids.sigmas, grids.target_epsilons, grids.others)
            for b in bases]


def _run_jobs(plan: list[RunConfig], ws: Workspace, data: DataCache, dev: Any, hooks: AuditHooks,
              attack_plan: Any, runner: Any) -> tuple[AuditResult, int]:
    """Train, attack and report every target of ``plan`` on ``runner``; returns what
    :func:`~privaudit.executor.auditing.run_audit` returns and the number of jobs its graph held
    (``hooks.on_plan`` still sees each graph)."""
    from privaudit.executor.auditing import run_audit

    graph: list[Job] = []
    user_plan = hooks.on_plan

    def on_plan(jobs: list[Job]) -> None:
        graph.extend(jobs)
        if user_plan:
            user_plan(jobs)

    run_hooks = AuditHooks(on_model_start=hooks.on_model_start, on_epoch=hooks.on_epoch, on_plan=on_plan,
                           on_job_done=hooks.on_job_done, on_estimate=hooks.on_estimate)
    result = run_audit(plan, ws, data, dev, run_hooks, attack_plan, executor=runner)
    return result, len(graph)


def _search_targets(bases: list[RunConfig], plans: list[list[RunConfig]], grids: AuditGrids, ws: Workspace,
                    data: DataCache, dev: Any, tolerance: float, hooks: AuditHooks,
                    say: Callable[[str], None]) -> tuple[list[list[RunConfig]], list[TargetMatch]]:
    """``--target-accuracies``: each searched defence's knob found on the first seed for each
    target accuracy, and each seed's plan with the settings found (reached, or the strongest
    setting tried when even that stays above the target)."""
    from privaudit.executor.auditing import TARGET_SEARCH_STEPS, defended, match_targets, save_target_matches

    say(f"target accuracies {params.grid_text(grids.targets)}: searching {', '.join(grids.searched)} on seed "
        f"{bases[0].seed} (at most {TARGET_SEARCH_STEPS} trainings per defence and target, tolerance {tolerance:g})")
    reached = match_targets(bases[0], grids.searched, grids.targets, ws, data, dev, tolerance=tolerance,
                            on_start=hooks.on_model_start, on_epoch=hooks.on_epoch)
    save_target_matches(ws, bases[0], reached)
    for m in reached:
        say(f"target {m.target:g}: {m.defence} " + (f"knob {m.knob:g} -> {m.accuracy:.4f}" if m.within else
            f"{m.status}: audited at its strongest setting, knob {m.knob:g} -> {m.accuracy:.4f}"
            if m.knob is not None else f"{m.status} (accuracies {m.reached[0]:.3f}-{m.reached[1]:.3f} after "
            f"{len(m.steps)} trainings)"))
    plans = [p + [defended(b, m.defence, m.knob) for m in reached if m.knob is not None] for b, p in zip(bases, plans)]
    return [list({c.validated().run_name: c for c in p}.values()) for p in plans], reached


def _match_accuracy(bases: list[RunConfig], plans: list[list[RunConfig]], grids: AuditGrids, ws: Workspace,
                    data: DataCache, dev: Any, tolerance: float, hooks: AuditHooks,
                    say: Callable[[str], None]) -> tuple[list[list[RunConfig]], list[tuple[RunConfig, TargetMatch]]]:
    """``--match-accuracy``: for each DP-SGD setting of the first seed's plan, the MG-noise κ
    searched to its test accuracy, and each seed's plan of the grids with the κ found added
    (with each DP setting's config and its search's outcome)."""
    from privaudit.executor.auditing import match_accuracy as match_kappas

    say(f"match-accuracy: searching kappa for {len(grids.sigmas or grids.target_epsilons)} DP-SGD settings (seed "
        f"{bases[0].seed}, tolerance {tolerance:g})")
    matches = match_kappas(plans[0], ws, data, dev, tolerance=tolerance, on_start=hooks.on_model_start,
                           on_epoch=hooks.on_epoch)
    plans = _grid_plans(bases, grids, [m.knob for _, m in matches if m.knob])
    for dp_cfg, m in matches:
        say(f"match-accuracy: {dp_cfg.defence.label} test accuracy {m.target:.4f} -> " +
            (f"kappa {m.knob:g} ({m.accuracy:.4f}, {'within' if m.within else 'NOT within'} {m.tolerance:g}, "
             f"{len(m.steps)} search trainings)" if m.knob is not None else
             f"{m.status} ({len(m.steps)} search trainings)"))
    return plans, matches


def _preview(bases: list[RunConfig], plans: list[list[RunConfig]], grids: AuditGrids, attack_plan: Any,
             ws: Workspace, data: DataCache, dev: Any, runner: Any, say: Callable[[str], None]) -> RunPlan:
    """``--dry-run``: the run's plan priced, training nothing; the accuracy search of
    ``--target-accuracies`` (or of ``--match-accuracy``, its case) counted at its budget, by
    stand-in settings (which it trains depends on the accuracies)."""
    from privaudit.executor.auditing import audit_graph, replicate
    from privaudit.executor.preview import pool_savings, preview

    first = bases[0].seed
    notes: list[str] = []
    search: list[Job] = []
    # --match-accuracy is the search of --target-accuracies to each DP row's accuracy, MG noise's κ
    searched, targets = ((grids.searched, len(grids.targets)) if grids.targets else
                         (("mg",), len(grids.sigmas or grids.target_epsilons)) if grids.match_accuracy else ((), 0))
    if targets:
        from privaudit.executor.auditing import TARGET_SEARCH_STEPS, defended, search_standins
        from privaudit.executor.plan import train_job

        standins = {n: search_standins(bases[0], n, TARGET_SEARCH_STEPS * targets) for n in searched}
        search = [train_job([defended(bases[0], n, v).validated()]) for n, vals in standins.items() for v in vals]
        plans = [list({c.validated().run_name: c for c in
                       p + [defended(b, n, vals[i % len(vals)]) for n, vals in standins.items() if vals
                            for i in range(targets)]}.values()) for b, p in zip(bases, plans)]
        option = "--target-accuracies" if grids.targets else "--match-accuracy"
        notes.append(f"{option}: counted at its budget: the search's trainings on seed {first} "
                     f"(up to {TARGET_SEARCH_STEPS} per defence and target; {len(search)} in all for "
                     f"{len(searched)} defences x {targets} targets, an upper bound), and one setting per "
                     f"defence and target audited on every seed as if each target is reached, priced at stand-in "
                     f"settings (which settings depends on the accuracies found)")
    job_graph = audit_graph(replicate(plans), data, attack_plan)
    planned = {c.run_name for job in job_graph if job.kind == "train" for c in job.configs}
    job_graph = [j for j in search if j.configs[0].run_name not in planned] + job_graph
    run_plan = preview("audit", job_graph, ws, data, dev, log=say, notes=notes, executor=runner)
    run_plan.notes.extend(pool_savings(run_plan.models, attack_plan.pool_size))
    return run_plan
