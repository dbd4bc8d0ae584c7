"""``privaudit.train()``: one target model with a defence (one per seed), saved to the
workspace or reused from it; ``privaudit train`` prints what it returns."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import params
from privaudit.api.recipe import Recipe
from privaudit.api.repair import computes_damage_again
from privaudit.api.results import ShortRepr
from privaudit.core.config import either_spelling
from privaudit.core.timing import importing

if TYPE_CHECKING:
    from privaudit.core.config import RunConfig
    from privaudit.executor.preview import RunPlan
    from privaudit.pipeline.runs import RunResult
    from privaudit.training.loop import EpochCallback


@dataclass(repr=False)
class TrainedModels(ShortRepr):
    """The models of one ``train`` call, one per seed: each with its workspace folder, its
    metrics (accuracies, ε for DP, timings) and whether it was reused."""

    runs: list[RunResult]            #: privaudit.pipeline.runs.RunResult, one per seed
    configs: list[RunConfig]         #: privaudit.core.config.RunConfig, one per seed
    several_seeds: bool = False      #: asked with ``seeds`` (the JSON lists every run)

    @property
    def metrics(self) -> dict[str, Any]:
        """The first (or only) model's metrics."""
        return self.runs[0].metrics

    @property
    def path(self) -> Path:
        """The first (or only) model's folder."""
        return Path(self.runs[0].path)

    def _doc(self, cfg: RunConfig, run: RunResult) -> dict[str, Any]:
        return {"run": run.name, "path": str(run.path), "reused": run.reused, "config": cfg.to_dict(),
                "metrics": {k: v for k, v in run.metrics.items() if k != "loss_history"}}

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit train --json`` prints: the model's, or ``{"runs": [...]}``
        for several seeds."""
        docs = [self._doc(c, r) for c, r in zip(self.configs, self.runs)]
        return {"runs": docs} if self.several_seeds else docs[0]

    def _repr_html_(self) -> str:
        keys = ("train_accuracy", "test_accuracy", "generalisation_gap", "epsilon", "train_seconds")
        head = "".join(f"<th>{k}</th>" for k in ("run", *keys))
        body = "".join("<tr><td>" + html.escape(r.name) + "</td>" + "".join(
            f"<td>{r.metrics[k]:.4f}</td>" if isinstance(r.metrics.get(k), float) else "<td>—</td>" for k in keys)
            + "</tr>" for r in self.runs)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@params.options_named
@either_spelling
@computes_damage_again
def train(recipe: Recipe | None = None, *, data_dir: str | Path | None = None, download: bool = False,
          kappa: float = 0.0, dp: bool = False, defence: str | None = None, knob: float | None = None,
          noise_multiplier: float | None = None, target_epsilon: float | None = None,
          seed: int = 0, seeds: params.Seeds = None, device: str = "auto", workdir: str | Path = ".",
          on_start: Callable[[RunConfig], None] | None = None, on_epoch: EpochCallback | None = None,
          dry_run: bool = False, on_estimate: Callable[[RunPlan], None] | None = None,
          log: Callable[[str], None] | None = None, **overrides: Any) -> TrainedModels | RunPlan:
    """Train one target model (one per seed of ``seeds``) of ``recipe`` (a
    :class:`~privaudit.api.recipe.Recipe`; its fields may also be given, or overridden, as
    keyword arguments: ``model=``, ``dataset=``, ``epochs=``, ...) with MG noise ``kappa`` and/or
    DP-SGD (``dp``, with ``noise_multiplier`` or ``target_epsilon``), or with the defence
    ``defense`` of :mod:`privaudit.defences` set by ``knob`` (``mg``: κ; ``dpsgd`` and
    ``noisycgd``, convex-relu's DP: σ; ``label-smoothing``: α; ...), and save it under
    ``workdir``/models; a model
    with exactly this config is reused. Keyword arguments are ``privaudit train``'s options;
    ``on_start(config)`` and ``on_epoch(epoch, epochs, loss)`` report progress. ``dry_run``:
    train nothing; return the :class:`~privaudit.executor.preview.RunPlan` (what would train,
    what is reused, disk, time estimated on this machine); ``on_estimate``: receives the same
    plan before anything trains (the command line prints it). ``log`` receives the notes on the
    workspace (model folders from before checksummed manifests, verified and migrated)."""
    params.bounded(params.RANGES, kappa=kappa)
    recipe = params.recipe(recipe, overrides)
    seed_list = params.seeds(seeds, seed)
    chosen = params.defence_choice(defence, knob, kappa=kappa, dp=dp, noise_multiplier=noise_multiplier,
                                   target_epsilon=target_epsilon)
    params.writable_workdir(workdir)
    dataset_kwargs, data = params.dataset_config(recipe.dataset, data_dir, download)
    cfgs = [recipe.config(seed=s, dataset_kwargs=dataset_kwargs, **chosen) for s in seed_list]  # validated

    with importing():
        from privaudit.pipeline import runs
        from privaudit.pipeline.workspace import Workspace
        from privaudit.training import resolve_device

    dev = resolve_device(device)
    data = data or runs.DataCache(data_dir, download)
    from privaudit.executor.plan import derive_job, train_job
    from privaudit.executor.preview import estimated, preview

    jobs = []
    for c in cfgs:
        base = train_job([c.trained_as])  # an output-side defence's model: the undefended one's, derived
        jobs += [base] if c.trained_as == c else [base, derive_job(c, base.id)]
    if dry_run:
        return preview("train", jobs, Workspace(workdir), data, dev)
    ws = Workspace(workdir).ensure_writable(log=log)
    with estimated("train", jobs, ws, data, dev, on_estimate):
        done = [runs.ensure_model(c, ws, data, dev, on_start=on_start, on_epoch=on_epoch) for c in cfgs]
    return TrainedModels(runs=done, configs=cfgs, several_seeds=seeds is not None)
