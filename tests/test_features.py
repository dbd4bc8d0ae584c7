"""Attack statistics computed once per pool equal the per-attack definitions."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.attacks.features import CHUNK, compute_features
from privaudit.attacks.lira import logit_scaled_confidence
from privaudit.attacks.pool_attacks import SHADOW_POOL_FIT_ROWS, _at_most
from privaudit.attacks.scores import softmax, top_k_posteriors


@pytest.mark.parametrize("shape", [(5, 40, 2, 10), (40, 1, 3)])
def test_features_match_definitions(shape):
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal(shape) * 4).astype(np.float32)
    n, c = shape[-3], shape[-1]
    labels = rng.integers(0, c, n)
    f = compute_features(logits, labels)
    lab = labels[:, None] if len(shape) == 3 else labels[None, :, None]
    assert np.allclose(f.phi, logit_scaled_confidence(logits, lab), rtol=1e-12, atol=1e-12)
    p = softmax(logits.reshape(-1, c)).reshape(shape)
    py = np.take_along_axis(p, np.broadcast_to(lab[..., None], shape[:-1] + (1,)), -1)[..., 0].mean(-1)
    assert np.allclose(f.p_y, py, rtol=1e-12, atol=1e-15)
    plain = logits[..., 0, :].reshape(-1, c)
    assert np.allclose(f.top3.reshape(-1, min(3, c)), top_k_posteriors(plain), rtol=1e-12, atol=1e-15)


def test_features_across_chunk_boundaries(monkeypatch):
    """Rows split over several chunks pick the label of their own sample."""
    import privaudit.attacks.features as feats

    monkeypatch.setattr(feats, "CHUNK", 7)
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 10, 1, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 10)
    small = feats.compute_features(logits, labels)
    assert np.allclose(small.phi, logit_scaled_confidence(logits, labels[None, :, None]), atol=1e-12)
    assert CHUNK > 7


def test_features_reject_bad_input():
    with pytest.raises(ValueError):
        compute_features(np.zeros((4, 1, 3)), np.array([0, 1, 2, 3]))  # label 3 of 3 classes
    with pytest.raises(ValueError):
        compute_features(np.full((2, 1, 3), np.nan), np.array([0, 1]))
    with pytest.raises(ValueError):
        compute_features(np.zeros((2, 1, 3)), np.array([0]))


def test_shadow_pool_subsample_is_seeded_and_bounded():
    rows = np.arange(SHADOW_POOL_FIT_ROWS + 10)[:, None].repeat(3, 1)
    a, b = _at_most(rows, SHADOW_POOL_FIT_ROWS), _at_most(rows, SHADOW_POOL_FIT_ROWS)
    assert len(a) == SHADOW_POOL_FIT_ROWS and np.array_equal(a, b)
    assert np.all(np.diff(a[:, 0]) > 0)  # order kept, no duplicates
    small = rows[:100]
    assert _at_most(small, SHADOW_POOL_FIT_ROWS) is small
