"""The ML-Leaks four-way split and the per-model normalisation (papers.md A.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.errors import ConfigError

PARTS = ("target_in", "target_out", "shadow_in", "shadow_out")


@dataclass(frozen=True)
class Split:
    """Indices into the pooled dataset of the four disjoint, equal parts."""

    target_in: np.ndarray
    target_out: np.ndarray
    shadow_in: np.ndarray
    shadow_out: np.ndarray

    def for_role(self, role: str) -> tuple[np.ndarray, np.ndarray]:
        """(members, non-members) of a target or a shadow model."""
        if role == "target":
            return self.target_in, self.target_out
        if role == "shadow":
            return self.shadow_in, self.shadow_out
        raise ValueError(f"unknown role {role!r}")


def split_parts(n: int, part_size: int, seed: int) -> Split:
    """Shuffle ``range(n)`` with ``seed`` and cut four disjoint parts of ``part_size``.

    The permutation comes from ``numpy.random.default_rng(seed)``, so a split depends on
    (n, part_size, seed) only; target and shadow models of one audit share it.
    """
    if 4 * part_size > n:
        raise ConfigError(f"--part-size {part_size} is too large: four parts need {4 * part_size} "
                          f"samples and the dataset has {n} (at most {n // 4})")
    perm = np.random.default_rng(seed).permutation(n)
    cuts = [perm[i * part_size:(i + 1) * part_size] for i in range(4)]
    return Split(*cuts)


@dataclass(frozen=True)
class Normaliser:
    """Per-coordinate standardisation x -> (x - mean) / max(std, 1) on raw values.

    This is the authors' choice (papers.md A.3): statistics from the model's own training
    part, per pixel and channel, with the std floored at 1 raw unit so that near-constant
    pixels (e.g. the digits' blank borders) are not blown up. Shapes: mean and std are
    (C, H, W), float32.
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x_raw: np.ndarray) -> "Normaliser":
        x = x_raw.astype(np.float64)
        return cls(x.mean(axis=0).astype(np.float32), np.maximum(x.std(axis=0), 1.0).astype(np.float32))

    def __call__(self, x_raw: np.ndarray) -> np.ndarray:
        return ((x_raw.astype(np.float32) - self.mean) / self.std).astype(np.float32)
