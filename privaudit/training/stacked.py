"""Many small MLPs trained at once, as one batched model.

An audit trains many models of few recipes: per defence setting a target, its shadow, a
reference pool and a canary model (:mod:`privaudit.executor.plan`). For small models each
training step is mostly fixed cost (Python, kernel launches, the optimizer), so training them
one after another wastes the machine. Here K MLPs become one model with stacked parameters,
W₁ (K, width, d), W₂ (K, C, width), and every step is two batched matrix products:

    H_k = relu(X_k W₁ₖᵀ + b₁ₖ),  Z_k = H_k W₂ₖᵀ + b₂ₖ,  loss = Σ_k mean_b CE(Z_k, y_k).

Each model's gradient is the gradient of its own loss, and Adam acts elementwise, so model k
follows exactly its own training run: the same initial weights (from its own seed), its own
members and normaliser, the same shuffles, Poisson batches and MG masks (from its own
generator, in the same order), its own κ, its own defence's step terms
(:mod:`privaudit.defences.terms`, the formulas one-by-one training applies too, with their
draws from its own generators), and under DP-SGD its own clipping and its own noise stream (from
its own seed, the same draws as :class:`~privaudit.training.dp_engine.GaussianNoise`), with its
own σ. Model k's bits do not depend on the other models of its run
(:meth:`_Stack.set_gradients`), so :func:`~privaudit.training.trainer.train_model` trains a
stackable recipe here with K = 1 and gets the audit's model bit for bit; the one-by-one engine
(autograd through the model) agrees with it up to float32 summation order (tested).

Which models stack (:func:`stack_key`): ``mlp`` recipes on small inputs in fp32 without
augmentation and without a defence that changes the training loop in a way this engine does
not know (:attr:`privaudit.defences.base.Defence.stacks`: weight decay, early stopping and the
output-side ones train as the plain recipe does, with their own numbers; the defences made of
step terms train with them; adversarial regularisation, distillation and dropout train one by
one), trained by the fast engine, grouped by everything a step shares (architecture,
width, epochs, batch size, learning rate, weight decay, the number of members, DP-SGD or not
and its clipping norm); κ, σ, the defence and its knob, role, seed and data placement may differ
within a group. Under DP-SGD every model draws its own Poisson batch size, so each step pads
every model's batch to the largest (padding rows get clip factor 0, as in the one-by-one
engine).

Memory: the samples are held once, raw (float32); every batch is gathered per model and
normalised with that model's own statistics on the fly, so K models need K small
normalisers, not K copies of the data.
"""

from __future__ import annotations

import copy
import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from privaudit.core.config import RunConfig
from privaudit.core.seeding import generator, model_seed
from privaudit.data import ImageData, Normaliser, split_parts
from privaudit.data.splits import model_members
from privaudit.defences import Defence
from privaudit.defences import get as get_defence
from privaudit.defences.terms import Draws, StepTerms
from privaudit.models import build_model
from privaudit.training.dp_engine import DrawAhead, GhostDPSGD, clip_factors, noise_std, poisson_batch
from privaudit.training.loop import Batch, EpochCallback, run_epochs, training_view
from privaudit.training.results import (
    TrainResult,
    dp_metrics,
    dp_schedule,
    epoch_clock,
    evaluate,
    resolve_engine,
    role_data,
    snapshot_hook,
)
from privaudit.training.trace import LossTrace, traceable

# Stack only small inputs (the digits' 64 pixels, not CIFAR-10's 3,072): stacking speeds up
# small MLPs, while a large input's dense products already run through oneDNN near the
# machine's peak one model after another, and batched products go to MKL, the slower on these
# CPUs (benchmarks/bench_pool.py; docs/performance.md).
STACK_MAX_INPUT = 1024
STACK_MAX_MACS = 1 << 19
STACK_GROUP = 32  # models per stacked run at most (more are cut into runs of equal size, which the
#                   local executor trains side by side: 50 models as 25 + 25)
#: Adam's storage holds each model's parameters in rows padded to a multiple of ALIGN floats
#: (64 bytes, the fused kernel's unit of work), so that a model's bits do not depend on its run
ALIGN = 16
STACK_MAX_PARAMETERS = 1 << 24  # K × parameters per model at most (K Adam states at once)
#: held while a model's initial weights are drawn from torch's global generator (seeded inside
#: fork_rng, as train_model does): stacked runs may be built on several threads at once
GLOBAL_RNG = threading.Lock()


def can_stack(cfg: RunConfig, input_shape: tuple[int, int, int]) -> bool:
    """Whether models of ``cfg``'s recipe train faster stacked (module docstring)."""
    d = int(np.prod(input_shape))
    return (cfg.model.name == "mlp" and cfg.train.precision == "fp32" and cfg.train.augment == "none"
            and (not cfg.defence.method or get_defence(cfg.defence.method).stacks)
            and (not cfg.defence.dp or cfg.defence.mechanism == "dpsgd")
            and d <= STACK_MAX_INPUT and d * cfg.model.width <= STACK_MAX_MACS)


@functools.lru_cache(maxsize=4096)
def member_count(cfg: RunConfig, dataset_size: int) -> int:
    """How many members ``cfg``'s model trains on, from the dataset's size alone."""
    idx_in, _ = model_members(cfg, dataset_size)
    return len(idx_in)


def stack_key(cfg: RunConfig, input_shape: tuple[int, int, int], dataset_size: int) -> tuple | None:
    """What every model of a stacked run shares (None: ``cfg`` trains on its own)."""
    if not can_stack(cfg, input_shape):
        return None
    t, d = cfg.train, cfg.defence
    return (cfg.model.name, cfg.model.width, cfg.data.dataset, cfg.data.fingerprint, t.epochs, t.batch_size, t.lr,
            t.weight_decay, d.dp, d.max_grad_norm if d.dp else None, member_count(cfg, dataset_size))


def stack_groups(cfgs: Sequence[RunConfig], input_shape: tuple[int, int, int], dataset_size: int,
                 engine: str | None = None) -> list[list[RunConfig]]:
    """``cfgs`` cut into training runs, in first-appearance order: models of one
    :func:`stack_key` together where the fast engine stacks (more than :data:`STACK_GROUP` or
    :data:`STACK_MAX_PARAMETERS` a run: cut into runs of equal size), every other model alone.
    Every config lands in exactly one run; the runs depend on ``cfgs`` alone, never on the
    machine."""
    cfgs = list(cfgs)
    if resolve_engine(engine) != "fast":
        return [[c] for c in cfgs]
    buckets: dict[object, list[RunConfig]] = {}
    slots: list[RunConfig | tuple[str, tuple]] = []  # in first-appearance order: a config trained alone, or a stack key
    for c in cfgs:
        key = stack_key(c, input_shape, dataset_size)
        if key is None:
            slots.append(c)
            continue
        if key not in buckets:
            buckets[key] = []
            slots.append(("stack", key))
        buckets[key].append(c)
    d = int(np.prod(input_shape))
    out: list[list[RunConfig]] = []
    for slot in slots:
        if isinstance(slot, RunConfig):
            out.append([slot])
            continue
        models = buckets[slot[1]]
        per_model = (d + 1) * models[0].model.width + (models[0].model.width + 1) * 16  # ≤ 16 classes, roughly
        cap = max(1, min(STACK_GROUP, STACK_MAX_PARAMETERS // max(per_model, 1)))
        runs = -(-len(models) // cap)
        cuts = [round(i * len(models) / runs) for i in range(runs + 1)]  # runs of equal size (±1)
        out += [models[a:b] for a, b in zip(cuts, cuts[1:])]
    return out


def _rows(values: torch.Tensor, width: int | None = None) -> torch.Tensor:
    """``values`` (K, ...) as rows (K, width) in Adam's storage layout: model k's values, then
    zeros (``width`` default: the next multiple of :data:`ALIGN`)."""
    rows = values.reshape(len(values), -1)
    width = -(-rows.shape[1] // ALIGN) * ALIGN if width is None else width
    return rows if width == rows.shape[1] else torch.cat([rows, rows.new_zeros(len(rows), width - rows.shape[1])], 1)


def _at_least_two(product: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], a: torch.Tensor,
                  b: torch.Tensor) -> torch.Tensor:
    """``product(a, b)`` of batched operands, run on a zero second slice too when there is one
    model (K = 1), so that its slice comes from the kernel a run of several models uses."""
    if len(a) > 1:
        return product(a, b)
    return product(torch.cat([a, torch.zeros_like(a)]), torch.cat([b, torch.zeros_like(b)]))[:1]


def _check_stackable(cfgs: Sequence[RunConfig], data: ImageData) -> None:
    keys = {stack_key(c, data.input_shape, len(data.y)) for c in cfgs}
    if len(keys) != 1 or None in keys:
        raise ValueError("stacked training needs small fp32 MLPs sharing architecture, training schedule, "
                         "member count and DP-SGD or not (privaudit.training.stacked.stack_key)")


class _Stack:
    """What a stacked run holds per model: members (positions in the dataset), normaliser,
    initial model, generators; and the stacked parameters, in the layouts whose batched products
    need no copies of the (K, b, width) activations: W₁ᵀ (K, d, width), b₁ (K, width),
    W₂ (K, C, width), b₂ (K, C)."""

    def __init__(self, cfgs: Sequence[RunConfig], data: ImageData, device: torch.device):
        splits: dict[tuple[int, int], Any] = {}  # each model's own split (its part size and seed)
        self.members, self.norms, self.models, self.gens, self.noise_seeds = [], [], [], [], []
        self.trace: LossTrace | None = None  # the plain engine's loss traces (:mod:`privaudit.training.trace`)
        settings: list[tuple[Defence | None, float]] = []
        draws: list[Draws | None] = []
        for c in cfgs:
            key = (c.data.part_size, c.data.seed)
            if key not in splits:
                splits[key] = split_parts(len(data.y), c.data.part_size, c.data.seed)
            split = splits[key]
            idx_in, _ = model_members(c, len(data.y), split)
            self.members.append(torch.from_numpy(np.asarray(idx_in, dtype=np.int64)).to(device))
            self.norms.append(Normaliser.fit(data.x[idx_in]))
            with GLOBAL_RNG, torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
                torch.manual_seed(model_seed(c, "train"))
                # can_stack admits mlp recipes only, which build_model builds as an nn.Sequential
                self.models.append(cast(nn.Sequential, build_model(c.model.name, data.input_shape, data.num_classes,
                                                                   width=c.model.width, dp=c.defence.dp)))
            self.gens.append(generator(model_seed(c, "mask"), device))
            self.noise_seeds.append(model_seed(c, "dp-noise"))
            defence = get_defence(c.defence.method) if c.defence.method else None
            settings.append((defence, c.defence.knob))
            # the defence's own generators, as one-by-one training hands them to its hooks
            seed = model_seed(c, "defense")
            drawn = defence is not None and defence.stage("view")
            draws.append(Draws(generator(seed, device), np.random.default_rng(seed)) if drawn else None)
        #: each model's defence terms (:mod:`privaudit.defenses.terms`)
        self.terms = StepTerms(settings, data.num_classes, draws)
        self.x = torch.from_numpy(data.x.reshape(len(data.y), -1).astype(np.float32)).to(device)  # raw, once
        self.y = torch.from_numpy(data.y).to(device)
        self.mean = torch.stack([torch.from_numpy(nz.mean.reshape(-1)) for nz in self.norms]).to(device)[:, None, :]
        self.std = torch.stack([torch.from_numpy(nz.std.reshape(-1)) for nz in self.norms]).to(device)[:, None, :]
        self.dense = [[layer for layer in m if isinstance(layer, nn.Linear)] for m in self.models]  # [K][2]
        if any(len(d) != 2 for d in self.dense):
            raise ValueError("stacked training needs MLPs of exactly two dense layers")
        with torch.no_grad():
            values = [torch.stack([d[0].weight.t() for d in self.dense]).contiguous().to(device),
                      *(torch.stack([getattr(d[i], a) for d in self.dense]).to(device)
                        for i, a in ((0, "bias"), (1, "weight"), (1, "bias")))]
            #: Adam's storage: per parameter (K, P), each model's values in a row padded to P, a
            #: multiple of :data:`ALIGN`; the parameters are views of it (:meth:`set_gradients`)
            self.buffers = [_rows(v) for v in values]  # views of the fresh stacked values where none is padded
            self.params = [b[:, :v[0].numel()].view(v.shape) for b, v in zip(self.buffers, values)]

    def inputs(self, pos: torch.Tensor) -> torch.Tensor:
        """Normalised inputs (K, b, d) of dataset positions ``pos`` (K, b), each model's own way."""
        return (self.x[pos] - self.mean) / self.std

    def row_gradients(self, x: torch.Tensor, y: torch.Tensor, t: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Forward by hand for every row of every model, and the cross-entropy's gradient:
        per-row losses ℓ = −Σ_c t_c log s_c (K, b), hidden activations h (K, b, width),
        logits z (K, b, C) and ∂ℓ/∂z = s − t (K, b, C), with s = softmax(z) and t the one-hot
        label, or the soft target ``t`` (K, b, C) where the models train on soft targets."""
        w1t, b1, w2, b2 = self.params
        h = torch.baddbmm(b1.unsqueeze(1), x, w1t).clamp_min_(0.0)
        z = torch.baddbmm(b2.unsqueeze(1), h, w2.transpose(1, 2))
        log_p = torch.log_softmax(z, dim=2)
        if t is None:
            losses = -log_p.gather(2, y.unsqueeze(2)).squeeze(2)
            g_z = log_p.exp_()
            g_z.scatter_add_(2, y.unsqueeze(2), torch.full_like(losses, -1.0).unsqueeze(2))
        else:
            losses = -(t * log_p).sum(2)
            g_z = log_p.exp_().sub_(t)
        return losses, h, z, g_z

    def hidden_gradients(self, g_z: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """∂ℓ/∂(x W₁ᵀ + b₁) = (g_z W₂) ⊙ 1[h > 0] of output gradients ``g_z`` (K, b, C)."""
        return torch.ops.aten.threshold_backward(torch.bmm(g_z, self.params[2]), h, 0.0)  # relu's backward, one pass

    def set_gradients(self, x: torch.Tensor, h: torch.Tensor, c_pre: torch.Tensor, c_z: torch.Tensor,
                      noise: Sequence[torch.Tensor] | None = None) -> None:
        """The gradients of the stacked parameters from weighted per-row output gradients:
        Σ_i x_i c_pre,i ᵀ, Σ_i c_pre,i, Σ_i h_i c_z,i ᵀ, Σ_i c_z,i (one batched product each),
        plus ``noise`` (one tensor per parameter, DP-SGD's), set as ``.grad`` of Adam's storage.

        Each model's numbers do not depend on the other models of the run (measured on 1 to 4
        threads, tested on 1 and 2): the batched products and sums compute each model's slice
        alike whatever K is, but for one product, W₂'s, which for K = 1 reduces over the batch
        in other blocks on two threads, so it always runs on at least two slices
        (:func:`_at_least_two`); and Adam's fused kernel, whose vector lanes follow an element's
        position in the whole tensor, sees every model's row at a multiple of :data:`ALIGN`.
        On 8 or more threads the products of a small run split within a model, and a model
        and its K = 1 run agree to float32 rounding only."""
        grads = (torch.bmm(x.transpose(1, 2), c_pre), c_pre.sum(1),
                 _at_least_two(torch.bmm, c_z.transpose(1, 2), h), c_z.sum(1))
        for i, (buf, g) in enumerate(zip(self.buffers, grads)):
            if noise is not None:
                g = g + noise[i]
            buf.grad = _rows(g, buf.shape[1])

    def result(self, k: int, cfg: RunConfig, data: ImageData, device: torch.device, history: list,
               metrics: dict, epochs: int | None = None, snapshot: bool = False) -> TrainResult:
        """Model ``k`` as it stands, as a :class:`TrainResult` evaluated as
        :func:`~privaudit.training.trainer.train_model` evaluates, with its loss trace over the
        first ``epochs`` epochs (all by default); ``snapshot``: a copy, training goes on."""
        w1t, b1, w2, b2 = self.params
        model = copy.deepcopy(self.models[k]) if snapshot else self.models[k]
        l1, l2 = (layer for layer in model if isinstance(layer, nn.Linear))
        with torch.no_grad():
            for target, value in ((l1.weight, w1t[k].t()), (l1.bias, b1[k]), (l2.weight, w2[k]), (l2.bias, b2[k])):
                target.copy_(value)
        trace = None
        if self.trace is not None:
            trace = np.ascontiguousarray(
                self.trace.array(epochs).reshape(-1, len(self.members), len(self.members[k]))[:, k])
        out = {**evaluate(model.to(device), role_data(cfg, data, device, normaliser=self.norms[k])), **metrics}
        return TrainResult(model.cpu(), self.norms[k], out, list(history), trace, self.members[k].cpu().numpy())


def train_stacked(cfgs: Sequence[RunConfig], data: ImageData, device: torch.device | str = "cpu",
                  on_epoch: EpochCallback | None = None,
                  snapshots: Mapping[int, Callable[[TrainResult], None]] | None = None) -> list[TrainResult]:
    """Train the MLPs ``cfgs`` (one :func:`stack_key`) together.

    Returns one :class:`TrainResult` per config, in order, with the same metrics as
    :func:`train_model` (``train_seconds`` is the shared wall time divided by K). Model k's
    bits do not depend on the other models of the run (on 1 to 4 threads:
    :meth:`_Stack.set_gradients`; tested), so a model trained alone (K = 1, what
    :func:`train_model` does for a stackable recipe) is the model an audit's stacked run makes.

    ``snapshots`` (one non-private model only): as :func:`train_model`'s, the model after
    epoch e handed to ``snapshots[e]``.
    """
    cfgs = [c.validated() for c in cfgs]
    _check_stackable(cfgs, data)
    if snapshots and (len(cfgs) != 1 or cfgs[0].defence.dp):
        raise ValueError("epoch snapshots are for one non-private model")
    device = torch.device(device)
    t0 = time.perf_counter()
    st = _Stack(cfgs, data, device)
    on_epoch, clock_start, epochs_ended, epoch_seconds = epoch_clock(on_epoch)
    if snapshots:
        on_epoch = _snapshotting(st, cfgs[0], data, device, t0, snapshots, on_epoch)
    train = (_train_dp if cfgs[0].defence.dp else _train_plain)
    clock_start()
    histories, extra = train(cfgs, st, device, on_epoch)
    seconds = (time.perf_counter() - t0) / len(cfgs)
    clock = {"fit_seconds": epochs_ended(), "epoch_seconds": epoch_seconds()}  # the run's, shared by its K models
    return [st.result(k, c, data, device, histories[k],
                      {"train_seconds": seconds, **clock, "engine": "fast", "stacked_models": len(cfgs), **extra[k]})
            for k, c in enumerate(cfgs)]


def _snapshotting(st: _Stack, cfg: RunConfig, data: ImageData, device: torch.device, t0: float,
                  snapshots: Mapping[int, Callable[[TrainResult], None]],
                  on_epoch: EpochCallback | None) -> EpochCallback:
    """An epoch callback that hands ``snapshots[e]`` a copy of the (one) model after epoch e."""
    def take(epoch: int, epochs: int, history: list[float]) -> TrainResult:
        metrics = {"train_seconds": time.perf_counter() - t0, "engine": "fast", "stacked_models": 1,
                   "snapshot_of_epochs": epochs}
        return st.result(0, cfg, data, device, history, metrics, epochs=epoch, snapshot=True)

    return snapshot_hook(snapshots, on_epoch, take)


class FusedAdam:
    """Adam over the stacked parameters (elementwise, so each model's slice follows its own Adam)
    through the fused kernel ``torch.optim.Adam(fused=True)`` runs, called directly.

    The same kernel on the same state gives the same bits as ``torch.optim.Adam(..., fused=True)``
    (tested), but without the optimizer class, whose first use imports torch's compiler stack
    (``torch._dynamo``, docs/performance.md) that stacked training never needs. Where
    the kernel is missing (another device, another torch), it is ``torch.optim.Adam`` itself.
    """

    def __init__(self, params: list[torch.Tensor], lr: float, weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = params
        self.lr, self.weight_decay, self.betas, self.eps = float(lr), float(weight_decay), betas, float(eps)
        self._kernel = getattr(torch, "_fused_adam_", None) if all(p.device.type == "cpu" for p in params) else None
        if self._kernel is None:
            self._fallback = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, betas=betas, eps=eps,
                                              **({"fused": True} if params[0].device.type == "cuda" else {}))
            return
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in params]

    def step(self) -> None:
        if self._kernel is None:
            self._fallback.step()
            return
        torch._foreach_add_(self.steps, 1)
        self._kernel(self.params, [p.grad for p in self.params], self.exp_avg, self.exp_avg_sq, [], self.steps,
                     amsgrad=False, lr=self.lr, beta1=self.betas[0], beta2=self.betas[1],
                     weight_decay=self.weight_decay, eps=self.eps, maximize=False, grad_scale=None, found_inf=None)


def _adam(params: list[torch.Tensor], cfg: RunConfig) -> FusedAdam:
    """The stacked run's Adam, with the recipe's learning rate and weight decay (as the one-by-one
    fast engine's fused Adam)."""
    return FusedAdam(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)


def _views(cfgs: Sequence[RunConfig], st: _Stack, device: torch.device):
    """Each model's training view of its rows (K, b, d): model k's rows through
    :func:`~privaudit.training.loop.training_view` with its own κ and generator (the one
    place that applies MG masks, for both engines, so the draws are those of its own training
    run), none for κ = 0. ``view(xb, drawn)`` masks model k's first ``drawn[k]`` rows only (default: all)
    and leaves the rows past them as they are."""
    noisy = [(k, c.defence.kappa, g) for k, (c, g) in enumerate(zip(cfgs, st.gens)) if c.defence.kappa]

    def view(xb: torch.Tensor, drawn: Sequence[int] | None = None) -> torch.Tensor:
        if not noisy:
            return xb
        out = xb.clone()
        for k, kappa, g in noisy:
            n = xb.shape[1] if drawn is None else drawn[k]
            out[k, :n] = training_view(xb[k, :n], kappa, g)
        return out

    return view


def _train_plain(cfgs: Sequence[RunConfig], st: _Stack, device: torch.device,
                 on_epoch: EpochCallback | None) -> tuple[list, list[dict]]:
    """Adam on each model's mean cross-entropy over its own shuffled full passes."""
    k_models, c0 = len(cfgs), cfgs[0]
    member_pos = torch.stack(st.members)                                        # (K, n)
    n, bs = member_pos.shape[1], c0.train.batch_size
    opt = _adam(st.buffers, c0)
    # every model's loss trace in one: model k's member j is column k·n + j
    st.trace = LossTrace(k_models * n, c0.train.epochs, device) if traceable(k_models * n, c0.train.epochs) else None
    offsets = torch.arange(k_models, device=device)[:, None] * n

    def batches() -> Iterator[Batch]:  # K models' shuffles, each from its own generator
        if st.trace is not None:
            st.trace.next_epoch()
        perms = torch.stack([torch.randperm(n, generator=g, device=device) for g in st.gens])
        for start in range(0, n, bs):
            cols = perms[:, start:start + bs]
            pos = member_pos.gather(1, cols)                                     # (K, b)
            yield Batch(st.inputs(pos), st.y[pos], pos.shape[1], (cols + offsets).reshape(-1))

    # each member's training target (K·n, C), where a model trains on soft targets
    soft = st.terms.targets(st.y[member_pos])
    targets = None if soft is None else soft.float().reshape(k_models * n, -1)

    def step(batch: Batch, epoch: int) -> tuple[torch.Tensor, int]:
        """The plain step (∂ℓ/∂z = s − t), each model's defence terms on its own models: its
        view of the batch and, where it descends another objective, that objective's gradient
        (by autograd through its formula, :meth:`StepTerms.gradients`)."""
        x, y = batch.x, batch.y
        t = None if targets is None else targets[batch.index].view(k_models, -1, targets.shape[1])
        if st.terms.active:
            x, t = st.terms.view(x, t)
        losses, h, z, g_z = st.row_gradients(x, y, t)
        g_z.mul_(1.0 / batch.size)                                              # each model's mean loss
        for models, grad in st.terms.gradients(z, y, t, epoch):
            g_z[models] = grad
        st.set_gradients(x, h, st.hidden_gradients(g_z, h), g_z)
        opt.step()
        if st.trace is not None:
            assert batch.index is not None  # batches() gives every row's position
            st.trace.record(batch.index, losses.reshape(-1))
        return losses.detach().sum(1), batch.size

    per_epoch = run_epochs(c0.train.epochs, batches, step, view=_views(cfgs, st, device),
                           on_epoch=on_epoch)  # [epoch][K]
    return [[float(epoch[k]) for epoch in per_epoch] for k in range(k_models)], [{} for _ in cfgs]


def _stacked_noise(gens: list, numel: int, device: torch.device) -> DrawAhead:
    """K models' DP noise, N(0, 1) blocks (K, numel) per step, model k's from its own generator
    (exactly :class:`~privaudit.training.dp_engine.GaussianNoise`'s draws; zeros for a model
    without a generator, σ = 0), drawn one step ahead in a background thread on the CPU."""
    def fill(buf: torch.Tensor) -> torch.Tensor:
        for row, g in zip(buf, gens):
            if g is not None:
                row.normal_(0.0, 1.0, generator=g)
        return buf

    cpu = device.type == "cpu"
    return DrawAhead([torch.zeros(len(gens), numel, device=device) for _ in range(2 if cpu else 1)], fill, cpu)


def _train_dp(cfgs: Sequence[RunConfig], st: _Stack, device: torch.device,
              on_epoch: EpochCallback | None) -> tuple[list, list[dict]]:
    """DP-SGD as :class:`GhostDPSGD` does it for one MLP, for K at once: per model a Poisson
    batch (its own generator), padded as the one-by-one engine pads it, masked, then padded
    again to the step's largest; ghost norms ‖a_i‖²‖b_i‖² + ‖b_i‖² per layer; clip factors
    min(1, C/(‖g_i‖+1e-6))/E|B|, 0 on padding; the clipped sums as batched products; each
    model's noise σ_k C/E|B| from its own stream, in the engine's layout (W₁, b₁, W₂, b₂)."""
    k_models, c0 = len(cfgs), cfgs[0]
    n = len(st.members[0])
    schedules = [dp_schedule(c, n) for c in cfgs]           # (q, steps an epoch, σ, calibrated with)
    q, per_epoch = schedules[0][0], schedules[0][1]
    clip = float(c0.defence.max_grad_norm)
    scale = 1.0 / max(int(n * q), 1)                         # 1 / E|B|, Opacus's ⌊nq⌋
    stds = [noise_std(s[2], clip, scale) for s in schedules]
    std = torch.tensor(stds, device=device)
    numel = sum(p[0].numel() for p in st.params)
    noises = _stacked_noise([generator(seed, device) if s > 0 else None for seed, s in zip(st.noise_seeds, stds)],
                            numel, device)
    layouts = [tuple(p.shape[1:][::-1]) for p in st.params[:1]] + [tuple(p.shape[1:]) for p in st.params[1:]]
    opt = _adam(st.buffers, c0)
    view = _views(cfgs, st, device)
    member_pos = torch.stack(st.members)                                        # (K, n)
    pad = GhostDPSGD.padded_size
    # model k's member j: column k·n + j
    st.trace = LossTrace(k_models * n, c0.train.epochs, device) if traceable(k_models * n, c0.train.epochs) else None
    offsets = torch.arange(k_models, device=device)[:, None] * n
    batch_count = [0]

    def batches() -> Iterator[Batch]:
        """Per model, from its own generator and in its engine's order: the Poisson batch, then
        the MG mask's draws for the batch padded as one by one (the model's rows 0..pad(size));
        every model's rows gathered, normalised and masked at once. Rows past a model's own
        batch are padding (clip factor 0: their content never reaches a gradient)."""
        for _ in range(per_epoch):
            if batch_count[0] % per_epoch == 0 and st.trace is not None:
                st.trace.next_epoch()
            batch_count[0] += 1
            picks = [poisson_batch(n, q, g, device) for g in st.gens]
            sizes = [len(pick) for pick in picks]
            idx = torch.zeros(k_models, max(pad(max(sizes)), 1), dtype=torch.int64, device=device)
            for k, pick in enumerate(picks):
                idx[k, :len(pick)] = pick
            pos = member_pos.gather(1, idx)                                      # (K, width)
            x = view(st.inputs(pos), [pad(size) for size in sizes])
            yield Batch(x, st.y[pos], sizes, idx + offsets)  # type: ignore[arg-type]  # sizes per model

    def step(batch: Batch, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        sizes = torch.tensor(batch.size, device=device)
        real = torch.arange(batch.x.shape[1], device=device)[None, :] < sizes[:, None]   # (K, P)
        losses, h, _, g_z = st.row_gradients(batch.x, batch.y)
        g_pre = st.hidden_gradients(g_z, h)
        pre_sq, z_sq, x_sq, h_sq = (torch.linalg.vector_norm(t, dim=2).square_() for t in (g_pre, g_z, batch.x, h))
        sq = x_sq * pre_sq + pre_sq + h_sq * z_sq + z_sq                             # ghost norms²
        factor = clip_factors(sq, clip, scale, real)                                  # (K, P)
        noise = noises.next().mul_(std[:, None])
        blocks, offset = [], 0
        for i, shape in enumerate(layouts):  # the engine's layout: W₁ (width, d), b₁, W₂ (C, width), b₂
            size = math.prod(shape)
            block = noise[:, offset:offset + size].view(k_models, *shape)
            blocks.append(block.transpose(1, 2) if i == 0 else block)  # W₁ is held transposed
            offset += size
        st.set_gradients(batch.x, h, g_pre.mul_(factor[..., None]), g_z.mul_(factor[..., None]), blocks)
        opt.step()
        if st.trace is not None:
            assert batch.index is not None  # batches() gives every row's position
            st.trace.record(batch.index[real], losses.detach()[real])
        return (losses.detach() * real).sum(1), sizes

    try:  # torch's thread count is left alone: runs may train side by side (privaudit.executor.local)
        per_epoch_loss = run_epochs(c0.train.epochs, batches, step, on_epoch=on_epoch)  # masks drawn in batches()
    finally:
        noises.close()
    histories = [[float(epoch[k]) for epoch in per_epoch_loss] for k in range(k_models)]
    extra = [dp_metrics(c, n, sigma, q, [(sigma, q, steps * c.train.epochs)], calibrated)
             for c, (q, steps, sigma, calibrated) in zip(cfgs, schedules)]
    return histories, extra
