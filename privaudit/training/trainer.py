"""Training a target, shadow, reference or canary model from its config.

Data lives on the device as one normalised float tensor; batches are taken by index (no
per-sample Python, no DataLoader). Every recipe runs through the one epoch loop of
:mod:`privaudit.training.loop`, which applies the flip and the MG mask in one place; this
module only picks the batch source and the step: Adam over shuffled full passes, DP-SGD over
Poisson batches (privaudit's step or Opacus's), NoisyCGD over fixed cyclic batches.

Two engines give the same models (the tests check that they agree):

* ``fast`` (default): dense layers through oneDNN on x86 CPUs
  (:mod:`privaudit.models.fast_linear`), convolutional models in the channels-last layout on
  the CPU (:func:`channels_last`), fused Adam, and DP-SGD for the MLP and both CNNs by
  :class:`privaudit.training.dp_engine.GhostDPSGD` (ghost norms of dense layers, per-sample
  gradients of convolutions and GroupNorm formed in one batched product each, one backward
  pass, own Poisson sampler over the in-memory tensors). Models it does not support go
  through Opacus as in ``reference``.
* ``reference``: plain PyTorch layers and Adam; DP-SGD through Opacus's
  ``PrivacyEngine.make_private`` with Poisson sampling and ghost clipping
  (``grad_sample_mode="ghost"``).

Both DP paths implement the same mechanism (Poisson rate q = 1/⌈n/batch⌉, ⌈n/batch⌉ steps an
epoch, clip to C, noise σC, divide by ⌊nq⌋) and are accounted identically. ``$PRIVAUDIT_ENGINE``
selects the engine for the command line.

Randomness: the model's initialisation and dropout (and Opacus's sampling and noise) use
torch's global RNG, which is seeded (inside ``torch.random.fork_rng``) from the run seed;
shuffling, Poisson sampling, MG masks and privaudit's DP noise use explicit generators. Same
config, seed, engine and device give the same model.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from privaudit.analysis.hidden_state import noisycgd_epsilon, noisycgd_noise_for_epsilon
from privaudit.core.config import RunConfig
from privaudit.core.seeding import derive_seed, generator, model_seed
from privaudit.data import ImageData, split_parts
from privaudit.defences import Defence, TrainingContext, TrainingHooks, of_config
from privaudit.errors import ConfigError
from privaudit.models import build_model
from privaudit.models.convex_relu import ConvexReLU
from privaudit.models.fast_linear import fast_layers
from privaudit.training.dp_engine import GaussianNoise, GhostDPSGD, dp_compute_threads, supports_ghost
from privaudit.training.loop import Batch, EpochCallback, from_loader, poisson, run_epochs, shuffled, training_view
from privaudit.training.noisycgd import train_noisycgd
from privaudit.training.results import (
    RoleData,
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


def make_optimizer(model: nn.Module, cfg: RunConfig, engine: str) -> torch.optim.Optimizer:
    """Adam with the run's lr and weight decay; the fused kernel in the fast engine (the same
    update rule, one kernel for all parameters)."""
    fused = engine == "fast" and next(model.parameters()).dtype == torch.float32
    options: dict[str, Any] = {"fused": True} if fused else {}
    return torch.optim.Adam(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay, **options)


















def train_model(cfg: RunConfig, data: ImageData, device: torch.device | str = "cpu",
                on_epoch: EpochCallback | None = None, engine: str | None = None,
                snapshots: Mapping[int, Callable[[TrainResult], None]] | None = None,
                role: RoleData | None = None, stack: bool = True) -> TrainResult:
    """Train the model described by ``cfg`` on its member part and evaluate it.

    Returns the model (on the CPU, eval mode), its normaliser, and metrics: train accuracy
    (members, clean inputs), test accuracy (its non-member part, never seen in training),
    losses, and for DP-SGD σ, sampling rate, steps, ε at δ and the accountant used.
    ``engine`` is ``fast`` or ``reference`` (module docstring; default :func:`resolve_engine`).

    ``snapshots`` maps an epoch e < ``cfg.train.epochs`` to a function that receives the model
    as it stands after e epochs, as the :class:`TrainResult` that training ``cfg`` with e
    epochs returns: non-private training consumes its generators epoch by epoch whatever the
    number of epochs, so the first e epochs of a longer run are that run (the tests check the
    weights bit for bit). DP-SGD and NoisyCGD take none (their ε depends on the steps).

    ``role``: the members and non-members (normalised) to train and evaluate on, in place of
    the ML-Leaks parts that ``cfg`` names (``privaudit audit-model`` trains its reference
    models on data around the audited samples this way).

    A recipe the stacked engine trains (:func:`privaudit.training.stacked.can_stack`, with the
    fast engine) trains there, alone (K = 1): its bits are then those of the same recipe in
    an audit's stacked run, so a config hash names one computation whichever command trains it
    first. ``stack=False`` trains it one by one all the same (the tests compare the engines).
    """
    engine = resolve_engine(engine)
    device = torch.device(device)
    if snapshots and (cfg.defence.dp or cfg.model.name == "convex-relu"):
        raise ConfigError("epoch snapshots are for non-private mlp and CNN training")
    if stack and engine == "fast" and role is None:
        from privaudit.training.stacked import can_stack, train_stacked  # it builds on this module

        if can_stack(cfg, data.input_shape):
            return train_stacked([cfg], data, device, on_epoch=on_epoch, snapshots=snapshots)[0]
    t0 = time.perf_counter()
    rd = role if role is not None else role_data(cfg, data, device)

    train_seed = model_seed(cfg, "train")
    devices = [device.index or 0] if device.type == "cuda" else []
    on_epoch, clock_start, epochs_ended, epoch_seconds = epoch_clock(on_epoch)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(train_seed)
        defence = of_config(cfg.defence)
        model = build_model(cfg.model.name, data.input_shape, data.num_classes,
                            width=cfg.model.width, dp=cfg.defence.dp, args=cfg.model.args,
                            **(defence.model_kwargs(cfg.defence.knob) if defence else {})).to(device)
        # recorded by the steps that compute per-row losses (plain Adam, the fast DP-SGD step); empty otherwise
        trace = LossTrace(len(rd.y_in), cfg.train.epochs, device) if traceable(len(rd.y_in), cfg.train.epochs) else None
        if snapshots:
            on_epoch = _snapshotting(cfg, model, rd, engine, t0, snapshots, on_epoch, trace)
        # torch.optim imports torch._dynamo on its first use in a process (docs/performance.md):
        # built before the epoch clock starts, so that ``fit_seconds`` is the epochs
        optimizer = None if cfg.model.name == "convex-relu" else make_optimizer(model, cfg, engine)
        clock_start()
        g = generator(model_seed(cfg, "mask"), device)
        noise_seed = model_seed(cfg, "dp-noise")
        # flips from their own stream: the mask and batch streams draw the same numbers with or without them
        g_aug = (generator(model_seed(cfg, "augment"), device)
                 if cfg.train.augment == "flip" else None)
        run = _Run(cfg, model, optimizer, rd, g, g_aug, noise_seed, on_epoch, trace, data, device, engine, defence)
        history, dp_metrics = next(fit for _, applies, fit in TRAINERS if applies(run))(run)
    metrics = {**evaluate(model, rd), "train_seconds": time.perf_counter() - t0, "fit_seconds": epochs_ended(),
               "epoch_seconds": epoch_seconds(), "engine": engine, **dp_metrics}
    notes: list[str] | None = getattr(model, "privaudit_notes", None)  # set by privaudit.models.custom
    if notes:
        metrics["model_changes"] = list(notes)
    return TrainResult(model.cpu(), rd.normaliser, metrics, history,
                       None if trace is None or trace.empty else trace.array(), rd.index_in)


@dataclass
class _Run:
    """What a trainer of :data:`TRAINERS` gets: the config, the built model and its optimiser,
    the members and non-members, the generators (MG masks and batches, flips), the DP noise's
    seed, the epoch callback, the loss trace, the data, the device, the engine and the defence."""

    cfg: RunConfig
    model: nn.Module
    optimizer: Any
    rd: RoleData
    g: torch.Generator
    g_aug: torch.Generator | None
    noise_seed: int
    on_epoch: EpochCallback
    trace: LossTrace | None
    data: ImageData
    device: torch.device
    engine: str
    defence: Defence | None


def _fit_convex(r: _Run) -> tuple[list[float], dict]:
    return _train_convex(r.cfg, r.model, r.rd, r.g, r.noise_seed, r.on_epoch)


def _fit_ghost(r: _Run) -> tuple[list[float], dict]:
    return _train_ghost_dpsgd(r.cfg, r.model, r.optimizer, r.rd, r.g, r.noise_seed, r.on_epoch, r.g_aug, r.trace)


def _fit_opacus(r: _Run) -> tuple[list[float], dict]:
    return _train_dpsgd(r.cfg, r.model, r.optimizer, r.rd, r.g, r.on_epoch, r.g_aug)


def _fit_plain(r: _Run) -> tuple[list[float], dict]:
    hooks = _defence_hooks(r.cfg, r.defence, r.model, r.rd, r.data, r.device, r.engine)
    if r.engine == "fast" and r.cfg.train.precision == "fp32":
        with fast_layers(r.model), channels_last(r.model, r.device) as layout:
            return _train_plain(r.cfg, r.model, r.optimizer, r.rd, r.g, r.on_epoch, r.g_aug, layout, hooks,
                                r.trace), {}
    # bf16 autocast casts nn.Linear itself (to oneDNN's bf16 kernels on CPUs)
    return _train_plain(r.cfg, r.model, r.optimizer, r.rd, r.g, r.on_epoch, r.g_aug, hooks=hooks, trace=r.trace), {}


#: which trainer a recipe goes through, the first that applies (each a batch source and a step
#: of :mod:`privaudit.training.loop`, its table): (name, applies, trainer)
TRAINERS: tuple[tuple[str, Callable[[_Run], bool], Callable[[_Run], tuple[list[float], dict]]], ...] = (
    ("convex-relu: (noisy) cyclic gradient descent, its own optimiser",
     lambda r: r.cfg.model.name == "convex-relu", _fit_convex),
    ("DP-SGD, one pass (ghost norms)",
     lambda r: r.cfg.defence.dp and r.engine == "fast" and supports_ghost(r.model), _fit_ghost),
    ("DP-SGD through Opacus", lambda r: r.cfg.defence.dp, _fit_opacus),
    ("Adam, with the defence's hooks", lambda r: True, _fit_plain),
)




def _snapshotting(cfg: RunConfig, model: nn.Module, rd: RoleData, engine: str, t0: float,
                  snapshots: Mapping[int, Callable[[TrainResult], None]],
                  on_epoch: EpochCallback | None, trace: LossTrace | None = None) -> EpochCallback:
    """An epoch callback that hands ``snapshots[e]`` a copy of the model after epoch e, in the
    standard layout and with plain layers, evaluated as :func:`train_model` evaluates."""
    def take(epoch: int, epochs: int, history: list[float]) -> TrainResult:
        snap = copy.deepcopy(model)
        for m in snap.modules():
            if isinstance(m, nn.Linear) and type(m) is not nn.Linear:
                m.__class__ = nn.Linear  # the fast layers' class swap undone on the copy
        snap.to(memory_format=torch.contiguous_format)
        metrics = {**evaluate(snap, rd), "train_seconds": time.perf_counter() - t0, "engine": engine,
                   "snapshot_of_epochs": cfg.train.epochs}
        return TrainResult(snap.cpu(), rd.normaliser, metrics, history,
                           None if trace is None else trace.array(epoch), rd.index_in)

    return snapshot_hook(snapshots, on_epoch, take)


@contextlib.contextmanager
def channels_last(model: nn.Module, device: torch.device) -> Iterator[torch.memory_format | None]:
    """Convolutional models train in the channels-last layout on the CPU (oneDNN's
    convolutions and max-pooling run faster in it, docs/performance.md); yields the layout the
    batches should take
    (None: leave them). The model is back in the standard layout afterwards."""
    if device.type != "cpu" or not any(isinstance(m, nn.Conv2d) for m in model.modules()):
        yield None
        return
    model.to(memory_format=torch.channels_last)
    try:
        yield torch.channels_last
    finally:
        model.to(memory_format=torch.contiguous_format)


def _view(cfg: RunConfig, g: torch.Generator, g_aug: torch.Generator | None,
          layout: torch.memory_format | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The run's training view (flip, then MG mask: :func:`privaudit.training.loop.training_view`),
    in the memory layout the model trains in."""
    kappa = cfg.defence.kappa

    def view(x: torch.Tensor) -> torch.Tensor:
        x = training_view(x, kappa, g, g_aug)
        return x if layout is None else x.contiguous(memory_format=layout)

    return view


def _defence_hooks(cfg: RunConfig, defence: Defence | None, model: nn.Module, rd: RoleData, data: ImageData,
                   device: torch.device, engine: str) -> TrainingHooks | None:
    """The training hooks of ``cfg``'s defence (None: the plain loop), set up with their
    context: a generator of their own (so that the shuffles and MG masks draw what they
    always drew), the reference set and the sub-model trainer where the defence needs them."""
    hooks = defence.hooks(cfg.defence.knob, data.num_classes) if defence else None
    if hooks is None:
        return None
    assert defence is not None  # the hooks come from the defence
    seed = model_seed(cfg, "defense")
    reference = None
    if defence.needs_reference:
        reference = defence_reference(cfg, data, rd, device)

    def train_submodel(x: torch.Tensor, y: torch.Tensor, index: int = 0) -> nn.Module:
        """A fresh model of ``cfg``'s architecture trained by the plain recipe on (x, y)."""
        sub_cfg = replace(cfg, defence=cfg.defence.undefended)
        with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
            torch.manual_seed(derive_seed(seed, "submodel", index))
            sub = build_model(cfg.model.name, data.input_shape, data.num_classes, width=cfg.model.width,
                              args=cfg.model.args).to(device)
            opt = make_optimizer(sub, sub_cfg, engine)
            sub_rd = RoleData(x, y, x[:0], y[:0], rd.normaliser)
            _train_plain(sub_cfg, sub, opt, sub_rd, generator(derive_seed(seed, "submodel-batches", index), device),
                         None)
        return sub.eval()

    hooks.setup(TrainingContext(model=model, x=rd.x_in, y=rd.y_in, num_classes=data.num_classes,
                                generator=generator(seed, device), rng=np.random.default_rng(seed),
                                epochs=cfg.train.epochs, reference=reference,
                                train_submodel=train_submodel if defence.needs_submodels else None))
    return hooks


def defence_reference(cfg: RunConfig, data: ImageData, rd: RoleData,
                      device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A defender's reference set (adversarial regularisation's non-members): samples that
    neither ``cfg``'s model trains on nor its attacks evaluate it on. For a target, reference
    or canary model the shadow parts (which none of them trains on), for a shadow model the
    target parts; normalised with the model's own statistics."""
    split = split_parts(len(data.y), cfg.data.part_size, cfg.data.seed)
    idx = split.pool if cfg.role == "shadow" else split.population
    return (torch.from_numpy(rd.normaliser(data.x[idx])).to(device), torch.from_numpy(data.y[idx]).to(device))


def _train_plain(cfg: RunConfig, model: nn.Module, optimizer: torch.optim.Optimizer, rd: RoleData,
                 g: torch.Generator, on_epoch: EpochCallback | None, g_aug: torch.Generator | None = None,
                 layout: torch.memory_format | None = None, hooks: TrainingHooks | None = None,
                 trace: LossTrace | None = None) -> list[float]:
    """Adam on the mean cross-entropy of shuffled full passes (bf16 autocast when asked);
    a training-side defence changes the targets, the batches, the loss or adds a step after
    each update through its ``hooks`` (:class:`privaudit.defences.TrainingHooks`). Each row's
    loss goes into ``trace`` when given (:mod:`privaudit.training.trace`)."""
    loss_fn = nn.CrossEntropyLoss()
    device_type = rd.x_in.device.type
    bf16 = cfg.train.precision == "bf16"

    def step(batch: Batch, epoch: int) -> tuple[torch.Tensor, int]:
        x, t = batch.x, batch.y
        if hooks is not None:
            x, t = hooks.view(x, t)
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
            if hooks is None:
                loss = reported = loss_fn(logits, t)
            else:
                loss, reported = hooks.loss(logits, t, epoch)
        if trace is not None and batch.index is not None and len(logits) == len(batch.index):
            trace.record(batch.index, F.cross_entropy(logits.detach().float(), t, reduction="none"))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if hooks is not None:
            hooks.after_step(model, x, t)
        return reported.detach() * batch.size, batch.size

    def before_epoch() -> None:
        model.train()
        if trace is not None:
            trace.next_epoch()

    targets = rd.y_in if hooks is None else hooks.targets(rd.x_in, rd.y_in)
    return run_epochs(cfg.train.epochs, shuffled(rd.x_in, targets, cfg.train.batch_size, g), step,
                      view=_view(cfg, g, g_aug, layout), on_epoch=on_epoch, before_epoch=before_epoch)


def _train_convex(cfg: RunConfig, model: nn.Module, rd: RoleData, g: torch.Generator, noise_seed: int,
                  on_epoch: EpochCallback | None) -> tuple[list[float], dict]:
    """``convex-relu`` by cyclic gradient descent over fixed batches: NoisyCGD under DP
    (σ given or calibrated to the target ε by the hidden-state bound), else the same
    iteration without clipping or noise."""
    d, t = cfg.defence, cfg.train
    n = len(rd.y_in)
    privacy = None
    if d.dp:
        args = (n, t.batch_size, t.epochs, t.lr, t.weight_decay, d.delta)
        if d.noise_multiplier is not None:
            privacy = noisycgd_epsilon(d.noise_multiplier, *args)
        else:
            assert d.target_epsilon is not None  # a DP defence without σ has σ calibrated to a target ε
            privacy = noisycgd_noise_for_epsilon(d.target_epsilon, *args)
    assert isinstance(model, ConvexReLU)  # the convex-relu recipe builds a ConvexReLU
    history = train_noisycgd(model, rd.x_in, rd.y_in,
                             noise_multiplier=privacy.noise_multiplier if privacy else 0.0,
                             max_grad_norm=d.max_grad_norm if privacy else math.inf,
                             batch_size=t.batch_size, epochs=t.epochs, lr=t.lr, l2=t.weight_decay,
                             generator=g, noise_seed=noise_seed, on_epoch=on_epoch)
    if privacy is None:
        return history, {}
    return history, {
        "noise_multiplier": privacy.noise_multiplier,
        "batches_per_epoch": privacy.batches_per_epoch,
        "steps": privacy.batches_per_epoch * t.epochs,
        "epsilon": privacy.epsilon,
        "delta": d.delta,
        "gdp_mu": privacy.mu,
        "accountant": "hidden-state GDP",
        "calibrated": d.noise_multiplier is None,
    }






def _train_ghost_dpsgd(cfg: RunConfig, model: nn.Module, optimizer: torch.optim.Optimizer, rd: RoleData,
                       g: torch.Generator, noise_seed: int, on_epoch: EpochCallback | None,
                       g_aug: torch.Generator | None = None, trace: LossTrace | None = None
                       ) -> tuple[list[float], dict]:
    """DP-SGD with :class:`GhostDPSGD`: Poisson batches drawn from the in-memory members (each
    real row's loss into ``trace`` when given)."""
    n = len(rd.y_in)
    sample_rate, per_epoch, sigma, calibrated_with = dp_schedule(cfg, n)
    noise = GaussianNoise(noise_seed, rd.x_in.device)
    dp = GhostDPSGD(model, cfg.defence.max_grad_norm, sigma, int(n * sample_rate), noise)

    def step(batch: Batch, epoch: int) -> tuple[torch.Tensor, int]:
        losses = dp.compute_grads(batch.x, batch.y, batch.size)
        optimizer.step()
        if trace is not None and batch.index is not None:
            trace.record(batch.index[:batch.size], losses)
        return losses.sum(), len(losses)

    def before_epoch() -> None:
        model.train()
        if trace is not None:
            trace.next_epoch()

    try:
        with dp_compute_threads(rd.x_in.device, model):
            history = run_epochs(cfg.train.epochs, poisson(rd.x_in, rd.y_in, sample_rate, per_epoch, g, dp.padded_size),
                                 step, view=_view(cfg, g, g_aug), on_epoch=on_epoch, before_epoch=before_epoch)
    finally:
        noise.close()
    model.eval()
    accountant_history = [(sigma, sample_rate, per_epoch * cfg.train.epochs)]
    return history, dp_metrics(cfg, n, sigma, sample_rate, accountant_history, calibrated_with)


def _train_dpsgd(cfg: RunConfig, model: nn.Module, optimizer: torch.optim.Optimizer, rd: RoleData,
                 g: torch.Generator, on_epoch: EpochCallback | None,
                 g_aug: torch.Generator | None = None) -> tuple[list[float], dict]:
    from opacus import PrivacyEngine

    d = cfg.defence
    n = len(rd.y_in)
    loader = DataLoader(TensorDataset(rd.x_in, rd.y_in), batch_size=cfg.train.batch_size)
    # Opacus's Poisson rate is 1/len(loader) and its sampler runs len(loader) steps an epoch.
    sample_rate, _, sigma, calibrated_with = dp_schedule(cfg, n)
    assert abs(sample_rate - 1.0 / len(loader)) < 1e-15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns that its secure RNG is off (seeded runs)
        engine = PrivacyEngine(accountant="prv")
        dp_model, dp_optimizer, criterion, dp_loader = engine.make_private(
            module=model, optimizer=optimizer, criterion=nn.CrossEntropyLoss(), data_loader=loader,
            noise_multiplier=sigma, max_grad_norm=d.max_grad_norm, poisson_sampling=True,
            grad_sample_mode="ghost",
        )
    def step(batch: Batch, epoch: int) -> tuple[float, int]:
        dp_optimizer.zero_grad(set_to_none=True)
        loss = criterion(dp_model(batch.x), batch.y)
        loss.backward()
        dp_optimizer.step()
        return float(loss.detach()) * batch.size, batch.size

    with warnings.catch_warnings():
        # Opacus warns on every ghost-clipping backward that inputs need no gradient.
        warnings.simplefilter("ignore")
        history = run_epochs(cfg.train.epochs, from_loader(dp_loader), step, view=_view(cfg, g, g_aug),
                             on_epoch=on_epoch, before_epoch=dp_model.train)
    accountant_history = list(engine.accountant.history)
    dp_model.eval()
    metrics = dp_metrics(cfg, n, sigma, sample_rate, accountant_history, calibrated_with)
    # Opacus wraps the model; the parameters are shared, so ``model`` holds the trained weights.
    if hasattr(dp_model, "_close"):
        dp_model._close()
    return history, metrics
