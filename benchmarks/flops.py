"""Every benchmark row's FLOPs per epoch and share of the machine's fp32 matmul peak.

A row's work is the useful arithmetic of its model: a training step's FLOPs as PyTorch's
``FlopCounterMode`` counts them on the plain (non-private) model, times the samples of an
epoch; for inference, the forward pass alone. DP-SGD rows are counted with the non-private
step's FLOPs, so their share of peak says how much of the machine the private step turns
into useful training (its per-sample norms are overhead, not progress). The share is a
side's samples a second × FLOPs a sample ÷ the peak measured in the same run.
"""

from __future__ import annotations

import functools
import re

import torch

from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.models import build_model

CIFAR = (3, 32, 32)
DIGITS = (1, 8, 8)


@functools.cache
def sample_flops(model: str, shape: tuple[int, ...] = CIFAR, width: int | None = None,
                 forward_only: bool = False) -> float:
    """FLOPs a sample of one training step (:func:`benchmarks.common.train_step_flops`) or of
    the forward pass of ``model``."""
    from torch.utils.flop_counter import FlopCounterMode

    from benchmarks.common import train_step_flops

    torch.manual_seed(0)
    m = build_model(model, shape, 10, width=width or DEFAULT_WIDTHS.get(model))
    if not forward_only:
        return train_step_flops(m, shape)
    batch = 64
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        m.eval()(torch.randn(batch, *shape))
    return counter.get_total_flops() / batch


def _pool_model(recipe: str) -> tuple[str, tuple[int, ...], int | None]:
    """(model, input shape, width) of a pool benchmark's recipe label."""
    m = re.match(r"(digits|cifar) mlp(?:-(\d+))?", recipe)
    if not m:
        raise ValueError(f"unknown pool recipe {recipe!r}")
    return "mlp", DIGITS if m.group(1) == "digits" else CIFAR, int(m.group(2)) if m.group(2) else None


def annotate(rows: list[dict], peak: float) -> list[dict]:
    """Add ``flops_per_epoch`` and, for each side's rate, ``<side>_fraction_of_peak`` to the
    rows of the training, DP-SGD, precision, commands, inference and pool benchmarks (the
    speed benchmark's rows carry their own)."""
    for r in rows:
        b = r["benchmark"]
        rates: dict[str, float] = {}
        if b in ("training", "dpsgd", "precision"):
            flops, samples = sample_flops(r["model"]), r["images"]
            rates = {k[:-len("_samples_per_s")]: v for k, v in r.items() if k.endswith("_samples_per_s") and v}
        elif b == "commands":
            flops, samples = sample_flops(r["model"]), r["images"]
            if r["per_epoch_seconds"] > 0:
                rates = {"side": r["images"] / r["per_epoch_seconds"]}
        elif b == "inference":
            flops, samples = sample_flops(r["model"], forward_only=True), r["images"]
            rates = {"privaudit": r["privaudit_samples_per_s"], "plain": r["plain_samples_per_s"]}
            r["train_fraction_of_peak"] = r["train_samples_per_s"] * sample_flops(r["model"]) / 1e9 / peak
        elif b == "pool":
            model, shape, width = _pool_model(r["recipe"])
            flops, samples = sample_flops(model, shape, width), r["members_per_model"] * r["models"]
            work = samples * r["epochs"]
            rates = {"privaudit": work / r["privaudit_seconds"], "one_by_one": work / r["one_by_one_seconds"]}
        else:
            continue
        r["flops_per_epoch"] = flops * samples
        r.setdefault("peak_gflops", peak)
        for side, rate in rates.items():
            r.setdefault(f"{side}_fraction_of_peak", rate * flops / 1e9 / peak)
    return rows


def columns(r: dict, sides: tuple[str, ...]) -> list[str]:
    """The two table cells of a row: GFLOP an epoch, and each side's share of peak."""
    shares = [f"{100 * r[f'{s}_fraction_of_peak']:.0f} %" for s in sides if r.get(f"{s}_fraction_of_peak") is not None]
    if "flops_per_epoch" not in r:
        return ["—", "—"]
    return [f"{r['flops_per_epoch'] / 1e9:,.1f}", " / ".join(shares) or "—"]
