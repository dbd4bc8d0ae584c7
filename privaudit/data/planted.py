"""Planted canaries: the worst case beside the average (``--canaries mislabeled:N`` or
``ood:N``).

An attack's average TPR hides the points a defence fails to protect; evaluations of empirical
defences that report only the population average overstate them (Aerni, Zhang, Tramèr,
*Evaluations of Machine Learning Privacy Defenses are Misleading*, CCS 2024, arXiv
2404.17399). Following them, N marked points are planted in the data every model of a recipe
sees, the target and its reference pool alike:

* ``mislabeled:N``: N samples of the pool (the target's members and non-members) get a
  wrong label, a uniformly drawn other class;
* ``ood:N``: N samples of the pool become out-of-distribution images, every pixel uniform
  over the dataset's raw range, with a uniformly drawn label.

The target trains on the canaries among its members, not on those among its non-members;
each reference model trains on half of them (the pool's halves), so LiRA and RMIA calibrate
on canaries as on any sample. The attacks then report, beside the population's TPR at low
FPR, the TPR on the canary members at the population's threshold
(:func:`privaudit.analysis.empirical.canary_tpr_at_fpr`). The canaries are drawn from the data
seed, so a recipe's models agree on them; the spec is part of the config (its hash).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from privaudit.core.config import CANARY_KINDS as KINDS
from privaudit.core.config import parse_canaries as parse
from privaudit.data.images import ImageData
from privaudit.data.splits import split_parts
from privaudit.errors import ConfigError

__all__ = ["KINDS", "parse", "canary_indices", "plant"]


def canary_indices(n_samples: int, part_size: int, seed: int, spec: str) -> np.ndarray:
    """The planted samples' indices into the dataset: N of the pool (the target's two parts),
    drawn from the data seed (sorted)."""
    from privaudit.core.seeding import derive_seed

    _, n = parse(spec)
    pool = split_parts(n_samples, part_size, seed).pool
    if n > len(pool) // 2:
        raise ConfigError(f"`canaries` {spec}: at most {len(pool) // 2} canaries (half the target's "
                          f"{len(pool)} members and non-members)")
    rng = np.random.default_rng(derive_seed(seed, "planted", spec))
    return np.sort(rng.choice(pool, size=n, replace=False))


def plant(images: ImageData, part_size: int, seed: int, spec: str) -> ImageData:
    """A copy of ``images`` with the canaries of ``spec`` planted (module docstring)."""
    from privaudit.core.seeding import derive_seed

    kind, _ = parse(spec)
    idx = canary_indices(len(images.y), part_size, seed, spec)
    rng = np.random.default_rng(derive_seed(seed, "planted-values", spec))
    y = images.y.copy()
    k = images.num_classes
    x = images.x
    if kind == "mislabeled":
        y[idx] = (y[idx] + rng.integers(1, k, size=len(idx))) % k
    else:
        x = x.copy()
        top = int(images.x.max())
        x[idx] = rng.integers(0, top + 1, size=(len(idx), *images.x.shape[1:]), dtype=np.int64).astype(x.dtype)
        y[idx] = rng.integers(0, k, size=len(idx))
    return replace(images, x=x, y=y)
