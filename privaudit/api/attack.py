"""``privaudit.attack()``: attack trained targets (training their shadow models, reference
pools and canary models as needed); ``privaudit attack`` prints what it returns."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.repair import computes_damage_again_with_targets
from privaudit.api.results import ShortRepr
from privaudit.core.config import MODELS, is_custom_model
from privaudit.core.defaults import DEFAULT_POOL_SIZE, MAX_POOL_SIZE
from privaudit.core.hooks import AuditHooks
from privaudit.core.timing import importing
from privaudit.errors import ArtifactError

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.core.config import RunConfig
    from privaudit.executor.plan import Job
    from privaudit.executor.preview import RunPlan
    from privaudit.pipeline.attacking import AttackPlan, AttackResult
    from privaudit.training.loop import EpochCallback


@dataclass(repr=False)
class AttackResults(ShortRepr):
    """The attacks of one ``attack`` call: a row per target and attack asked for
    (:attr:`metrics`), each target's attack folder, and the reports rebuilt afterwards."""

    metrics: pd.DataFrame          #: target, attack, and the attack's AUC, TPR at low FPR, ε lower bound, …
    workdir: Path
    report_path: Path | None = None  #: the rebuilt HTML report (None with ``report=False``)
    csv_path: Path | None = None     #: the rebuilt trade-off table
    #: privaudit.pipeline.attacking.AttackResult each
    results: list[AttackResult] = field(repr=False, default_factory=list)
    plan: Any = field(repr=False, default=None)              #: privaudit.pipeline.attacking.AttackPlan
    report: Any = field(repr=False, default=None)            #: privaudit.api.report.WorkspaceReport
    rows: list[tuple[RunConfig, dict[str, Any], dict[str, Any], dict[str, Any]]] = field(
        repr=False, default_factory=list)

    def summary_rows(self) -> list[tuple[RunConfig, dict[str, Any], dict[str, Any], dict[str, Any]]]:
        """Per target: (its config, its model's metrics, the metrics of the attacks asked for,
        the attacks' extras), what the command line's summary table prints."""
        return list(self.rows)

    @property
    def targets(self) -> list[str]:
        """The attacked targets' run names, in order."""
        return [r.target for r in self.results]

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit attack --json`` prints."""
        return {"attacks": [{"target": r.target, "shadow": r.shadow, "path": str(r.path), "reused": r.reused,
                             "metrics": self.plan.asked(r.metrics), **r.extras} for r in self.results],
                "report": {"csv": str(self.csv_path), "html": str(self.report_path)} if self.report else None}

    def _repr_html_(self) -> str:
        keep = [c for c in ("target", "attack", "auc", "auc_lo", "auc_hi", "tpr_at_0p1pct_fpr", "eps_lower_bound")
                if c in self.metrics.columns]
        table = self.metrics[keep].head(40).to_html(index=False, border=0, float_format=lambda v: f"{v:.3f}")
        link = (f"<p>Report: <a href=\"{html.escape(self.report_path.resolve().as_uri())}\">"
                f"{html.escape(str(self.report_path))}</a></p>" if self.report_path else "")
        return (f"<div><h3>privaudit attack: {len(self.results)} target{'s' if len(self.results) != 1 else ''} "
                f"(first 40 of {len(self.metrics)} rows)</h3>{table}{link}</div>")


def summary_rows(workspace: Any, results: Sequence[tuple[str, dict[str, Any], dict[str, Any]]]
                 ) -> list[tuple[RunConfig, dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(config, model metrics, attack metrics, extras) of each (target, attack metrics, extras)
    of ``results``, the config and model metrics read from ``workspace``; a target whose folder
    cannot be read is left out."""
    from privaudit.errors import ArtifactError

    rows = []
    for target, metrics, extras in results:
        try:
            rows.append((workspace.read_model_config(target), workspace.read_model_metrics(target), metrics, extras))
        except ArtifactError:
            continue
    return rows


def _metrics_frame(results: list[AttackResult], plan: AttackPlan) -> pd.DataFrame:
    """A row per target and asked-for attack, with the attack's numbers (its scalar metrics)."""
    import pandas as pd

    rows = [{"target": r.target, "attack": name,
             **{k: v for k, v in m.items() if isinstance(v, (int, float, str, bool)) or v is None}}
            for r in results for name, m in plan.asked(r.metrics).items()]
    return pd.DataFrame(rows, columns=None if rows else ["target", "attack"])


@params.options_named
@computes_damage_again_with_targets
def attack(target: str, *, attacks: str | Sequence[str] = "all", pool_size: int | None = None,
           shadow_dataset: str | None = None, dataset: str | None = None, seeds: params.Seeds = None,
           data_dir: str | Path | None = None, download: bool = False, device: str = "auto",
           workdir: str | Path = ".", report: bool = True, dry_run: bool = False, hooks: AuditHooks | None = None,
           on_start: Callable[[RunConfig], None] | None = None, on_epoch: EpochCallback | None = None,
           log: Callable[[str], None] | None = None) -> AttackResults | RunPlan:
    """Attack ``target`` (one target's run name, or an architecture: every trained target of
    it, limited to those trained on ``dataset`` and with a root seed in ``seeds`` when given)
    in the workspace ``workdir``; its shadow model, reference pool and canary model share its
    recipe and defence, and are trained when missing. Keyword arguments are ``privaudit
    attack``'s options (``attacks`` as ``"all"``, ``"shadow,lira"`` or a list).

    ``pool_size``: the reference models of each target's pool; None reuses the largest pool
    the workspace holds for the target's recipe (an audit's, whatever its size), else
    trains one of :data:`~privaudit.core.defaults.DEFAULT_POOL_SIZE`. The work is the
    audit's job graph without its targets' training (:func:`attack_graph`), run in this
    process. ``dry_run``: the :class:`~privaudit.executor.preview.RunPlan` (what would be
    trained and reused, disk, time), nothing trained. ``hooks``: progress callbacks
    (``on_estimate`` receives the plan at the start; ``on_start(config)`` and
    ``on_epoch(epoch, epochs, loss)`` stand for its model hooks when ``hooks`` is not
    given). ``report``: rebuild the reports afterwards (``log`` receives a line per damaged
    folder they skip)."""
    if pool_size is not None:
        params.in_range(pool_size, "--pool-size", 4, MAX_POOL_SIZE)
    params.one_of(device, "--device", "auto", "cpu", "cuda")
    shadow_dataset = None if shadow_dataset is None else params.dataset_name(shadow_dataset, "--shadow-dataset")
    dataset = None if dataset is None else params.dataset_name(dataset)
    seed_list = None if seeds is None else params.seeds(seeds)
    root = params.require_workspace(workdir, with_content=False)  # no models: resolve_targets says so
    known = target in MODELS or is_custom_model(target) or (root / "models" / target / "config.json").is_file()
    if not known:  # said before torch loads, as Workspace.resolve_targets says it
        raise ArtifactError(f"no target named {target!r} in {root / 'models'} (give a run name or one of "
                            f"{', '.join(MODELS)})")
    params.attacks(attacks, pool_size or DEFAULT_POOL_SIZE, shadow_dataset)  # loads the attack library (torch)

    with importing():
        from privaudit.executor import LocalExecutor
        from privaudit.executor.jobs import check_reused
        from privaudit.executor.preview import estimated, preview
        from privaudit.pipeline.runs import DataCache
        from privaudit.pipeline.workspace import Workspace
        from privaudit.training import resolve_device

    ws = Workspace(root)
    names = ws.resolve_targets(target, dataset=dataset, seeds=seed_list)
    configs = [ws.read_model_config(name) for name in names]
    plans = target_plans(configs, attacks, pool_size, shadow_dataset, ws)
    dev = resolve_device(device)
    data = DataCache(data_dir, download)
    jobs = attack_graph(configs, plans, data)
    if dry_run:
        return preview("attack", jobs, ws, data, dev, log=log)
    ws.ensure_writable(log=log)
    ws.set_aside_legacy_results(log)
    hooks = hooks or AuditHooks(on_model_start=on_start, on_epoch=on_epoch)
    if hooks.on_plan:
        hooks.on_plan(jobs)
    check_reused(jobs, ws)  # a damaged model, pool or attack folder is said before anything trains
    with estimated("attack", jobs, ws, data, dev, hooks.on_estimate):
        done = LocalExecutor().run(jobs, ws, data, dev, on_start=hooks.on_model_start, on_epoch=hooks.on_epoch,
                                   on_job_done=hooks.on_job_done)
    results = [done[f"attack:{name}"] for name in names]
    rebuilt = None
    if report:
        from privaudit.api.report import rebuild

        rebuilt = rebuild(ws, log)
    plan = plans[names[0]]
    return AttackResults(metrics=_metrics_frame(results, plan), workdir=root,
                         report_path=rebuilt.report_path if rebuilt else None,
                         csv_path=rebuilt.csv_path if rebuilt else None, results=results, plan=plan, report=rebuilt,
                         rows=summary_rows(ws, [(r.target, plan.asked(r.metrics), r.extras) for r in results]))


def target_plans(configs: Sequence[RunConfig], attacks: str | Sequence[str], pool_size: int | None,
                 shadow_dataset: str | None, workspace: Any) -> dict[str, AttackPlan]:
    """Each target's attack plan, by run name: ``attacks`` with the pool ``pool_size`` or,
    when it is None, the largest pool of the target's recipe saved in ``workspace``
    (:func:`~privaudit.pipeline.pools.saved_pool_sizes`; none saved: the default size)."""
    from privaudit.pipeline.pools import saved_pool_sizes

    plans: dict[int, AttackPlan] = {}
    out = {}
    for cfg in configs:
        size = pool_size or next(iter(saved_pool_sizes(cfg, workspace)), DEFAULT_POOL_SIZE)
        if size not in plans:
            plans[size] = params.attacks(attacks, size, shadow_dataset)
        out[cfg.run_name] = plans[size]
    return out


def attack_graph(configs: Sequence[RunConfig], plans: dict[str, AttackPlan], data: Any) -> list[Job]:
    """The jobs that attack ``configs`` with their ``plans``: the audit's job graph
    (:func:`~privaudit.executor.auditing.audit_graph`) of each group of targets that share a
    plan, without its report job (the targets' own training jobs find them trained)."""
    from privaudit.executor.auditing import audit_graph

    groups: dict[int, list[RunConfig]] = {}
    for cfg in configs:
        groups.setdefault(id(plans[cfg.run_name]), []).append(cfg)
    jobs: dict[str, Job] = {}
    for group in groups.values():
        for job in audit_graph(group, data, plans[group[0].run_name]):
            if job.kind != "report":
                jobs.setdefault(job.id, job)
    return list(jobs.values())
