"""The membership array of reference models, keep[model, sample] (True where the model trained
on the sample), checked once for every attack that reads one."""

from __future__ import annotations

import numpy as np


def membership_mask(keep: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``keep`` as a boolean array of ``shape``, from booleans or 0/1 numbers; a ValueError
    naming ``name`` for another shape or other values."""
    mask = np.asarray(keep)
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {mask.shape}")
    if mask.dtype != bool:
        if not np.all((mask == 0) | (mask == 1)):
            raise ValueError(f"{name} must be boolean (or 0/1)")
        mask = mask.astype(bool)
    return mask
