"""Train-time augmentation (``--augment``) and the views the attacks query.

A model is attacked through exactly the views it trained on: without augmentation the plain
image only (querying a mirror no model saw would average an uninformative score in and
understate leakage), with ``--augment flip`` the image and its mirror.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.core.config import make_config
from privaudit.core.seeding import generator
from privaudit.data import ImageData
from privaudit.errors import ConfigError
from privaudit.pipeline.pools import augmentations, pool_name
from privaudit.training import loop, trainer
from privaudit.training.augment import random_flip


def _cifar_like(n: int = 400, seed: int = 0) -> ImageData:
    """CIFAR-shaped uint8 images whose left half is bright for classes 0-4 and dark for 5-9
    (a left-right asymmetric signal, so that mirrored training is visible in the weights)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    x = rng.integers(0, 100, (n, 3, 32, 32), dtype=np.uint8)
    x[:, :, :, :16] += np.where(y < 5, 120, 0).astype(np.uint8)[:, None, None, None]
    return ImageData("cifar10", x, y.astype(np.int64), 10)


def test_random_flip_mirrors_about_half_of_the_samples_each_draw():
    x = torch.arange(2000 * 3 * 2 * 4, dtype=torch.float32).reshape(2000, 3, 2, 4)
    g = generator(7)
    first = random_flip(x, g)
    flipped = torch.tensor([torch.equal(a, b.flip(-1)) for a, b in zip(first, x)])
    kept = torch.tensor([torch.equal(a, b) for a, b in zip(first, x)])
    assert bool((flipped ^ kept).all())                   # each sample: exactly one of the two views
    assert abs(flipped.float().mean().item() - 0.5) < 4 * (0.25 / 2000) ** 0.5
    second = random_flip(x, g)                            # a fresh draw per step
    assert not torch.equal(first, second)
    assert torch.equal(random_flip(x, generator(7)), first)   # seeded


def test_queries_follow_the_recipe_not_the_dataset():
    plain = make_config(model="mlp", dataset="cifar10")
    flip = make_config(model="mlp", dataset="cifar10", augment="flip")
    assert augmentations(plain) == ("plain",)
    assert augmentations(flip) == ("plain", "mirror")
    assert augmentations(make_config(dataset="digits")) == ("plain",)
    assert pool_name(plain, 8) != pool_name(flip, 8)


def test_augment_none_keeps_every_earlier_config_hash_and_flip_changes_it():
    plain = make_config(model="mlp", dataset="cifar10")
    assert "augment" not in plain.hash_dict()["train"]
    assert make_config(model="mlp", dataset="cifar10", augment="flip").config_hash != plain.config_hash


@pytest.mark.parametrize("kw, needle", [(dict(dataset="digits"), "mirror-symmetric"),
                                        (dict(dataset="cifar10", model="convex-relu"), "convex-relu"),
                                        (dict(dataset="cifar10", augment="rotate"), "`augment`")])
def test_augment_is_refused_where_it_makes_no_sense(kw, needle):
    kw = {"augment": "flip", **kw}
    with pytest.raises(ConfigError, match=needle):
        make_config(**kw)


@pytest.mark.parametrize("model, dp", [("mlp", False), ("mlp", True), ("cnn", True)])  # plain, DP engine, Opacus
def test_training_sees_mirrored_batches_only_with_flip(monkeypatch, model, dp):
    """A spy on the batches each step trains on: with flip, about half of each batch is the
    mirror of a member image; without, none is; the model differs."""
    data = _cifar_like()
    seen = []
    real = loop.training_view

    def spy(x, kappa, g, g_aug=None):
        out = real(x, kappa, g, g_aug)
        seen.append((x.clone(), out.clone()))
        return out

    monkeypatch.setattr(trainer, "training_view", spy)  # where the one loop's view takes it from
    results = {}
    for augment in ("none", "flip"):
        seen.clear()
        cfg = make_config(model=model, dataset="cifar10", width=16, part_size=80, epochs=2, batch_size=40,
                          augment=augment, dp=dp, noise_multiplier=1.0 if dp else None)
        results[augment] = trainer.train_model(cfg, data, "cpu")
        rows = [(torch.equal(o, i.flip(-1)) and not torch.equal(o, i)) for x, out in seen for i, o in zip(x, out)]
        fraction = float(np.mean(rows))
        if augment == "none":
            assert fraction == 0.0
        else:
            assert 0.3 < fraction < 0.7, fraction
    a, b = (dict(r.model.named_parameters()) for r in results.values())
    assert any(not torch.equal(a[k], b[k]) for k in a)
