"""A model's random streams and its members, each chosen in one place."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.core.config import make_config
from privaudit.core.seeding import STREAMS, derive_seed, model_seed
from privaudit.data.splits import member_indices, model_members, split_parts


def test_each_stream_of_a_model_is_its_own_and_a_pool_model_keys_on_its_index():
    target = make_config(seed=3)
    seeds = {s: model_seed(target, s) for s in STREAMS}
    assert len(set(seeds.values())) == len(STREAMS)
    assert seeds["train"] == derive_seed(3, "target", "train")  # the seeds models were trained with
    refs = [target.as_reference(4, i) for i in range(4)]
    assert model_seed(refs[2], "mask") == derive_seed(3, "reference", "mask", 2)
    assert len({model_seed(r, "train") for r in refs}) == 4
    assert model_seed(target.as_shadow(), "train") != seeds["train"]
    with pytest.raises(ValueError, match="unknown random stream"):
        model_seed(target, "dropout")


@pytest.mark.parametrize("role", ["target", "shadow", "reference", "canary"])
def test_a_models_members_are_the_split_s(role):
    base = make_config(part_size=50, seed=7)
    cfg = base.as_reference(4, 1) if role == "reference" else base.as_canary() if role == "canary" else \
        base.as_shadow() if role == "shadow" else base
    split = split_parts(1797, 50, cfg.data.seed)
    want = member_indices(cfg.role, split, pool_size=cfg.data.pool_size, pool_index=cfg.data.pool_index,
                          seed=cfg.data.seed)
    for got in (model_members(cfg, 1797), model_members(cfg, 1797, split)):
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
