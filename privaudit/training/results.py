"""What a training run gives and how a trained model is queried and measured, shared by both
training engines (:mod:`privaudit.training.trainer`, one model at a time, and
:mod:`privaudit.training.stacked`, many small MLPs at once): the engine and device choice,
:class:`TrainResult`, a model's members and non-members (:class:`RoleData`), the one
inference path (:func:`predict_logits`), the evaluation, the epoch clock, and DP-SGD's
schedule and accounting."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from privaudit.analysis.accounting import calibrate_noise_multiplier, epsilon_from_history
from privaudit.core.config import RunConfig
from privaudit.core.timing import phase
from privaudit.data import ImageData, Normaliser
from privaudit.data.splits import model_members
from privaudit.errors import ConfigError
from privaudit.models.fast_linear import fast_layers
from privaudit.training.loop import EpochCallback

ENGINES = ("fast", "reference")


ENGINE_ENV = "PRIVAUDIT_ENGINE"


def resolve_engine(engine: str | None = None) -> str:
    """``engine``, else ``$PRIVAUDIT_ENGINE``, else ``fast``; unknown names are an error."""
    engine = engine or os.environ.get(ENGINE_ENV) or "fast"
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    return engine


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when available; ``cuda`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("`device` cuda was asked for but no CUDA GPU is available (use `device` cpu)")
        return torch.device("cuda")
    raise ConfigError(f"unknown device {device!r}; expected auto, cpu or cuda")


@dataclass
class TrainResult:
    """A trained model with what is needed to query it and describe it."""

    model: nn.Module
    normaliser: Normaliser
    metrics: dict
    loss_history: list[float] = field(default_factory=list)
    #: each member's training loss at each epoch, float16 (epochs, members), and the members'
    #: dataset indices (:mod:`privaudit.training.trace`); None where the engine records none
    loss_trace: np.ndarray | None = None
    trace_indices: np.ndarray | None = None


@dataclass
class RoleData:
    """Normalised members / non-members of one model, as device tensors."""

    x_in: torch.Tensor
    y_in: torch.Tensor
    x_out: torch.Tensor
    y_out: torch.Tensor
    normaliser: Normaliser
    index_in: np.ndarray | None = None  # the members' dataset indices, where known


def role_data(cfg: RunConfig, data: ImageData, device: torch.device,
              normaliser: Normaliser | None = None) -> RoleData:
    """Members and non-members of ``cfg``'s model, normalised with statistics of its own
    member part (or with ``normaliser`` when given, e.g. the one saved with a model)."""
    idx_in, idx_out = model_members(cfg, len(data.y))
    norm = normaliser or Normaliser.fit(data.x[idx_in])

    def tensor(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.from_numpy(norm(data.x[idx])).to(device),
                torch.from_numpy(data.y[idx]).to(device))

    x_in, y_in = tensor(idx_in)
    x_out, y_out = tensor(idx_out)
    return RoleData(x_in, y_in, x_out, y_out, norm, np.asarray(idx_in))


# Inference batch sizes: convolutions run fastest on small channels-last batches whose
# activations stay in cache, dense stacks on mid-sized ones (docs/performance.md).
INFERENCE_BATCH_CONV = 32


INFERENCE_BATCH_DENSE = 512


@contextlib.contextmanager
def _inference_layout(model: nn.Module, layout: torch.memory_format | None) -> Iterator[None]:
    """``model`` in ``layout`` within the block, back in the layout it had afterwards (a
    model evaluated in the middle of channels-last training stays channels-last)."""
    conv = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if layout is None or conv is None or conv.weight.is_contiguous(memory_format=layout):
        yield
        return
    model.to(memory_format=layout)
    try:
        yield
    finally:
        model.to(memory_format=torch.contiguous_format)


@torch.inference_mode()
def predict_logits(model: nn.Module, x: torch.Tensor, batch_size: int | None = None) -> torch.Tensor:
    """Logits on clean inputs in eval mode, shape (N, classes), float32 on the CPU.

    The one inference path of every forward pass outside training (evaluation, pool logits,
    attack queries, canaries): no autograd (``torch.inference_mode``), the oneDNN dense
    layers, convolutional models in the channels-last layout on the CPU, and the batch size
    that measures fastest (:data:`INFERENCE_BATCH_CONV`, :data:`INFERENCE_BATCH_DENSE`).
    The logits equal the plain NCHW forward pass's within float rounding (tested)."""
    model.eval()
    conv = any(isinstance(m, nn.Conv2d) for m in model.modules())
    bs = batch_size or (INFERENCE_BATCH_CONV if conv else INFERENCE_BATCH_DENSE)
    layout = torch.channels_last if conv and x.device.type == "cpu" and x.dim() == 4 else None
    out = []
    with phase("evaluate"), fast_layers(model), _inference_layout(model, layout):
        for i in range(0, len(x), bs):
            xb = x[i:i + bs] if layout is None else x[i:i + bs].contiguous(memory_format=layout)
            out.append(model(xb).float().cpu())
    return torch.cat(out) if out else torch.empty(0)


def _accuracy_and_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    logits = predict_logits(model, x)
    y = y.cpu()
    return (float((logits.argmax(1) == y).float().mean()),
            float(nn.functional.cross_entropy(logits, y)))


def snapshot_hook(snapshots: Mapping[int, Callable[[TrainResult], None]], on_epoch: EpochCallback | None,
                  take: Callable[[int, int, list[float]], TrainResult]) -> EpochCallback:
    """An epoch callback that hands ``snapshots[e]`` the model as it stands after epoch e <
    the run's epochs, ``take(e, epochs, losses so far)`` (each engine makes its copy), then
    calls ``on_epoch``."""
    history: list[float] = []

    def hook(epoch: int, epochs: int, loss: float) -> None:
        history.append(loss)
        if epoch in snapshots and epoch < epochs:
            snapshots[epoch](take(epoch, epochs, list(history)))
        if on_epoch:
            on_epoch(epoch, epochs, loss)

    return hook


def epoch_clock(on_epoch: EpochCallback | None) -> tuple[EpochCallback, Callable[[], None],
                                                      Callable[[], float | None], Callable[[], list[float]]]:
    """``on_epoch`` behind a clock, with three functions: ``start()`` (called once the model and
    its optimiser are built), ``fit_seconds()``, from the start to the end of the last epoch
    (None before the first), and ``epoch_seconds()``, each epoch's duration. ``train_seconds``
    also counts the data, the model's set-up, ε's accounting and the final evaluation; the
    first epoch of a process also carries oneDNN's one-off creation of its kernels
    (docs/performance.md). Epoch snapshots, when asked for, are taken inside
    the epochs and count in."""
    marks: list[float] = [time.perf_counter()]

    def start() -> None:
        marks[:] = [time.perf_counter()]

    def hook(epoch: int, epochs: int, loss: float) -> None:
        marks.append(time.perf_counter())
        if on_epoch:
            on_epoch(epoch, epochs, loss)

    def fit_seconds() -> float | None:
        return marks[-1] - marks[0] if len(marks) > 1 else None

    def epoch_seconds() -> list[float]:
        return [round(b - a, 4) for a, b in zip(marks, marks[1:])]

    return hook, start, fit_seconds, epoch_seconds


def evaluate(model: nn.Module, rd: RoleData) -> dict:
    """Accuracy and mean loss on the members (train) and non-members (test), clean inputs."""
    model.eval()
    train_acc, train_loss = _accuracy_and_loss(model, rd.x_in, rd.y_in)
    test_acc, test_loss = _accuracy_and_loss(model, rd.x_out, rd.y_out)
    return {"train_accuracy": train_acc, "test_accuracy": test_acc, "train_loss": train_loss,
            "test_loss": test_loss, "generalisation_gap": train_acc - test_acc,
            "n_train": int(len(rd.y_in)), "n_test": int(len(rd.y_out))}


def dp_schedule(cfg: RunConfig, n: int) -> tuple[float, int, float, str | None]:
    """Poisson rate q = 1/⌈n/batch⌉ (Opacus's, from the loader length), steps an epoch
    ⌈n/batch⌉, σ (given or calibrated to the target ε) and the accountant calibration used."""
    per_epoch = -(-n // cfg.train.batch_size)
    sample_rate = 1.0 / per_epoch
    d = cfg.defence
    if d.noise_multiplier is not None:
        return sample_rate, per_epoch, d.noise_multiplier, None
    assert d.target_epsilon is not None  # a validated DP config has σ or a target ε
    sigma, calibrated_with = calibrate_noise_multiplier(d.target_epsilon, d.delta, sample_rate,
                                                        per_epoch * cfg.train.epochs)
    return sample_rate, per_epoch, sigma, calibrated_with


def dp_metrics(cfg: RunConfig, n: int, sigma: float, sample_rate: float,
                history: list[tuple[float, float, int]], calibrated_with: str | None) -> dict:
    d = cfg.defence
    epsilon, accountant = epsilon_from_history(history, d.delta, calibrated_with)
    return {
        "noise_multiplier": sigma,
        "sample_rate": sample_rate,
        "steps": int(sum(h[2] for h in history)),
        "expected_batch_size": n * sample_rate,
        "epsilon": epsilon,
        "delta": d.delta,
        "accountant": accountant,
        "calibrated": d.noise_multiplier is None,
    }
