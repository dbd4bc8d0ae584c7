"""RelaxLoss and HAMP (privaudit.defences.relaxloss, privaudit.defences.hamp): each branch of
RelaxLoss's Algorithm 1 on hand-made logits, its flattened targets, and a short training run
that holds the members' loss near α; HAMP's soft labels at the requested entropy, its loss
with the entropy bonus, and its release (argmax and ranking kept, scores a permutation of the
fixed reference, deterministic)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from privaudit.defences import DEFENCES, get
from privaudit.defences.base import OUTPUT, TRAINING
from privaudit.defences.hamp import (
    ENTROPY_WEIGHT,
    label_entropy,
    reference_log_scores,
    soft_labels,
    true_class_probability,
)
from privaudit.defences.hooks import TrainingHooks
from privaudit.defences.relaxloss import ASCEND, DESCEND, FLATTEN, branch, flattened_targets
from privaudit.errors import ConfigError


def _grad(objective_fn, z):
    z = z.clone().requires_grad_(True)
    objective = objective_fn(z)
    (g,) = torch.autograd.grad(objective, z)
    return objective.detach(), g


# -- the registry ------------------------------------------------------------------------------

def test_registered_after_mixup_before_the_output_defences():
    names = list(DEFENCES)
    assert names.index("mixup") + 1 == names.index("relaxloss") == names.index("hamp") - 1
    assert names.index("hamp") < names.index("top-k")
    rl, hamp = get("relaxloss"), get("hamp")
    assert (rl.tag, rl.side, rl.transforms_output) == ("rl", TRAINING, False)
    # HAMP trains (one model per γ) and changes what queries see
    assert (hamp.tag, hamp.side, hamp.transforms_output) == ("hamp", TRAINING, True)
    assert hamp.side != OUTPUT
    assert rl.knob.grid == (0.3, 0.6, 1.0) and rl.knob.stronger == "higher"
    assert hamp.knob.grid == (0.5, 0.8, 0.95) and hamp.knob.stronger == "higher"
    assert rl.label(1.0) == "rl1" and hamp.label(0.8) == "hamp0.8"
    for bad in (0.0, -1.0, 10.5):
        with pytest.raises(ConfigError, match="relaxloss is its alpha"):
            rl.check_knob(bad)
    for bad in (0.0, 1.0):
        with pytest.raises(ConfigError, match="hamp is its gamma"):
            hamp.check_knob(bad)


# -- RelaxLoss: the three branches -------------------------------------------------------------

def test_relaxloss_descends_on_the_loss_above_alpha():
    hooks = get("relaxloss").hooks(1.0, 4)
    z = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]])
    y = torch.tensor([0, 2])
    ce = F.cross_entropy(z, y)
    assert float(ce) > 1.0
    for epoch in (0, 1):
        objective, g = _grad(lambda v, epoch=epoch: hooks.loss(v, y, epoch)[0], z)
        _, g_plain = _grad(lambda v: F.cross_entropy(v, y), z)
        assert float(objective) == pytest.approx(float(ce), rel=1e-6)
        torch.testing.assert_close(g, g_plain)
        assert branch(float(ce), 1.0, epoch) == DESCEND
    # L = α exactly descends too
    assert branch(1.0, 1.0, 0) == DESCEND


def test_relaxloss_ascends_below_alpha_on_even_epochs():
    hooks = get("relaxloss").hooks(1.0, 4)
    z = torch.tensor([[4.0, 0.0, 0.0, 0.0], [0.0, 4.0, 0.0, 0.0]])
    y = torch.tensor([0, 1])
    ce = F.cross_entropy(z, y)
    assert float(ce) == pytest.approx(-math.log(math.e ** 4 / (math.e ** 4 + 3)), rel=1e-5)  # 0.0535 < α
    for epoch in (0, 2, 6):
        objective, reported = hooks.loss(z, y, epoch)
        assert float(objective) == pytest.approx(-float(ce), rel=1e-6)
        assert float(reported) == pytest.approx(float(ce), rel=1e-6)   # the report is L, not −L
        _, g = _grad(lambda v, epoch=epoch: hooks.loss(v, y, epoch)[0], z)
        _, g_plain = _grad(lambda v: F.cross_entropy(v, y), z)
        torch.testing.assert_close(g, -g_plain)
        assert branch(float(ce), 1.0, epoch) == ASCEND
    # the ascent step raises the loss
    _, g = _grad(lambda v: hooks.loss(v, y, 0)[0], z)
    assert float(F.cross_entropy(z - 0.5 * g, y)) > float(ce)


def test_relaxloss_flattens_below_alpha_on_odd_epochs():
    hooks = get("relaxloss").hooks(2.0, 4)
    # row 0 correct (argmax 0 = y), row 1 misclassified (argmax 0, y = 1)
    z = torch.tensor([[3.0, 1.0, 0.0, -1.0], [2.0, 0.0, 0.0, 0.0]])
    y = torch.tensor([0, 1])
    p = torch.softmax(z.double(), 1)
    p0 = float(p[0, 0])
    ce = F.cross_entropy(z, y)
    assert float(ce) < 2.0 and branch(float(ce), 2.0, 1) == FLATTEN
    t0 = torch.tensor([p0] + [(1 - p0) / 3] * 3, dtype=torch.float64)
    t1 = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    logp = torch.log_softmax(z.double(), 1)
    expected = 0.5 * (-(t0 * logp[0]).sum() - (t1 * logp[1]).sum())
    objective, reported = hooks.loss(z, y, 1)
    assert float(objective) == pytest.approx(float(expected), rel=1e-6)
    assert float(reported) == pytest.approx(float(ce), rel=1e-6)
    # the gradient (softmax − t)/B: none on the true class of the correct row (p_y is kept),
    # the wrong classes pulled to equal shares; the misclassified row pulled to its one-hot label
    _, g = _grad(lambda v: hooks.loss(v, y, 1)[0], z)
    assert abs(float(g[0, 0])) < 1e-7
    torch.testing.assert_close(g[0].double(), (p[0] - t0) / 2, atol=1e-7, rtol=1e-5)
    torch.testing.assert_close(g[1].double(), (p[1] - t1) / 2, atol=1e-7, rtol=1e-5)
    assert float(g[0, 1]) > 0 > float(g[0, 3])   # the largest wrong score comes down, the smallest up


def test_flattened_targets_keep_p_true_and_equalise_the_rest():
    g = torch.Generator().manual_seed(0)
    z = (torch.randn(200, 7, generator=g) * 3).requires_grad_(True)
    y = torch.randint(0, 7, (200,), generator=g)
    t = flattened_targets(z, y)
    assert not t.requires_grad
    p = torch.softmax(z.detach(), 1)
    correct = z.argmax(1) == y
    assert 0 < int(correct.sum()) < 200
    torch.testing.assert_close(t.sum(1), torch.ones(200))
    rows = torch.arange(200)
    torch.testing.assert_close(t[rows[correct], y[correct]], p[rows[correct], y[correct]])
    others = t[correct].masked_fill(F.one_hot(y[correct], 7).bool(), float("nan"))
    rest = (1 - p[rows[correct], y[correct]]) / 6
    for c in range(7):
        col = others[:, c]
        keep = ~col.isnan()
        torch.testing.assert_close(col[keep], rest[keep])
    torch.testing.assert_close(t[~correct], F.one_hot(y[~correct], 7).float())


# -- RelaxLoss: a short training run --------------------------------------------------------------

def _train(hooks: TrainingHooks, epochs: int = 30, seed: int = 0) -> list[float]:
    """Adam over shuffled full passes, through the hooks as the trainer calls them; each
    epoch's mean reported loss."""
    g = torch.Generator().manual_seed(seed)
    k, d, n = 4, 20, 256
    centers = torch.randn(k, d, generator=g) * 3
    y = torch.arange(n) % k
    x = centers[y] + torch.randn(n, d, generator=g)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.ReLU(), torch.nn.Linear(64, k))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    targets = hooks.targets(x, y)
    history = []
    for epoch in range(epochs):
        perm, total = torch.randperm(n, generator=g), 0.0
        for i in range(0, n, 32):
            idx = perm[i:i + 32]
            xb, tb = hooks.view(x[idx], targets[idx])
            objective, reported = hooks.loss(model(xb), tb, epoch)
            opt.zero_grad()
            objective.backward()
            opt.step()
            hooks.after_step(model, xb, tb)
            total += float(reported) * len(idx)
        history.append(total / n)
    return history


def test_relaxloss_holds_the_training_loss_near_alpha():
    torch.set_num_threads(1)
    plain = _train(TrainingHooks())
    assert sum(plain[-4:]) / 4 < 0.02           # plain training drives the members' loss to ~0
    for alpha in (0.5, 1.0):
        history = _train(get("relaxloss").hooks(alpha, 4))
        late = sum(history[-6:]) / 6
        assert 0.7 * alpha < late < 1.2 * alpha, (alpha, history[-6:])
        assert max(history[-6:]) < 1.4 * alpha and min(history[-6:]) > 0.5 * alpha


# -- HAMP: soft labels ------------------------------------------------------------------------

@pytest.mark.parametrize("k", [2, 10, 100])
def test_true_class_probability_inverts_the_label_entropy(k):
    # closed form one way (the entropy of a given p), bisection the other
    for p in (1.0 / k + 1e-3, 0.3 if k > 2 else 0.6, 0.7, 0.95, 0.999):
        gamma = label_entropy(p, k) / math.log(k)
        assert true_class_probability(gamma, k) == pytest.approx(p, abs=1e-10)
    # at γ = 1 the entropy is flat (its maximum), so the root is known to √ε only
    assert true_class_probability(1.0, k) == pytest.approx(1.0 / k, abs=1e-7)
    assert true_class_probability(0.0, k) == pytest.approx(1.0, abs=1e-12)
    ps = [true_class_probability(g, k) for g in (0.2, 0.5, 0.8, 0.95)]
    assert all(a > b for a, b in zip(ps, ps[1:]))  # more entropy, less confidence
    assert true_class_probability(0.5, 2) == pytest.approx(0.8899721, abs=1e-6)  # H₂(p) = ½·log 2


@pytest.mark.parametrize("gamma", [0.5, 0.8, 0.95])
def test_hamp_soft_labels_reach_the_requested_entropy(gamma):
    k = 10
    y = torch.tensor([0, 3, 9, 3])
    t = get("hamp").hooks(gamma, k).targets(torch.zeros(4, 5, dtype=torch.float64), y)
    assert t.shape == (4, k) and t.dtype == torch.float64
    h = -(t * t.log()).sum(1)
    torch.testing.assert_close(h, torch.full((4,), gamma * math.log(k), dtype=torch.float64))
    torch.testing.assert_close(t.sum(1), torch.ones(4, dtype=torch.float64))
    assert torch.equal(t.argmax(1), y)
    p = true_class_probability(gamma, k)
    torch.testing.assert_close(t[torch.arange(4), y], torch.full((4,), p, dtype=torch.float64))
    off = t.masked_select(~F.one_hot(y, k).bool())
    torch.testing.assert_close(off, torch.full_like(off, (1 - p) / (k - 1)))
    torch.testing.assert_close(soft_labels(y, k, gamma), t)


def test_hamp_loss_is_soft_ce_minus_the_entropy_bonus():
    k = 10
    hooks = get("hamp").hooks(0.8, k)
    g = torch.Generator().manual_seed(3)
    z = torch.randn(16, k, generator=g) * 2
    y = torch.randint(0, k, (16,), generator=g)
    t = hooks.targets(z, y)
    objective, reported = hooks.loss(z, t, 0)
    logp = torch.log_softmax(z.double(), 1)
    ce = -(t.double() * logp).sum(1).mean()
    h = -(logp.exp() * logp).sum(1).mean()
    lam = k * ENTROPY_WEIGHT
    assert lam == pytest.approx(0.01)
    assert float(reported) == pytest.approx(float(ce), rel=1e-6)
    assert float(objective) == pytest.approx(float(ce - lam * h), rel=1e-6)
    assert float(objective) < float(reported)   # the bonus lowers the objective of an uncertain output
    # the regulariser's gradient raises the prediction's entropy
    _, g_obj = _grad(lambda v: hooks.loss(v, t, 0)[0], z)
    _, g_ce = _grad(lambda v: -(t * torch.log_softmax(v, 1)).sum(1).mean(), z)
    step = z - 50.0 * (g_obj - g_ce)
    entropy = lambda v: float(-(torch.softmax(v, 1) * torch.log_softmax(v, 1)).sum(1).mean())  # noqa: E731
    assert entropy(step) > entropy(z)


# -- HAMP: the release ------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [0.5, 0.95])
def test_hamp_release_keeps_the_ranking_and_releases_the_reference_scores(gamma):
    k = 10
    hamp = get("hamp")
    g = torch.Generator().manual_seed(5)
    z = torch.randn(64, k, generator=g, dtype=torch.float64) * 4
    out = hamp.release(z, gamma)
    assert out.shape == z.shape and out.dtype == z.dtype
    ref = torch.tensor(reference_log_scores(gamma, k), dtype=torch.float64)
    assert (ref[:-1] > ref[1:]).all()                                  # distinct, decreasing
    assert float(torch.logsumexp(ref, 0)) == pytest.approx(0.0, abs=1e-12)
    assert float(-(ref.exp() * ref).sum()) == pytest.approx(gamma * math.log(k), rel=1e-9)
    assert torch.equal(out.argmax(1), z.argmax(1))                     # the predicted label kept
    assert torch.equal(out.argsort(1, descending=True), z.argsort(1, descending=True))  # the ranking too
    for row in out:                                                    # a permutation of the reference
        torch.testing.assert_close(row.sort(descending=True).values, ref, rtol=0, atol=0)
    torch.testing.assert_close(out.exp().sum(1), torch.ones(64, dtype=torch.float64))
    # deterministic, row by row (independent of the batch), and the same for members and non-members
    torch.testing.assert_close(hamp.release(z, gamma), out, rtol=0, atol=0)
    torch.testing.assert_close(hamp.release(z[5:9], gamma), out[5:9], rtol=0, atol=0)
    # the confidence is the reference's whatever the model's: a sure and an unsure row release the same top
    sure = torch.tensor([[30.0] + [0.0] * (k - 1)], dtype=torch.float64)
    unsure = torch.tensor([[0.1] + [0.0] * (k - 1)], dtype=torch.float64)
    assert float(hamp.release(sure, gamma).max()) == float(hamp.release(unsure, gamma).max()) == float(ref[0])


def test_hamp_release_breaks_ties_like_argmax_and_depends_on_gamma():
    hamp = get("hamp")
    z = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    out = hamp.release(z, 0.8)
    assert torch.equal(out.argmax(1), z.argmax(1)) and out.argmax(1).tolist() == [1, 0]
    assert out.dtype == torch.float32
    assert float(hamp.release(z, 0.5).max()) > float(hamp.release(z, 0.95).max())  # higher γ, less confident
