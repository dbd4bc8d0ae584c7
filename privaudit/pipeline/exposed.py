"""Who leaks: the members of one target that its per-sample LiRA attack exposes most.

At attack time (the pool branch of :func:`privaudit.pipeline.attacking.attack_target`) the
target's member scores of one attack are ranked, highest first (ties by the member's
position, NaN last):

* the attack: ``lira-online`` when it ran, else ``lira-offline``, else the strongest pool
  attack (:func:`exposure_attack`); its name is saved with the result;
* the :data:`TOP_IMAGES` most exposed members: their images as the model saw them (raw
  uint8, N × C × H × W, planted canaries included), dataset indices, classes and scores,
  saved as ``exposed.npz`` in the attack folder (:func:`npz_bytes`, read back by
  :func:`read_exposed`; covered by the folder's manifest);
* the dataset indices of the top :data:`TOP_SHARE` of members (at least one), most exposed
  first, with a digest of the member set: two targets' sets are comparable (Jaccard index,
  the report's "Who leaks" section) only when their digests agree, i.e. the same members.

The indices, classes and scores go to ``exposure.json`` beside the older keys
(:meth:`Exposed.summary`).
"""

from __future__ import annotations

import hashlib
import math
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TOP_IMAGES = 16
TOP_SHARE = 0.01
#: the per-sample LiRA attacks, in the order of preference
LIRA_ATTACKS = ("lira-online", "lira-offline")
FILE = "exposed.npz"
#: the arrays of ``exposed.npz``
KEYS = ("images", "indices", "classes", "scores", "pixel_max")


def exposure_attack(scores: Mapping[str, np.ndarray], strongest: str | None) -> str | None:
    """The attack whose scores rank the members: ``lira-online``, else ``lira-offline``, else
    ``strongest`` (the strongest pool attack), else the first of ``scores``; None without any."""
    for name in (*LIRA_ATTACKS, strongest):
        if name is not None and name in scores:
            return name
    return next(iter(scores), None)


def top_order(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest ``scores``, highest first; ties go to the earlier
    position, NaN ranks last."""
    s = np.asarray(scores, dtype=float)
    key = np.where(np.isnan(s), -np.inf, s)
    return np.argsort(-key, kind="stable")[:max(int(k), 0)]


def top_count(n: int, share: float = TOP_SHARE) -> int:
    """How many of ``n`` members make the top ``share``: ⌊share · n⌋, at least 1 (0 when n = 0)."""
    return 0 if n <= 0 else max(1, int(math.floor(n * share + 1e-9)))


def members_digest(indices: np.ndarray) -> str:
    """A short digest of a member set (its sorted dataset indices): equal digests, same members."""
    ids = np.sort(np.asarray(indices, dtype=np.int64).ravel()).astype("<i8")
    return hashlib.sha256(ids.tobytes()).hexdigest()[:16]


@dataclass(frozen=True)
class Exposed:
    """One target's most exposed members (module docstring)."""

    attack: str
    indices: np.ndarray      # (k,) dataset indices of the top members, most exposed first
    classes: np.ndarray      # (k,)
    scores: np.ndarray       # (k,) float64
    images: np.ndarray       # (k, C, H, W) uint8, raw pixel values
    pixel_max: int           # the dataset's largest raw pixel value (16 for digits, 255 for CIFAR)
    top_percent: np.ndarray  # dataset indices of the top TOP_SHARE of members, most exposed first
    n_members: int
    members: str             # members_digest of the member set

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays of ``exposed.npz``."""
        return {"images": self.images, "indices": self.indices, "classes": self.classes,
                "scores": self.scores, "pixel_max": np.asarray(self.pixel_max, dtype=np.int64)}

    def summary(self) -> dict:
        """The keys added to ``exposure.json``."""
        return {"lira_attack": self.attack,
                "top16": [{"index": int(i), "class": int(c), "score": float(s)}
                          for i, c, s in zip(self.indices, self.classes, self.scores)],
                "top_percent": TOP_SHARE, "top_percent_indices": [int(i) for i in self.top_percent],
                "n_members": self.n_members, "members": self.members}


def most_exposed(scores: Mapping[str, np.ndarray], strongest: str | None, labels01: np.ndarray,
                 sample_ids: np.ndarray, x: np.ndarray, y: np.ndarray, k: int = TOP_IMAGES,
                 share: float = TOP_SHARE) -> Exposed | None:
    """The most exposed members of a target. ``scores``: attack → score per sample (members
    and non-members, as ``labels01`` marks them, 1 = member); ``sample_ids``: their dataset
    indices; ``x``, ``y``: the dataset's raw images (uint8, N × C × H × W) and labels;
    ``strongest``: the strongest pool attack (:func:`exposure_attack`). None without scores
    or members."""
    attack = exposure_attack(scores, strongest)
    members = np.flatnonzero(np.asarray(labels01) == 1)
    if attack is None or not len(members):
        return None
    ids = np.asarray(sample_ids, dtype=np.int64)[members]
    s = np.asarray(scores[attack], dtype=float)[members]
    top = top_order(s, k)
    chosen = ids[top]
    return Exposed(attack=attack, indices=chosen, classes=np.asarray(y)[chosen].astype(np.int64), scores=s[top],
                   images=np.ascontiguousarray(np.asarray(x)[chosen], dtype=np.uint8),
                   pixel_max=int(np.asarray(x).max()) if np.asarray(x).size else 255,
                   top_percent=ids[top_order(s, top_count(len(ids), share))], n_members=len(ids),
                   members=members_digest(ids))


def read_exposed(folder: Path) -> dict[str, np.ndarray]:
    """The arrays of ``folder/exposed.npz`` (no pickles), or {} when it is missing, unreadable
    or not shaped as :meth:`Exposed.arrays` writes it. The caller verifies the folder's
    manifest first."""
    path = Path(folder) / FILE
    if not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            out = {k: npz[k] for k in KEYS}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return {}
    k = len(out["indices"])
    ok = (out["images"].dtype == np.uint8 and out["images"].ndim == 4 and len(out["images"]) == k
          and out["classes"].shape == (k,) and out["scores"].shape == (k,) and out["pixel_max"].shape == ()
          and out["indices"].ndim == 1)
    return out if ok else {}


__all__ = ["Exposed", "FILE", "LIRA_ATTACKS", "TOP_IMAGES", "TOP_SHARE", "exposure_attack", "members_digest",
           "most_exposed", "read_exposed", "top_count", "top_order"]
