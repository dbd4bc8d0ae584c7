"""Label-only attacks: the gap attack's exact ROC point and AUC, the augmentation views against a
per-pixel reference, and the augmentation attack on an overfit digits model (beats chance and
the gap attack) and on an exchangeable split (sits at chance)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score, roc_curve

from privaudit.analysis.metrics import advantage, auc_interval, auc_score
from privaudit.attacks.label_only import (
    Augmentation,
    AugmentationSpec,
    augment_images,
    augmentation_correctness,
    augmentation_count,
    augmentation_list,
    augmentation_scores,
    gap_attack_metrics,
    gap_scores,
    infer_membership,
    label_predictor,
    reference_threshold,
)


def slow_view(x: torch.Tensor, a: Augmentation) -> torch.Tensor:
    """One view of ``x`` (N, C, H, W), pixel by pixel from the definition."""
    n, c, h, w = x.shape
    out = torch.zeros_like(x)
    for k in range(n):
        for ch in range(c):
            for i in range(h):
                for j in range(w):
                    si, sj = i - a.dy, j - a.dx
                    if 0 <= si < h and 0 <= sj < w:
                        out[k, ch, i, j] = x[k, ch, si, w - 1 - sj if a.flip else sj]
    return out


# ---------------------------------------------------------------------------- augmentations


def test_views_match_the_per_pixel_definition():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, 5, 7, generator=gen)
    views = augmentation_list(2, flip=True) + (Augmentation(6, -4), Augmentation(-7, 0, True))  # past the edge
    out = augment_images(x, views)
    assert out.shape == (len(views), 3, 2, 5, 7) and out.dtype == x.dtype
    for a, got in zip(views, out):
        assert torch.equal(got, slow_view(x, a)), a
    # the definition itself, on a few hand-checked pixels: no wrap-around, zeros come in
    right = augment_images(x, [Augmentation(1, 0)])[0]
    assert torch.equal(right[..., 1:], x[..., :-1]) and torch.all(right[..., 0] == 0)
    up = augment_images(x, [Augmentation(0, -2)])[0]
    assert torch.equal(up[..., :-2, :], x[..., 2:, :]) and torch.all(up[..., -2:, :] == 0)
    assert torch.equal(augment_images(x, [Augmentation(0, 0, True)])[0], x.flip(-1))
    assert torch.all(augment_images(x, [Augmentation(7, 0)]) == 0)


def test_view_counts_and_order():
    assert [len(augmentation_list(r)) for r in (0, 1, 2, 3)] == [1, 5, 13, 25]          # 2r(r+1) + 1
    assert [len(augmentation_list(r, shape="ring")) for r in (0, 1, 2, 3)] == [1, 5, 9, 13]  # 4r + 1
    assert len(augmentation_list(1, flip=True)) == 10 and len(augmentation_list(2, flip=True)) == 26
    for r in range(4):
        for shape in ("ball", "ring"):
            for flip in (False, True):
                views = augmentation_list(r, flip=flip, shape=shape)
                assert len(views) == augmentation_count(r, flip=flip, shape=shape) == len(set(views))
                assert AugmentationSpec(r, flip, shape).count == len(views)
                assert views[0] == Augmentation(0, 0, False)
                d = [abs(v.dx) + abs(v.dy) for v in views]
                assert all(k <= r for k in d) and (shape == "ball" or all(k in (0, r) for k in d))
    assert set(augmentation_list(1)) == {Augmentation(0, 0), Augmentation(-1, 0), Augmentation(1, 0),
                                         Augmentation(0, -1), Augmentation(0, 1)}
    assert set(augmentation_list(1)) == set(augmentation_list(1, shape="ring"))
    assert augmentation_list(2, flip=True)[13:] == tuple(Augmentation(v.dx, v.dy, True) for v in augmentation_list(2))
    with pytest.raises(ValueError):
        AugmentationSpec(-1)
    with pytest.raises(ValueError):
        AugmentationSpec(1, shape="square")


# ---------------------------------------------------------------------------- the gap attack


@pytest.mark.parametrize("seed", range(6))
def test_gap_auc_is_the_formula_and_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    membership = rng.random(n) < rng.uniform(0.2, 0.8)
    membership[:2] = [True, False]
    # members right more often than non-members, by a seed-dependent margin
    scores = (rng.random(n) < np.where(membership, rng.uniform(0.5, 1.0), rng.uniform(0.0, 0.9))).astype(float)
    m = gap_attack_metrics(membership.astype(int), scores)
    tpr, fpr = scores[membership].mean(), scores[~membership].mean()
    assert m["tpr"] == pytest.approx(tpr, abs=1e-15) and m["fpr"] == pytest.approx(fpr, abs=1e-15)
    assert m["auc"] == pytest.approx((1 + tpr - fpr) / 2, abs=1e-15)
    assert m["auc"] == pytest.approx(roc_auc_score(membership, scores), abs=1e-12)
    assert m["auc"] == pytest.approx(auc_score(membership.astype(int), scores), abs=1e-12)
    assert m["advantage"] == pytest.approx(advantage(membership.astype(int), scores), abs=1e-12)
    sk_fpr, sk_tpr, _ = roc_curve(membership, scores)  # the single point between (0, 0) and (1, 1)
    inner = [(f, t) for f, t in zip(sk_fpr, sk_tpr) if (f, t) not in ((0.0, 0.0), (1.0, 1.0))]
    assert inner in ([], [(pytest.approx(fpr), pytest.approx(tpr))])
    assert m["gap"] == pytest.approx(tpr - fpr)


def test_gap_scores_from_labels_and_from_logits():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(50, 4))
    labels = rng.integers(0, 4, size=50)
    expected = (logits.argmax(1) == labels).astype(float)
    assert 0 < expected.sum() < 50
    np.testing.assert_array_equal(gap_scores(logits, labels), expected)
    np.testing.assert_array_equal(gap_scores(torch.tensor(logits), torch.tensor(labels)), expected)
    np.testing.assert_array_equal(gap_scores(logits.argmax(1), labels), expected)
    with pytest.raises(ValueError):
        gap_attack_metrics(np.r_[1, 0], np.r_[0.5, 1.0])  # not a gap score
    with pytest.raises(ValueError):
        gap_scores(logits, labels[:-1])


# ---------------------------------------------------------------------------- the augmentation attack


def test_scores_are_fractions_and_chunking_changes_nothing():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(23, 1, 6, 6, generator=gen)
    w = torch.randn(36, 3, generator=gen)
    calls = []

    def predict(batch):
        calls.append(batch.shape[0])
        return batch.flatten(1) @ w  # scores: their argmax is the label

    labels = (x.flatten(1) @ w).argmax(1)
    spec = AugmentationSpec(1, flip=True)
    bits = augmentation_correctness(predict, x, labels, spec)
    assert bits.shape == (23, 10) and bits[:, 0].all()  # the identity view is always right here
    assert calls == [230]
    calls.clear()
    small = augmentation_correctness(predict, x, labels, spec, max_queries=35)  # chunks of 3 samples
    assert calls == [30] * 7 + [20]
    np.testing.assert_array_equal(small, bits)
    s = augmentation_scores(lambda b: predict(b).argmax(1), x, labels.numpy(), spec, max_queries=1)
    np.testing.assert_array_equal(s, bits.mean(1))
    assert 0.1 <= s.min() < s.max() <= 1.0 and np.allclose(s * 10, np.round(s * 10))
    # radius 0: the gap attack
    np.testing.assert_array_equal(augmentation_scores(predict, x, labels, AugmentationSpec(0)),
                                  gap_scores(predict(x), labels))


@pytest.fixture(scope="module")
def digits_models():
    """Two small MLPs on 8x8 digits, each trained on 40 images and their four one-pixel shifts
    (train-time augmentation, as in the paper's models) until they memorise them: the target
    and a reference (shadow) model on disjoint data."""
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 16.0
    y = torch.tensor(d.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    parts = {"t_in": order[:40], "t_out": order[40:440], "s_in": order[440:480], "s_out": order[480:880]}

    def train(idx, seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                    torch.nn.Linear(128, 10))
        views = augment_images(x[idx], AugmentationSpec(1)).reshape(-1, 1, 8, 8)
        targets = y[idx].repeat(5)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(300):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(views), targets).backward()
            opt.step()
        return model.eval()

    return x, y, parts, train(parts["t_in"], 1), train(parts["s_in"], 2)


def _attack(model, x, y, members, non_members, spec):
    predict = label_predictor(model)
    s_in = augmentation_scores(predict, x[members], y[members], spec)
    s_out = augmentation_scores(predict, x[non_members], y[non_members], spec)
    return np.r_[np.ones(len(s_in), dtype=int), np.zeros(len(s_out), dtype=int)], np.r_[s_in, s_out]


def test_augmentation_attack_beats_chance_and_the_gap_attack_on_an_overfit_model(digits_models):
    x, y, parts, target, shadow = digits_models
    with torch.no_grad():
        train_acc = (target(x[parts["t_in"]]).argmax(1) == y[parts["t_in"]]).float().mean().item()
        test_acc = (target(x[parts["t_out"]]).argmax(1) == y[parts["t_out"]]).float().mean().item()
    assert train_acc == 1.0 and 0.6 < test_acc < 0.95  # memorised, yet a real classifier

    labels, scores = _attack(target, x, y, parts["t_in"], parts["t_out"], AugmentationSpec(1))
    auc, lo, _ = auc_interval(labels, scores)
    with torch.no_grad():
        gap = gap_attack_metrics(labels, gap_scores(target(x[torch.cat([parts["t_in"], parts["t_out"]])]),
                                                    y[torch.cat([parts["t_in"], parts["t_out"]])]))
    assert gap["tpr"] == 1.0 and gap["fpr"] == pytest.approx(test_acc)
    assert auc > 0.7 and lo > 0.6, (auc, lo)
    assert auc > gap["auc"] + 0.1, (auc, gap)   # the views tell members apart among correct samples

    # the threshold rule: chosen on the shadow model's own members and non-members, applied to the target
    s_labels, s_scores = _attack(shadow, x, y, parts["s_in"], parts["s_out"], AugmentationSpec(1))
    t = reference_threshold(s_labels, s_scores)
    assert 0.0 < t <= 1.0
    decided = infer_membership(scores, t)
    tpr, fpr = decided[labels == 1].mean(), decided[labels == 0].mean()
    assert tpr - fpr > 0.3, (t, tpr, fpr)


def test_augmentation_attack_sits_at_chance_on_an_exchangeable_split(digits_models):
    """Members and non-members both drawn from the samples the model never saw, split by a
    coin: no attack can tell them apart, and this one does not pretend to."""
    x, y, parts, _, shadow = digits_models
    unseen = torch.tensor(sorted(set(range(len(y))) - set(parts["s_in"].tolist())))
    coin = np.random.default_rng(11).permutation(len(unseen)) < len(unseen) // 2
    labels, scores = _attack(shadow, x, y, unseen[torch.from_numpy(coin)], unseen[torch.from_numpy(~coin)],
                             AugmentationSpec(1))
    assert len(labels) == 1757 and scores.std() > 0.1  # informative scores, not one big tie
    auc, lo, hi = auc_interval(labels, scores, confidence=0.999)
    assert abs(auc - 0.5) < 0.05 and lo < 0.5 < hi, (auc, lo, hi)
