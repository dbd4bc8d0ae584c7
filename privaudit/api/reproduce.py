"""``privaudit.reproduce()``: a paper's published results, each statement checked with a 95 %
interval; ``privaudit reproduce mg-noise | hidden-state | masked-neurons`` prints what it
returns. Every reproduction writes ``reports/reproduce/<paper>/`` and refreshes
``reports/reproduce/index.html``."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.repair import computes_damage_again
from privaudit.api.results import ShortRepr
from privaudit.core.defaults import REPRODUCE_EXPERIMENTS, REPRODUCE_FAMILIES, REPRODUCE_SCALES
from privaudit.core.hooks import AuditHooks
from privaudit.core.timing import importing
from privaudit.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.executor.preview import RunPlan

PAPERS = ("mg-noise", "hidden-state", "masked-neurons")
MASKED_NEURONS_PAPER = ("Liao, Kyrillidis, On the Convergence of Shallow Neural Network Training with Randomly Masked "
                        "Neurons, arXiv:2112.02668 (v1)")
#: the datasets each reproduction runs on (masked-neurons reads --data-dir or an .npz)
DATASETS = {"mg-noise": ("cifar10", "digits"), "hidden-state": ("cifar10", "mnist", "fashion-mnist", "digits")}


@dataclass(repr=False)
class Reproduction(ShortRepr):
    """A reproduction's outcome: each of the paper's statements beside the measured number,
    its interval and a reading (:attr:`claims`), the counts, the page and its tables."""

    claims: pd.DataFrame         #: figure, model, statement, value, lo, hi, verdict (agrees / disagrees / …)
    #: agrees, disagrees, other: family-wise (summary["familywise"]: the correction and the one-by-one counts)
    counts: dict[str, Any]
    report_path: Path              #: the page (index.html)
    folder: Path                   #: reports/reproduce/<paper>: the figures, the CSVs, summary.json
    summary: dict[str, Any] = field(repr=False, default_factory=dict)  #: what ``--json`` prints

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit reproduce --json`` prints (what summary.json holds)."""
        return dict(self.summary)

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> Reproduction:
        import pandas as pd

        return cls(claims=pd.DataFrame(summary["claims"]), counts=summary["counts"],
                   report_path=Path(summary["html"]), folder=Path(summary["html"]).parent, summary=summary)

    def _repr_html_(self) -> str:
        keep = [c for c in ("figure", "model", "label", "value", "lo", "hi", "verdict") if c in self.claims.columns]
        table = self.claims[keep].to_html(index=False, border=0, float_format=lambda v: f"{v:+.3f}")
        n = self.counts
        return (f"<div><h3>The paper's statements, checked: {n.get('agrees', 0)} agree, {n.get('disagrees', 0)} "
                f"disagree, {n.get('other', 0)} undecided or comparisons (family-wise: "
                f"{html.escape(str(self.summary.get('familywise', {}).get('correction', '')))})</h3>{table}"
                f"<p>Page: <a href=\"{html.escape(self.report_path.resolve().as_uri())}\">"
                f"{html.escape(str(self.report_path))}</a></p></div>")


def _words(value: str | Sequence[str] | None, option: str, allowed: Sequence[str]) -> list[str] | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else ",".join(map(str, value))
    items = [w.strip() for w in text.split(",") if w.strip()]
    bad = [w for w in items if w not in allowed]
    if bad or not items:
        raise ConfigError(f"{option} takes some of {', '.join(allowed)} (comma-separated), got {text!r}")
    return items


@params.options_named
@computes_damage_again
def reproduce(paper: str = "mg-noise", *, scale: str = "reduced", dataset: str = "cifar10",
              data_dir: str | Path | None = None, download: bool = False, models: str | Sequence[str] | None = None,
              experiments: str | Sequence[str] | None = None, seeds: params.Seeds = None, device: str = "auto",
              executor: str = "local", ray_address: str | None = None, cpus_per_job: int | None = None,
              workdir: str | Path = ".", hooks: AuditHooks | None = None, log: Callable[[str], None] | None = None,
              command: str = "", dry_run: bool = False) -> Reproduction | RunPlan | dict[str, Any]:
    """Reproduce ``paper``'s results at ``scale`` (``reduced`` or ``full``) over ``seeds``,
    limited to ``experiments``; writes ``workdir``/reports/reproduce/<paper>/ and resumes from
    (and reuses) every model already in the workspace. Keyword arguments are ``privaudit
    reproduce <paper>``'s options.

    * ``mg-noise``: Figure 4, Figures 5–7 with the epoch sweep, Figures 9–10 (seeds 0, 1, 2;
      ``models`` limits the architectures; ``executor="ray"`` spreads the models). ``dry_run``:
      the :class:`~privaudit.executor.preview.RunPlan` (what would run, what is reused, disk, time);
    * ``hidden-state``: Table 1, Figure 3, the privacy accounting and the audit of the released
      models (``dataset`` cifar10, mnist, fashion-mnist or digits; five seeds at full scale,
      three at reduced; ``executor="ray"`` trains the models as Ray tasks). ``dry_run``: a dict
      with the cells to train and the cost model's time;
    * ``masked-neurons``: Figure 2 on UCI Communities and Crime (``data_dir``: the folder with
      its files, or an ``.npz`` of ``X``, ``y``). ``dry_run``: a dict, as above."""
    import time

    t0 = time.perf_counter()
    params.one_of(paper, "paper", *PAPERS)
    params.one_of(scale, "--scale", *REPRODUCE_SCALES)
    params.writable_workdir(workdir)
    if paper == "hidden-state":
        return _hidden_state(scale=scale, dataset=dataset, data_dir=data_dir, download=download,
                             experiments=experiments, seeds=seeds, executor=executor, ray_address=ray_address,
                             cpus_per_job=cpus_per_job, workdir=workdir, log=log, command=command, dry_run=dry_run,
                             t0=t0)
    if paper == "masked-neurons":
        return _masked_neurons(scale=scale, data_dir=data_dir, experiments=experiments, seeds=seeds,
                               executor=executor, workdir=workdir, log=log, command=command, dry_run=dry_run, t0=t0)
    params.one_of(dataset, "--dataset", *DATASETS["mg-noise"])
    _executor_options(executor, ray_address, cpus_per_job)
    seed_list = params.seeds(seeds) if seeds is not None else None
    families = _words(models, "--models", REPRODUCE_FAMILIES)
    chosen = _words(experiments, "--experiments", REPRODUCE_EXPERIMENTS)
    params.require_data(dataset, data_dir, download)  # after the options: a wrong word is said first

    with importing():
        from privaudit.reproduction import protocol as make_protocol

    proto = make_protocol(scale, dataset, seeds=seed_list, families=families, experiments=chosen)

    with importing():
        from privaudit.executor import make_executor
        from privaudit.pipeline.runs import DataCache
        from privaudit.pipeline.workspace import Workspace
        from privaudit.reproduction.page import write_outputs
        from privaudit.reproduction.run import run_reproduction
        from privaudit.training import resolve_device

    hooks = hooks or AuditHooks()
    runner = make_executor(executor, address=ray_address, cpus_per_job=cpus_per_job)
    dev = resolve_device(device)
    data = DataCache(data_dir, download)
    if dry_run:
        from privaudit.executor.preview import preview
        from privaudit.reproduction.run import priced_jobs, reproduce_jobs

        images = data.get(proto.dataset)
        jobs = priced_jobs(reproduce_jobs(proto, images.input_shape, len(images.y)))
        return preview("reproduce", jobs, Workspace(workdir), data, dev, log=log, executor=runner)
    ws = Workspace(workdir).ensure_writable(log=log)
    ws.set_aside_legacy_results(log)
    if log:
        log(f"reproduce mg-noise: scale {proto.scale} on {proto.dataset}, seeds {', '.join(map(str, proto.seeds))}, "
            f"{proto.model_count()} models (device {dev}, executor {runner.name}) in {ws.root}")
    frames = run_reproduction(proto, ws, data, dev, executor=runner, on_plan=hooks.on_plan,
                              on_start=hooks.on_model_start, on_epoch=hooks.on_epoch, on_job_done=hooks.on_job_done,
                              on_estimate=hooks.on_estimate)
    summary = write_outputs(ws.reports, proto, frames, wall_seconds=time.perf_counter() - t0, command=command)
    return Reproduction.from_summary(summary)


def _executor_options(executor: str, ray_address: str | None, cpus_per_job: int | None) -> None:
    params.one_of(executor, "--executor", "local", "ray")
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    if cpus_per_job is not None and not 1 <= cpus_per_job <= 4096:
        raise ConfigError(f"--cpus-per-job must be between 1 and 4096 (got {cpus_per_job})")


def _local_only(executor: str, paper: str) -> None:
    params.one_of(executor, "--executor", "local", "ray")
    if executor != "local":
        raise ConfigError(f"reproduce {paper} runs in this process: its whole grid takes minutes on 2 cores "
                          "(--executor ray is for mg-noise and hidden-state)")


def _hidden_state(*, scale: str, dataset: str, data_dir: str | Path | None, download: bool,
                  experiments: str | Sequence[str] | None, seeds: params.Seeds, executor: str, ray_address: str | None,
                  cpus_per_job: int | None, workdir: str | Path, log: Callable[[str], None] | None, command: str,
                  dry_run: bool, t0: float) -> Reproduction | dict[str, Any]:
    """``reproduce("hidden-state")``: :func:`privaudit.reproduction.hidden_state_report.hidden_state_reproduction`."""
    params.one_of(dataset, "--dataset", *DATASETS["hidden-state"])
    _executor_options(executor, ray_address, cpus_per_job)
    seed_list = params.seeds(seeds) if seeds is not None else None
    with importing():
        from privaudit.pipeline.workspace import Workspace
        from privaudit.reproduction.hidden_state import EXPERIMENTS
        from privaudit.reproduction.hidden_state_report import hidden_state_reproduction
        from privaudit.reproduction.outputs import Outcome, write_outputs
    chosen = _words(experiments, "--experiments", EXPERIMENTS)
    runner = None
    if executor == "ray" and not dry_run:
        from privaudit.executor import make_executor

        runner = make_executor("ray", address=ray_address, cpus_per_job=cpus_per_job)
    outcome = hidden_state_reproduction(scale, dataset=dataset, data_dir=data_dir, download=download, seeds=seed_list,
                                        experiments=chosen, workdir=workdir, log=log, dry_run_only=dry_run,
                                        executor=runner)
    if dry_run:
        assert isinstance(outcome, dict)  # dry_run_only: the plan and its cost
        return outcome
    assert isinstance(outcome, Outcome)  # not dry_run_only: the reproduction
    summary = write_outputs(Workspace(workdir).reports, outcome, wall_seconds=time_since(t0), command=command)
    return Reproduction.from_summary(summary)


def _masked_neurons(*, scale: str, data_dir: str | Path | None, experiments: str | Sequence[str] | None,
                    seeds: params.Seeds, executor: str, workdir: str | Path, log: Callable[[str], None] | None,
                    command: str, dry_run: bool, t0: float) -> Reproduction | dict[str, Any]:
    """``reproduce("masked-neurons")``: :func:`privaudit.reproduction.masked_neurons.masked_neurons_reproduction`."""
    _local_only(executor, "masked-neurons")
    seed_list = params.seeds(seeds) if seeds is not None else None
    with importing():
        from privaudit.pipeline.workspace import Workspace
        from privaudit.reproduction import masked_neurons as mn
        from privaudit.reproduction.outputs import Outcome, write_outputs
    chosen = _words(experiments, "--experiments", mn.EXPERIMENTS)
    if dry_run:
        return mn.masked_neurons_plan(scale, seed_list, chosen, data=data_dir, workdir=workdir)
    mn.protocol(scale, seed_list, chosen)
    mn.resolve_data(data_dir)  # a bad setting or data file stops here, before the workspace is touched
    Workspace(workdir).ensure_writable(log=log)
    r = mn.masked_neurons_reproduction(scale, data=data_dir, seeds=seed_list, experiments=chosen, workdir=workdir,
                                       log=log)
    outcome = Outcome(key="masked-neurons", paper=MASKED_NEURONS_PAPER,
                      title="The masked-neurons paper's Figure 2, reproduced",
                      methods="Protocol and checks: docs/methods/c-masked-neurons.md C.4.", settings=r.settings,
                      glance=list(r.notes),
                      claims=r.claims, figures=r.figures, tables=r.tables, section_order=r.section_order)
    summary = write_outputs(Workspace(workdir).reports, outcome, wall_seconds=time_since(t0), command=command)
    return Reproduction.from_summary(summary)


def time_since(t0: float) -> float:
    import time

    return time.perf_counter() - t0
