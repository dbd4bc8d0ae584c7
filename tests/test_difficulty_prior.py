"""The learned difficulty prior (privaudit.attacks.difficulty_prior, docs/methods/d-attacks.md D.7):
a world whose OUT means are known, determinism, and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.attacks.difficulty_prior import DifficultyPrior


def _world(seed, n_public=2000, n_audit=500, refs=4, tau=0.7, sigma=1.0):
    """Random 8x8 images in 4 classes; a sample's OUT mean is its class's level plus
    N(0, τ²) that no image can predict; each reference's statistic adds N(0, σ²)."""
    rng = np.random.default_rng(seed)
    level = np.array([-2.0, 0.0, 1.0, 3.0])
    x = rng.integers(0, 256, (n_public + n_audit, 3, 8, 8), dtype=np.uint8)
    y = rng.integers(0, 4, n_public + n_audit)
    mu_out = level[y] + tau * rng.normal(size=y.size)
    stats = mu_out[None, :n_public, None] + sigma * rng.normal(size=(refs, n_public, 1))
    return x, y, mu_out, stats, level


@pytest.fixture(scope="module")
def fitted():
    x, y, mu_out, stats, level = _world(0)
    return DifficultyPrior(seed=1, epochs=1).fit(x[:2000], y[:2000]), x, y, stats, level


def test_the_prior_recovers_what_the_image_predicts_and_the_spread_it_does_not(fitted):
    prior, x, y, stats, level = fitted
    mean, var = prior.out_mean(stats, prior.features(x[2000:], y[2000:]))
    assert mean.shape == (500, 1) and var.shape == (1,)
    # the predictable part: the class level, to within the regression's error
    assert np.abs(mean[:, 0] - level[y[2000:]]).mean() < 0.25  # 85 features fit on 1,000 samples
    # the unpredictable part: τ² = 0.49, once the references' own noise (σ²/R = 0.25) is taken off
    assert var[0] == pytest.approx(0.49, abs=0.1)
    # with one reference that noise cannot be told apart: the whole error stays, a wider prior
    _, var1 = prior.out_mean(stats[:1], prior.features(x[2000:], y[2000:]))
    assert var1[0] == pytest.approx(0.49 + 1.0, abs=0.2)


def test_the_same_seed_gives_the_same_prior(fitted):
    prior, x, y, stats, _ = fitted
    again = DifficultyPrior(seed=1, epochs=1).fit(x[:2000], y[:2000])
    np.testing.assert_array_equal(again.regress_index_, prior.regress_index_)
    np.testing.assert_array_equal(again.features(x[2000:], y[2000:]), prior.features(x[2000:], y[2000:]))


def test_bad_input_is_refused(fitted):
    prior, x, y, stats, _ = fitted
    with pytest.raises(ValueError, match="at least"):
        DifficultyPrior().fit(x[:50], y[:50])
    with pytest.raises(ValueError, match="not fitted"):
        DifficultyPrior().features(x[:5], y[:5])
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        prior.features(x[:5, 0], y[:5])
    with pytest.raises(ValueError, match="public_stats"):
        prior.out_mean(stats[:, :100], prior.features(x[:5], y[:5]))
    with pytest.raises(ValueError, match="outside the fitted classes"):
        prior.features(x[:5], np.full(5, 7))
    with pytest.raises(ValueError, match="max_public"):
        DifficultyPrior(max_public=10)


def test_at_most_max_public_samples_are_used(fitted):
    _, x, y, _, _ = fitted
    capped = DifficultyPrior(seed=1, epochs=1, max_public=400).fit(x[:2000], y[:2000])
    assert len(capped.regress_index_) == 200 and capped.regress_index_.max() < 2000
