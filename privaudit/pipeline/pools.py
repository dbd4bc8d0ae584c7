"""Reference-model pools: many models of the target's recipe, their membership and outputs.

A pool of M models (M even) is trained with the audited target's exact recipe, defence
included, each on one half of the *pool samples* (the target's members and non-members,
2 × part size): ``keep[model, sample]`` (:func:`privaudit.data.splits.pool_keep`) makes
every sample IN for exactly half of the models. The logits of every pool model on every
pool sample and on the *population* (the shadow parts, which no pool model, target or
canary model trains on) are computed once, for the views the models trained on (the plain
input; with ``--augment flip`` also its horizontal mirror), and saved; every attack then works from these arrays
(Carlini et al.'s LiRA staging: train → logits → scores). Any pool model can serve as the target (leave one
out), and the ML-Leaks target itself has known membership on the pool samples.

Files, under ``attacks/pools/<pool name>/``: ``pool.json`` (recipe, size, model names) and
``outputs.npz`` (keep, sample indices, labels, logits float32 of shape (M, n, A, C),
population logits (M, z, A, C) and each model's test accuracy (M,): the pool's models are
replicates of the setting, read by the attack without their folders), and ``manifest.json`` (their checksums,
:mod:`privaudit.files.integrity`). A saved pool whose files no longer match their manifest is an
error naming the folder (:class:`~privaudit.errors.DamagedArtifactError`), never silently
recomputed; one written before manifests is reused when it loads, else recomputed.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from privaudit.core.config import RunConfig, dataset_tag, model_tag
from privaudit.data import ImageData, split_parts
from privaudit.data.splits import pool_keep, pool_seed
from privaudit.errors import ArtifactError
from privaudit.files.atomic import read_json, write_bytes, write_json
from privaudit.files.integrity import verify_folder
from privaudit.files.locks import artifact_lock
from privaudit.files.npfiles import npz_bytes
from privaudit.pipeline.runs import DataCache, ensure_models
from privaudit.pipeline.workspace import Workspace
from privaudit.training.augment import query_views
from privaudit.training.loop import EpochCallback
from privaudit.training.results import predict_logits

# 2: the views queried follow the recipe's --augment (schema 1 queried CIFAR-10's mirror
# whatever the models trained on), so earlier pools are recomputed, not reused
POOL_SCHEMA = 2
POOLS_FOLDER = "pools"


def augmentations(recipe: RunConfig) -> tuple[str, ...]:
    """Queries per sample: exactly the views the recipe's models trained on, the plain image
    and, with ``--augment flip``, its horizontal mirror (:mod:`privaudit.training.augment`)."""
    return query_views(recipe.train.augment)


def model_logits(workspace: Workspace, name: str, images: ImageData, indices: np.ndarray,
                 queries: tuple[str, ...], device: torch.device) -> np.ndarray:
    """Logits of a saved model on ``images.x[indices]`` (clean, its own normalisation) for each
    query: float32, shape (len(indices), len(queries), classes)."""
    loaded = workspace.load_model(name, images.input_shape, images.num_classes)
    x = torch.from_numpy(loaded.normaliser(images.x[indices])).to(device)
    model = loaded.model.to(device)
    out = []
    for q in queries:
        xq = x.flip(-1) if q == "mirror" else x
        out.append(predict_logits(model, xq).numpy())
    return np.stack(out, axis=1).astype(np.float32)


@dataclass
class Pool:
    name: str
    path: Path
    models: list[str]
    keep: np.ndarray          # (M, n) bool
    indices: np.ndarray       # (n,) pool sample indices into the dataset
    labels: np.ndarray        # (n,)
    logits: np.ndarray        # (M, n, A, C) float32
    pop_indices: np.ndarray   # (z,)
    pop_labels: np.ndarray    # (z,)
    pop_logits: np.ndarray    # (M, z, A, C) float32
    queries: tuple[str, ...]
    accuracies: np.ndarray | None = None  # (M,) test accuracy; None in a pool saved before they were

    @property
    def size(self) -> int:
        return len(self.models)


def pool_name(recipe: RunConfig, size: int) -> str:
    digest = hashlib.sha256(f"{recipe.recipe.config_hash}:{size}:{POOL_SCHEMA}".encode()).hexdigest()[:10]
    return (f"pool-{model_tag(recipe.model.name)}-{dataset_tag(recipe.data.dataset)}-{recipe.defence.label}"
            f"-n{size}-{digest}")


def saved_pool_sizes(recipe: RunConfig, workspace: Workspace) -> list[int]:
    """The sizes of the pools of ``recipe`` whose outputs are saved in ``workspace``, largest
    first: what an attack reuses when its pool size is not given."""
    recipe = recipe.recipe
    folder = workspace.attacks / POOLS_FOLDER
    prefix = pool_name(recipe, 0).rsplit("-n0-", 1)[0] + "-n"
    sizes = set()
    for path in folder.glob(f"{prefix}*") if folder.is_dir() else ():
        size = path.name[len(prefix):].split("-", 1)[0]
        if size.isdigit() and path.name == pool_name(recipe, int(size)) and (path / "outputs.npz").is_file():
            sizes.add(int(size))
    return sorted(sizes, reverse=True)


def _pool_plan(recipe: RunConfig, size: int, workspace: Workspace) -> tuple[str, Path, list[RunConfig], dict]:
    recipe = recipe.recipe
    name = pool_name(recipe, size)
    folder = workspace.attacks / POOLS_FOLDER / name
    configs = [recipe.as_reference(size, i).validated() for i in range(size)]
    meta = {"schema": POOL_SCHEMA, "name": name, "recipe": recipe.to_dict(), "size": size,
            "models": [c.run_name for c in configs], "queries": list(augmentations(recipe))}
    return name, folder, configs, meta


def check_pool(recipe: RunConfig, size: int, workspace: Workspace) -> None:
    """Before anything is trained: raise :class:`~privaudit.errors.DamagedArtifactError` if
    the saved pool of ``recipe`` is damaged, or, when it has to be (re)computed, if one of its
    existing reference model folders is."""
    _, folder, configs, meta = _pool_plan(recipe, size, workspace)
    if folder.is_dir():
        verify_folder(folder, "pool")
        try:
            if read_json(folder / "pool.json") == meta and (folder / "outputs.npz").is_file():
                return  # reused as it is: its models are not read
        except ArtifactError:
            pass
    for c in configs:
        workspace.has_model(c)


def ensure_pool(recipe: RunConfig, size: int, workspace: Workspace, data: DataCache, device: torch.device,
                on_start: Callable[[RunConfig], None] | None = None,
                on_epoch: EpochCallback | None = None) -> Pool:
    """Train (or reuse) the ``size`` reference models of ``recipe`` and their saved outputs."""
    recipe = recipe.recipe
    name, folder, configs, meta = _pool_plan(recipe, size, workspace)
    pool = _load_pool(folder, meta)
    if pool is not None:
        return pool
    with artifact_lock(folder.parent, name, "work"):  # another audit may be computing it
        return _load_pool(folder, meta) or _build_pool(recipe, size, name, folder, configs, meta, workspace, data,
                                                       device, on_start, on_epoch)


def _build_pool(recipe: RunConfig, size: int, name: str, folder: Path, configs: list[RunConfig], meta: dict,
                workspace: Workspace, data: DataCache, device: torch.device, on_start, on_epoch) -> Pool:
    runs = ensure_models(configs, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
    images = data.images(recipe)
    split = split_parts(len(images.y), recipe.data.part_size, recipe.data.seed)
    indices, pop = split.pool, split.population
    keep = pool_keep(size, len(indices), pool_seed(recipe.data.seed, size))
    queries = tuple(meta["queries"])
    logits = np.stack([model_logits(workspace, r.name, images, indices, queries, device) for r in runs])
    pop_logits = np.stack([model_logits(workspace, r.name, images, pop, queries, device) for r in runs])
    arrays = {"keep": keep, "indices": indices, "labels": images.y[indices], "logits": logits,
              "pop_indices": pop, "pop_labels": images.y[pop], "pop_logits": pop_logits,
              "test_accuracy": np.array([float(r.metrics.get("test_accuracy", np.nan)) for r in runs])}

    def write(tmp: Path) -> None:
        write_bytes(tmp / "outputs.npz", npz_bytes(arrays))
        write_json(tmp / "pool.json", meta)

    workspace.commit_folder(folder.parent, name, write)
    return Pool(name, folder, meta["models"], keep, indices, arrays["labels"], logits, pop,
                arrays["pop_labels"], pop_logits, queries, arrays["test_accuracy"])


def _load_pool(folder: Path, meta: dict) -> Pool | None:
    """The saved pool in ``folder`` when it is the one ``meta`` describes, else None (to be
    computed). Raises :class:`~privaudit.errors.DamagedArtifactError` when its files do not
    match their manifest."""
    if not folder.is_dir():
        return None
    verify_folder(folder, "pool")
    try:
        saved = read_json(folder / "pool.json")
        if saved != meta:
            return None
        with np.load(folder / "outputs.npz", allow_pickle=False) as npz:
            a = {k: npz[k] for k in npz.files}
        return Pool(meta["name"], folder, meta["models"], a["keep"].astype(bool), a["indices"], a["labels"],
                    a["logits"], a["pop_indices"], a["pop_labels"], a["pop_logits"], tuple(meta["queries"]),
                    a.get("test_accuracy"))
    except (ArtifactError, OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
