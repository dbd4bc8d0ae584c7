"""Explicit, derived seeds: one root seed, a stable sub-seed for every purpose."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from privaudit.core.config import RunConfig


def derive_seed(seed: int, *tags: object) -> int:
    """A 63-bit seed derived from ``seed`` and ``tags`` by SHA-256 (stable across runs and
    platforms, unlike Python's ``hash``). E.g. ``derive_seed(0, "shadow", "train")``."""
    text = ":".join([str(seed), *map(str, tags)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


#: a model's random streams: ``train`` (initialisation and batch order), ``mask`` (MG noise),
#: ``dp-noise`` (DP's Gaussian noise), ``augment`` (the flips), ``defense`` (a defence's own draws:
#: MixUp's mixes, additive noise, its sub-models); the names are part of the seeds, kept as first written
STREAMS = ("train", "mask", "dp-noise", "augment", "defense")


def model_seed(cfg: RunConfig, stream: str) -> int:
    """The seed of ``cfg``'s model's ``stream`` (:data:`STREAMS`), the one place every engine
    takes it from, so that a model trained alone and beside others draws the same numbers: from
    the root seed and the role, and a reference model also from its index in the pool."""
    if stream not in STREAMS:
        raise ValueError(f"unknown random stream {stream!r}; expected one of {', '.join(STREAMS)}")
    member = [cfg.data.pool_index] if cfg.role == "reference" else []
    return derive_seed(cfg.seed, cfg.role, stream, *member)
