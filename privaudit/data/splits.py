"""The ML-Leaks four-way split and the per-model normalisation (docs/methods/a-mg-noise.md A.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privaudit.errors import ConfigError

if TYPE_CHECKING:
    from privaudit.core.config import RunConfig

PARTS = ("target_in", "target_out", "shadow_in", "shadow_out")


@dataclass(frozen=True)
class Split:
    """Indices into the pooled dataset of the four disjoint, equal parts."""

    target_in: np.ndarray
    target_out: np.ndarray
    shadow_in: np.ndarray
    shadow_out: np.ndarray

    @property
    def pool(self) -> np.ndarray:
        """The reference pool's samples: the target's members then its non-members."""
        return np.concatenate([self.target_in, self.target_out])

    @property
    def population(self) -> np.ndarray:
        """Samples no target, pool or canary model trains on (the shadow parts): RMIA's z."""
        return np.concatenate([self.shadow_in, self.shadow_out])

    def for_role(self, role: str) -> tuple[np.ndarray, np.ndarray]:
        """(members, non-members) of a target or a shadow model."""
        if role == "target":
            return self.target_in, self.target_out
        if role == "shadow":
            return self.shadow_in, self.shadow_out
        raise ValueError(f"unknown role {role!r}")


def member_indices(role: str, split: Split, *, pool_size: int = 0, pool_index: int = 0,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(members, non-members) of any model, as indices into the pooled dataset.

    target / shadow: the ML-Leaks parts. reference: the halves of the pool given by
    :func:`pool_keep`. canary: the target's members plus each target non-member ("canary")
    with probability 1/2 (:func:`canary_inclusion`); its non-members are the excluded canaries.
    """
    if role in ("target", "shadow"):
        return split.for_role(role)
    if role == "reference":
        keep = pool_keep(pool_size, len(split.pool), pool_seed(seed, pool_size))[pool_index]
        return split.pool[keep], split.pool[~keep]
    if role == "canary":
        b = canary_inclusion(len(split.target_out), canary_seed(seed))
        return np.concatenate([split.target_in, split.target_out[b]]), split.target_out[~b]
    raise ValueError(f"unknown role {role!r}")


def pool_seed(seed: int, pool_size: int) -> int:
    """Seed of a pool's membership array, derived from the data seed and the pool size."""
    from privaudit.core.seeding import derive_seed

    return derive_seed(seed, "pool", pool_size)


def canary_seed(seed: int) -> int:
    from privaudit.core.seeding import derive_seed

    return derive_seed(seed, "canaries")


def split_parts(n: int, part_size: int, seed: int) -> Split:
    """Shuffle ``range(n)`` with ``seed`` and cut four disjoint parts of ``part_size``.

    The permutation comes from ``numpy.random.default_rng(seed)``, so a split depends on
    (n, part_size, seed) only; target and shadow models of one audit share it.
    """
    if 4 * part_size > n:
        raise ConfigError(f"`part_size` {part_size} is too large: four parts need {4 * part_size} "
                          f"samples and the dataset has {n} (at most {n // 4})")
    perm = np.random.default_rng(seed).permutation(n)
    cuts = [perm[i * part_size:(i + 1) * part_size] for i in range(4)]
    return Split(*cuts)


def pool_keep(num_models: int, num_samples: int, seed: int) -> np.ndarray:
    """Membership of a reference pool: ``keep[model, sample]``, bool, shape (M, n).

    Models come in complementary pairs: model 2j trains on a random half of the pool
    samples and model 2j+1 on the other half. Hence every sample is IN for exactly M/2
    models and every model trains on ⌊n/2⌋ or ⌈n/2⌉ samples (the target's part size when
    the pool is the target's members and non-members). LiRA's reference code draws each
    sample's IN set independently, which balances samples but not model sizes; the pairs
    give both. Reproducible from ``seed``.
    """
    if num_models < 2 or num_models % 2:
        raise ConfigError(f"a pool needs an even number of models >= 2 (got {num_models})")
    rng = np.random.default_rng(seed)
    keep = np.zeros((num_models, num_samples), dtype=bool)
    for pair in range(num_models // 2):
        first = rng.permutation(num_samples)[: num_samples // 2]
        keep[2 * pair, first] = True
        keep[2 * pair + 1] = ~keep[2 * pair]
    return keep


def canary_inclusion(num_canaries: int, seed: int) -> np.ndarray:
    """Independent fair coins: which canaries the one-run audit's model trains on, bool (m,)."""
    return np.random.default_rng(seed).random(num_canaries) < 0.5


@dataclass(frozen=True)
class Normaliser:
    """Per-coordinate standardisation x -> (x - mean) / max(std, 1) on raw values.

    This is the authors' choice (docs/methods/a-mg-noise.md A.3): statistics from the model's own training
    part, per pixel and channel, with the std floored at 1 raw unit so that near-constant
    pixels (e.g. the digits' blank borders) are not blown up. Shapes: mean and std are
    (C, H, W), float32.
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x_raw: np.ndarray) -> Normaliser:
        x = x_raw.astype(np.float64)
        return cls(x.mean(axis=0).astype(np.float32), np.maximum(x.std(axis=0), 1.0).astype(np.float32))

    def __call__(self, x_raw: np.ndarray) -> np.ndarray:
        x = x_raw.astype(np.float32)  # one float32 copy, normalised in place
        x -= self.mean
        x /= self.std
        return x


def model_members(cfg: RunConfig, n: int, split: Split | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(members, non-members) of ``cfg``'s model among the ``n`` pooled samples: the one place
    that chooses them for every engine and attack (``split``: ``cfg``'s split when already cut)."""
    split = split if split is not None else split_parts(n, cfg.data.part_size, cfg.data.seed)
    return member_indices(cfg.role, split, pool_size=cfg.data.pool_size, pool_index=cfg.data.pool_index,
                          seed=cfg.data.seed)
