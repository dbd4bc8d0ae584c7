"""Get-or-train: the cached unit of work behind ``train``, ``attack`` and ``audit``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from privaudit.core.config import RunConfig, is_custom_dataset
from privaudit.core.provenance import provenance
from privaudit.core.timing import phase
from privaudit.data import ImageData, load_dataset
from privaudit.errors import DataError
from privaudit.files.locks import artifact_lock
from privaudit.pipeline.workspace import Workspace
from privaudit.training import train_model
from privaudit.training.loop import EpochCallback
from privaudit.training.results import TrainResult
from privaudit.training.stacked import stack_groups, train_stacked


class DataCache:
    """Loads each dataset at most once per process, and only when it is needed."""

    def __init__(self, data_dir: str | Path | None = None, download: bool = False):
        self.data_dir = data_dir
        self.download = download
        self._cache: dict[str, ImageData] = {}

    def get(self, name: str) -> ImageData:
        if name not in self._cache:
            with phase("data"):
                self._cache[name] = load_dataset(name, self.data_dir, download=self.download)
        return self._cache[name]

    def images(self, config: RunConfig) -> ImageData:
        """The images ``config`` was (or will be) trained on; for the user's own data, a
        :class:`~privaudit.errors.DataError` when its contents are no longer those whose
        fingerprint the config holds (the file changed since the model was trained)."""
        images = self.get(config.data.dataset)
        if config.data.fingerprint and images.fingerprint != config.data.fingerprint:
            raise DataError(f"{config.data.dataset} has changed since {config.run_name} was trained (contents "
                            f"{images.fingerprint}, the model's {config.data.fingerprint}): restore the data, or train "
                            "anew on it (a new config)")
        if config.data.canaries:  # planted canaries: every model of the recipe sees the same copy
            key = f"{config.data.dataset}|{config.data.canaries}|{config.data.part_size}|{config.data.seed}"
            if key not in self._cache:
                from privaudit.data.planted import plant

                self._cache[key] = plant(images, config.data.part_size, config.data.seed, config.data.canaries)
            return self._cache[key]
        return images

    def config_kwargs(self, dataset: str) -> dict:
        """What :func:`~privaudit.core.config.make_config` needs to know of ``dataset`` beyond its
        name: for the user's own data (loaded here, once) its fingerprint and size."""
        if not is_custom_dataset(dataset):
            return {}
        images = self.get(dataset)
        return {"fingerprint": images.fingerprint, "dataset_size": int(len(images.y))}


@dataclass
class RunResult:
    name: str
    path: Path
    metrics: dict
    reused: bool


def ensure_model(config: RunConfig, workspace: Workspace, data: DataCache, device: torch.device,
                 on_start: Callable[[RunConfig], None] | None = None,
                 on_epoch: EpochCallback | None = None) -> RunResult:
    """Return the model of ``config`` from the workspace, training and saving it first when
    no folder with exactly this config exists. ``on_start`` is called (after the data has
    loaded) only when a model is actually trained."""
    config = config.validated()
    name = config.run_name
    if workspace.has_model(config):
        return RunResult(name, workspace.model_dir(name), workspace.read_model_metrics(name), True)
    base = config.trained_as
    if base != config:  # an output-side defence: the undefended model's weights, released otherwise
        ensure_model(base, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
    with artifact_lock(workspace.models, name, "work"):  # another audit may be training it
        if workspace.has_model(config):
            return RunResult(name, workspace.model_dir(name), workspace.read_model_metrics(name), True)
        if base != config:
            path = workspace.derive_model(config, base.run_name, provenance(device))
            return RunResult(name, path, workspace.read_model_metrics(name), False)
        t0 = time.perf_counter()
        images = data.images(config)
        if on_start:
            on_start(config)
        with phase("train"):
            result = train_model(config, images, device, on_epoch=on_epoch)
        return save_trained(workspace, config, result, device, time.perf_counter() - t0)


def save_trained(workspace: Workspace, config: RunConfig, result: TrainResult, device: torch.device,
                 wall_seconds: float) -> RunResult:
    """Save a freshly trained model with its metrics and provenance."""
    prov = {**provenance(device), "wall_seconds": wall_seconds}
    if config.model.name.startswith("module:"):  # the user's factory: which source built it
        from privaudit.models.custom import source_hash

        prov["model_source_sha256"] = source_hash(config.model.name)
    trace = (None if result.loss_trace is None or result.trace_indices is None
             else (result.loss_trace, result.trace_indices))
    path = workspace.save_model(config, result.model, result.normaliser,
                                {**result.metrics, "loss_history": result.loss_history}, prov, trace)
    return RunResult(config.run_name, path, workspace.read_model_metrics(config.run_name), False)


def ensure_models(configs: list[RunConfig], workspace: Workspace, data: DataCache, device: torch.device,
                  on_start: Callable | None = None,
                  on_epoch: EpochCallback | None = None) -> list[RunResult]:
    """:func:`ensure_model` for many models (a reference pool, or every model of an audit):
    with the fast engine, small MLPs train together in the runs of
    :func:`privaudit.training.stacked.stack_groups`, saved run by run (resumable); the rest one
    by one. ``on_start`` gets the config of a model trained alone, the list of configs of a
    stacked run.

    The runs are cut from all of ``configs``, and of a run only its missing models train: a
    model's bits do not depend on the other models of its stacked run
    (:func:`~privaudit.training.stacked.train_stacked`), so after an interruption the missing
    models come out bit for bit as an uninterrupted run makes them (``test_kill_9_…`` checks
    the table)."""
    configs = [c.validated() for c in configs]
    trained: set[str] = set()
    bases = list({c.trained_as.run_name: c.trained_as for c in configs}.values())  # what trains
    if not all(workspace.has_model(c) for c in bases):
        images = data.images(configs[0])
        for group in stack_groups(bases, images.input_shape, len(images.y)):
            if len(group) < 2 or all(workspace.has_model(c) for c in group):
                continue
            with artifact_lock(workspace.models, f"group-{group[0].run_name}", "work"):
                missing = {c.run_name for c in group if not workspace.has_model(c)}  # another audit may have saved them
                if not missing:
                    continue
                group = [c for c in group if c.run_name in missing]
                t0 = time.perf_counter()
                if on_start:
                    on_start(group)
                with phase("train"):
                    results = train_stacked(group, images, device, on_epoch=on_epoch)
                seconds = (time.perf_counter() - t0) / len(group)
                for config, result in zip(group, results):
                    save_trained(workspace, config, result, device, seconds)
                trained |= missing
    return [replace(r, reused=r.reused and r.name not in trained)  # trained alone here, or in a stacked run
            for r in (ensure_model(c, workspace, data, device, on_start=on_start, on_epoch=on_epoch) for c in configs)]


def epoch_series(configs: list[RunConfig]) -> bool:
    """Whether ``configs`` are one non-private recipe trained for different numbers of epochs
    (which one run can give: :func:`ensure_epochs`)."""
    if len(configs) < 2 or any(c.defence.dp or c.model.name == "convex-relu" for c in configs):
        return False
    base = {replace(c, train=replace(c.train, epochs=1)).config_hash for c in configs}
    return len(base) == 1 and len({c.train.epochs for c in configs}) == len(configs)


def ensure_epochs(configs: list[RunConfig], workspace: Workspace, data: DataCache, device: torch.device,
                  on_start: Callable[[RunConfig], None] | None = None,
                  on_epoch: EpochCallback | None = None) -> list[RunResult]:
    """:func:`ensure_model` for one recipe at several epoch counts (an epoch sweep): the
    longest missing one trains once, and the shorter missing ones are saved from it as it
    passes their epoch (:func:`privaudit.training.trainer.train_model`'s snapshots, bit for
    bit the models their own runs make); each is an ordinary cached model."""
    configs = [c.validated() for c in configs]
    if any(c.trained_as != c for c in configs):  # output-side defences: their undefended series
        ensure_epochs([c.trained_as for c in configs], workspace, data, device, on_start=on_start, on_epoch=on_epoch)
        return [ensure_model(c, workspace, data, device, on_start=on_start, on_epoch=on_epoch) for c in configs]
    if not epoch_series(configs):
        raise ValueError("ensure_epochs needs one non-private recipe at distinct epoch counts")
    missing = sorted((c for c in configs if not workspace.has_model(c)), key=lambda c: c.train.epochs)
    trained: set[str] = set()
    if missing:
        longest = missing[-1]
        with artifact_lock(workspace.models, longest.run_name, "work"):
            if not workspace.has_model(longest):
                t0 = time.perf_counter()
                images = data.images(longest)
                if on_start:
                    on_start(longest)

                def saver(cfg: RunConfig):
                    def save(result: TrainResult) -> None:
                        if not workspace.has_model(cfg):
                            save_trained(workspace, cfg, result, device, time.perf_counter() - t0)
                            trained.add(cfg.run_name)
                    return save

                with phase("train"):
                    result = train_model(longest, images, device, on_epoch=on_epoch,
                                         snapshots={c.train.epochs: saver(c) for c in missing[:-1]})
                save_trained(workspace, longest, result, device, time.perf_counter() - t0)
                trained.add(longest.run_name)
    return [replace(r, reused=r.reused and r.name not in trained)  # trained alone here, or in a stacked run
            for r in (ensure_model(c, workspace, data, device, on_start=on_start, on_epoch=on_epoch) for c in configs)]
