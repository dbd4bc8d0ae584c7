"""Train-time augmentation of the recipe (``--augment``), and the views attacks query.

``none`` (the default, as in the MG-noise paper's experiments): a model trains on its images
as they are, and every attack queries exactly that view. ``flip``: each training image is
mirrored left-right with probability ½, a fresh draw per sample and step (on the device,
from the run's own seeded generator); the attacks then query both views, the image and its
mirror, and average the per-view scores, as LiRA does (Carlini et al. 2022, Section VI-A).

Querying a view no model trained on (the mirror of a model trained without flips) gives an
almost uninformative score, and averaging it in understates leakage; so the views queried are
a property of the recipe, not of the dataset.
"""

from __future__ import annotations

import torch


def random_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each sample of ``x`` (N, C, H, W) mirrored left-right (last axis) with probability ½,
    independently; one draw per sample from ``generator``. Returns a new tensor."""
    flip = torch.rand(x.shape[0], generator=generator, device=x.device) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


def query_views(augment: str) -> tuple[str, ...]:
    """The views an attack queries for a recipe trained with ``augment``: the plain image, and
    its mirror when the models trained on mirrored images too."""
    return ("plain", "mirror") if augment == "flip" else ("plain",)
