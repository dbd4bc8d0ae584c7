"""Planted canaries (``--canaries mislabeled:N`` / ``ood:N``): exactly the points asked for,
the same for every model of a recipe, and the attacks' TPR on them at the population's
threshold, checked against a slow reference and against the trend that must hold (an
undefended model exposes its mislabeled members far more than its average member)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privaudit
from privaudit.analysis.empirical import canary_tpr_at_fpr, tpr_at_fpr_with_ci
from privaudit.core.config import make_config
from privaudit.data.loaders import load_digits
from privaudit.data.planted import canary_indices, plant
from privaudit.data.splits import split_parts
from privaudit.errors import ConfigError


def test_canary_tpr_is_the_population_threshold_applied_to_canary_members():
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(500, int), np.zeros(2000, int)]
    scores = rng.normal(size=2500) + labels
    canary = np.zeros(2500, bool)
    canary[rng.choice(2500, 100, replace=False)] = True
    scores[canary & (labels == 1)] += 3.0  # canaries stand out
    got = canary_tpr_at_fpr(labels, scores, canary, 0.01)
    thr = tpr_at_fpr_with_ci(labels, scores, 0.01)["threshold"]
    members = canary & (labels == 1)
    assert got["n"] == members.sum()
    assert got["tpr"] == pytest.approx(np.mean(scores[members] >= thr))
    assert got["lo"] <= got["tpr"] <= got["hi"]
    assert got["tpr"] > tpr_at_fpr_with_ci(labels, scores, 0.01)["tpr"]
    assert np.isnan(canary_tpr_at_fpr(labels, scores, np.zeros(2500, bool), 0.01)["tpr"])


def test_planted_points_are_exactly_the_asked_ones():
    images = load_digits()
    idx = canary_indices(len(images.y), 300, 3, "mislabeled:25")
    assert len(idx) == 25 and set(idx) <= set(split_parts(len(images.y), 300, 3).pool)
    planted = plant(images, 300, 3, "mislabeled:25")
    changed = np.flatnonzero(planted.y != images.y)
    assert np.array_equal(changed, idx) and np.array_equal(planted.x, images.x)
    again = plant(images, 300, 3, "mislabeled:25")
    assert np.array_equal(again.y, planted.y)  # a recipe's models agree on them
    ood = plant(images, 300, 3, "ood:10")
    moved = np.flatnonzero((ood.x != images.x).reshape(len(images.y), -1).any(1))
    assert set(moved) <= set(canary_indices(len(images.y), 300, 3, "ood:10")) and len(moved) >= 9
    assert ood.x.max() <= images.x.max()


@pytest.mark.parametrize("spec", ["mislabelled:5", "ood", "ood:0", "mislabeled:x"])
def test_bad_canary_specs_are_refused(spec):
    with pytest.raises(ConfigError, match="`canaries` takes KIND:N"):
        make_config(dataset="digits", canaries=spec)


def test_canaries_change_the_config_hash():
    plain, planted = make_config(dataset="digits"), make_config(dataset="digits", canaries="ood:5")
    assert plain.config_hash != planted.config_hash and "canaries" not in plain.hash_dict()["data"]


@pytest.mark.slow
def test_an_undefended_model_exposes_its_mislabeled_members(tmp_path):
    privaudit.audit(dataset="digits", kappas="none", sigmas="none", canaries="mislabeled:40", epochs=30,
                    part_size=200, attacks="lira", pool_size=8, workdir=tmp_path)
    t = pd.read_csv(tmp_path / "reports" / "tradeoff.csv")
    row = t[t["attack"] == "lira-online-global"].iloc[0]
    assert row["n_canaries"] >= 10 and row["canaries"] == "mislabeled:40"
    assert row["canary_tpr_at_1pct_fpr"] > row["tpr_at_1pct_fpr"] + 0.3
