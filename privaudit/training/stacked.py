"""Many MLPs of one recipe trained at once, as one batched model.

A reference pool is K models of the same recipe on different halves of the same samples
(:mod:`privaudit.pools`). For small models each training step is mostly fixed cost (Python,
kernel launches, the optimizer), so training them one after another wastes the machine.
Here the K MLPs become one model with stacked parameters, W₁ (K, width, d), W₂ (K, C, width),
and every step is two batched matrix products:

    H_k = relu(X_k W₁ₖᵀ + b₁ₖ),  Z_k = H_k W₂ₖᵀ + b₂ₖ,  loss = Σ_k mean_b CE(Z_k, y_k).

Each model's gradient is the gradient of its own mean loss, and Adam acts elementwise, so
model k follows exactly its own training run: the same initial weights (drawn from its own
seed, as :func:`privaudit.training.trainer.train_model` does), the same shuffles and MG masks
(from its own generator, in the same order), the same updates up to float32 summation order
(the tests check the stacked and the one-by-one models agree).

Memory: the pool's samples are held once, raw (float32); every batch is gathered per model
and normalised with that model's own statistics on the fly, so K models need K small
normalisers, not K copies of the data.

Only non-private ``mlp`` recipes on small inputs are stacked (:func:`can_stack`, where it
measures faster); DP-SGD draws a different Poisson batch size for every model and step, and
convolutional models train one by one.
"""

from __future__ import annotations

import time
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from privaudit.config import RunConfig
from privaudit.data import ImageData, Normaliser, split_parts
from privaudit.data.splits import member_indices
from privaudit.models import build_model
from privaudit.seeding import derive_seed, generator
from privaudit.training.loop import Batch, run_epochs, training_view
from privaudit.training.trainer import EpochCallback, TrainResult, evaluate, resolve_engine, role_data, train_model

# Stack only small inputs (the digits' 64 pixels, not CIFAR-10's 3,072): measured on a 2-core
# CPU with pools of 16 (benchmarks/bench_pool.py), stacking trains digits MLPs ~3x faster,
# while for CIFAR-10 MLPs of width 8 to 512 it is 0.4-1.04x of one model after another, whose
# dense products already run through oneDNN near the machine's peak (batched products go to
# MKL, ~2x slower on these CPUs).
STACK_MAX_INPUT = 1024
STACK_MAX_MACS = 1 << 19
STACK_GROUP = 16  # models per stacked run (memory: K batches and K Adam states at once)


def can_stack(cfg: RunConfig, input_shape: tuple[int, int, int]) -> bool:
    """Whether models of ``cfg``'s recipe train faster stacked (module docstring)."""
    d = int(np.prod(input_shape))
    return (cfg.model.name == "mlp" and not cfg.defence.dp and cfg.train.precision == "fp32"
            and cfg.train.augment == "none" and d <= STACK_MAX_INPUT
            and d * cfg.model.width <= STACK_MAX_MACS)


def stack_groups(cfgs: Sequence[RunConfig], input_shape: tuple[int, int, int],
                 engine: str | None = None) -> list[list[RunConfig]]:
    """``cfgs`` cut into stacked runs of at most :data:`STACK_GROUP` models where the fast
    engine and :func:`can_stack` allow stacking them; else no groups (train one by one)."""
    cfgs = list(cfgs)
    if len(cfgs) < 2 or resolve_engine(engine) != "fast" or not can_stack(cfgs[0], input_shape):
        return []
    return [cfgs[i:i + STACK_GROUP] for i in range(0, len(cfgs), STACK_GROUP)]


def train_many(cfgs: Sequence[RunConfig], data: ImageData, device: torch.device | str = "cpu",
               on_start=None, on_epoch: EpochCallback | None = None,
               engine: str | None = None) -> list[TrainResult]:
    """Train the models ``cfgs`` (reference models of one recipe): stacked, in the groups of
    :func:`stack_groups`, where that applies, else one by one. ``on_start(config)`` is called
    once per stacked group or per model."""
    engine = resolve_engine(engine)
    cfgs = list(cfgs)
    groups = stack_groups(cfgs, data.input_shape, engine)
    if groups:
        results: list[TrainResult] = []
        for group in groups:
            if on_start:
                on_start(group[0])
            results += train_stacked(group, data, device, on_epoch=on_epoch)
        return results
    out = []
    for c in cfgs:
        if on_start:
            on_start(c)
        out.append(train_model(c, data, device, on_epoch=on_epoch, engine=engine))
    return out


def _check_same_recipe(cfgs: Sequence[RunConfig]) -> None:
    recipes = {c.recipe.config_hash for c in cfgs}
    if len(recipes) != 1 or any(c.role != "reference" for c in cfgs):
        raise ValueError("stacked training needs reference models of one recipe")


def train_stacked(cfgs: Sequence[RunConfig], data: ImageData, device: torch.device | str = "cpu",
                  on_epoch: EpochCallback | None = None) -> list[TrainResult]:
    """Train the reference MLPs ``cfgs`` (one recipe, different pool indices) together.

    Returns one :class:`TrainResult` per config, in order, with the same metrics as
    :func:`train_model` (``train_seconds`` is the shared wall time divided by K).
    """
    _check_same_recipe(cfgs)
    device = torch.device(device)
    cfg0 = cfgs[0]
    t0 = time.perf_counter()
    k_models = len(cfgs)
    split = split_parts(len(data.y), cfg0.data.part_size, cfg0.data.seed)
    pool_idx = split.pool
    position = {int(i): p for p, i in enumerate(pool_idx)}
    members, norms = [], []
    for c in cfgs:
        idx_in, _ = member_indices(c.role, split, pool_size=c.data.pool_size,
                                   pool_index=c.data.pool_index, seed=c.data.seed)
        members.append(torch.tensor([position[int(i)] for i in idx_in], device=device))
        norms.append(Normaliser.fit(data.x[idx_in]))
    n = len(members[0])
    if any(len(m) != n for m in members):
        raise ValueError("stacked models need member sets of one size")
    x_raw = torch.from_numpy(data.x[pool_idx].reshape(len(pool_idx), -1).astype(np.float32)).to(device)
    y_pool = torch.from_numpy(data.y[pool_idx]).to(device)
    member_pos = torch.stack(members)                                    # (K, n)
    mean = torch.stack([torch.from_numpy(nz.mean.reshape(-1)) for nz in norms]).to(device)[:, None, :]
    std = torch.stack([torch.from_numpy(nz.std.reshape(-1)) for nz in norms]).to(device)[:, None, :]

    models, gens = [], []
    for c in cfgs:
        member = [c.data.pool_index]
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            torch.manual_seed(derive_seed(c.seed, c.role, "train", *member))
            models.append(build_model(c.model.name, data.input_shape, data.num_classes, width=c.model.width))
        gens.append(generator(derive_seed(c.seed, c.role, "mask", *member), device))
    dense = [[layer for layer in m if isinstance(layer, nn.Linear)] for m in models]  # [K][2]
    if any(len(d) != 2 for d in dense):
        raise ValueError("stacked training needs MLPs of exactly two dense layers")
    params = [nn.Parameter(torch.stack([getattr(d[i], a).detach() for d in dense]).to(device))
              for i in range(2) for a in ("weight", "bias")]
    w1, b1, w2, b2 = params
    opt = torch.optim.Adam(params, lr=cfg0.train.lr, weight_decay=cfg0.train.weight_decay,
                           **({"fused": True} if device.type in ("cpu", "cuda") else {}))
    bs, kappa = cfg0.train.batch_size, cfg0.defence.kappa

    def batches() -> Iterator[Batch]:  # K models' shuffles, each from its own generator
        perms = torch.stack([torch.randperm(n, generator=g, device=device) for g in gens])
        for start in range(0, n, bs):
            pos = member_pos.gather(1, perms[:, start:start + bs])          # (K, b)
            yield Batch((x_raw[pos] - mean) / std, y_pool[pos], pos.shape[1])  # (K, b, d), normalised

    def view(xb: torch.Tensor) -> torch.Tensor:  # each model's mask from its own generator
        return torch.stack([training_view(xb[k], kappa, g) for k, g in enumerate(gens)]) if kappa else xb

    def step(batch: Batch) -> tuple[torch.Tensor, int]:
        h = torch.relu(torch.baddbmm(b1.unsqueeze(1), batch.x, w1.transpose(1, 2)))
        z = torch.baddbmm(b2.unsqueeze(1), h, w2.transpose(1, 2))
        losses = F.cross_entropy(z.reshape(-1, z.shape[-1]), batch.y.reshape(-1),
                                 reduction="none").view(k_models, -1).mean(1)
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
        return losses.detach() * batch.size, batch.size

    per_epoch = run_epochs(cfg0.train.epochs, batches, step, view=view, on_epoch=on_epoch)  # [epoch][K]
    histories = [[float(epoch[k]) for epoch in per_epoch] for k in range(k_models)]
    seconds = (time.perf_counter() - t0) / k_models
    results = []
    for k, (c, model) in enumerate(zip(cfgs, models)):
        with torch.no_grad():
            for target, stacked in zip((p for layer in dense[k] for p in (layer.weight, layer.bias)), params):
                target.copy_(stacked[k])
        metrics = evaluate(model.to(device), role_data(c, data, device, normaliser=norms[k]))
        metrics.update(train_seconds=seconds, engine="fast", stacked_models=k_models)
        results.append(TrainResult(model.cpu(), norms[k], metrics, histories[k]))
    return results
