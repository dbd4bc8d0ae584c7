"""A privaudit target's outputs in the scan format: what ``privaudit export-logits`` writes.

The arrays are the ones ``privaudit attack`` computes from (the target's and its shadow
model's logits on their members and non-members; with a pool, the pool models' logits and
``keep`` on the target's members and non-members, and the population), so ``privaudit
scan`` of the file gives the same numbers as ``attack`` for every attack both run.
"""

from __future__ import annotations

import numpy as np
import torch

from privaudit.errors import ArtifactError
from privaudit.pipeline.runs import DataCache
from privaudit.pipeline.workspace import Workspace


def export_arrays(workspace: Workspace, target: str, data: DataCache, device: torch.device, *,
                  pool_size: int | None = None) -> dict[str, np.ndarray]:
    """The scan arrays of the trained target ``target`` (docs/scan.md), from the saved models
    only: its shadow model when it has been trained, and the pool of ``pool_size`` when
    given (which must exist: nothing is trained here)."""
    from privaudit.pipeline.attacking import model_outputs
    from privaudit.pipeline.pools import _load_pool, _pool_plan, model_logits

    cfg = workspace.read_model_config(target)
    if cfg.role != "target":
        raise ArtifactError(f"{target} is a {cfg.role} model, not a target")
    workspace.verify_model(target)
    t_in, y_in, t_out, y_out = model_outputs(workspace, target, data, device)
    arrays = {"logits_in": t_in, "logits_out": t_out, "labels_in": y_in, "labels_out": y_out}
    shadow = cfg.as_shadow().validated()
    if workspace.has_model(shadow):
        s_in, sy_in, s_out, sy_out = model_outputs(workspace, shadow.run_name, data, device)
        arrays.update(shadow_logits_in=s_in, shadow_logits_out=s_out, shadow_labels_in=sy_in,
                      shadow_labels_out=sy_out)
    if pool_size:
        name, folder, _, meta = _pool_plan(cfg, pool_size, workspace)
        pool = _load_pool(folder, meta)
        if pool is None:
            raise ArtifactError(f"no pool of {pool_size} for {target} in the workspace (run "
                                f"`privaudit attack --target {target} --attacks lira --pool-size {pool_size}` first)")
        images = data.images(cfg)
        t_logits = model_logits(workspace, target, images, pool.indices, pool.queries, device).astype(np.float64)
        part = cfg.data.part_size  # the pool samples are the target's members, then its non-members
        arrays.update(logits_in=t_logits[:part], logits_out=t_logits[part:], labels_in=pool.labels[:part],
                      labels_out=pool.labels[part:], reference_logits=pool.logits, keep=pool.keep,
                      population_logits=model_logits(workspace, target, images, pool.pop_indices, pool.queries,
                                                     device),
                      reference_population_logits=pool.pop_logits, population_labels=pool.pop_labels)
    return arrays


