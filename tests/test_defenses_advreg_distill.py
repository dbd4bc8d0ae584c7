"""Adversarial regularisation and distillation from disjoint teachers
(privaudit.defences.advreg, privaudit.defences.distillation), on fake training contexts with
small random tensors and a tiny model: AdvReg's inference model trains in turn with the
classifier (its steps change h and nothing else), learns to tell memorised members from
reference samples when the classifier is frozen, and the classifier's objective is CE + λ·mean
log h, whose gradient makes members look like reference samples; distillation's teachers get
disjoint parts covering the members, each soft label is the tempered softmax average of the
teachers that never saw the member (checked against a per-sample loop, and by changing a
member's own teacher), rows sum to 1 and a higher T gives higher-entropy labels. Both train
end to end through :func:`privaudit.training.trainer.train_model`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privaudit.defences import DEFENCES, TrainingContext, get
from privaudit.defences.advreg import INFERENCE_STEPS
from privaudit.defences.base import TRAINING
from privaudit.defences.distillation import TEACHERS, teacher_labels
from privaudit.defences.hooks import cross_entropy
from privaudit.errors import ConfigError

D, K = 12, 5  # input features, classes


def _tiny(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D, 48), nn.ReLU(), nn.Linear(48, K))


def _data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, D, generator=g), torch.randint(0, K, (n,), generator=g)


def _ctx(model, x, y, seed=0, reference=None, train_submodel=None):
    return TrainingContext(model=model, x=x, y=y, num_classes=K, generator=torch.Generator().manual_seed(seed),
                           rng=np.random.default_rng(seed), epochs=1, reference=reference,
                           train_submodel=train_submodel)


def _params(module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _same(a, b) -> bool:
    return all(torch.equal(u, v) for u, v in zip(a, b))


def _memorised(n_members=40, n_reference=200, steps=300):
    """A tiny classifier that has memorised random labels of its members (what membership
    inference feeds on), and fresh reference samples of the same distribution."""
    xm, ym = _data(n_members, 1)
    xr, yr = _data(n_reference, 2)
    model = _tiny(3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(xm), ym).backward()
        opt.step()
    assert (model(xm).argmax(1) == ym).float().mean() == 1.0
    return model, (xm, ym), (xr, yr)


# -- the registry ------------------------------------------------------------------------------

def test_registered_after_hamp_before_the_output_defences():
    names = list(DEFENCES)
    assert names.index("mixup") < names.index("advreg")
    assert names.index("advreg") + 1 == names.index("distillation") < names.index("top-k")
    if "hamp" in names:
        assert names.index("hamp") < names.index("advreg")
    ar, kd = get("advreg"), get("distillation")
    assert (ar.tag, ar.side, ar.transforms_output, ar.needs_reference, ar.needs_submodels) == \
        ("ar", TRAINING, False, True, False)
    assert (kd.tag, kd.side, kd.transforms_output, kd.needs_reference, kd.needs_submodels) == \
        ("kd", TRAINING, False, False, True)
    assert ar.knob.grid == (0.5, 1.0, 3.0) and ar.knob.stronger == "higher"
    assert kd.knob.grid == (1.0, 4.0, 10.0) and kd.knob.stronger == "higher"
    assert ar.label(3.0) == "ar3" and kd.label(4.0) == "kd4" and ar.setting(1.0).endswith("λ=1")
    for bad in (0.0, -1.0, 100.5):
        with pytest.raises(ConfigError, match="advreg is its lambda"):
            ar.check_knob(bad)
        with pytest.raises(ConfigError, match="distillation is its temperature"):
            kd.check_knob(bad)


# -- adversarial regularisation ------------------------------------------------------------------

def test_advreg_setup_needs_a_reference_and_leaves_torch_rng_alone():
    x, y = _data(20, 0)
    with pytest.raises(ConfigError, match="reference set"):
        get("advreg").hooks(1.0, K).setup(_ctx(_tiny(0), x, y))
    state = torch.random.get_rng_state()
    a, b = get("advreg").hooks(1.0, K), get("advreg").hooks(1.0, K)
    a.setup(_ctx(_tiny(0), x, y, seed=5, reference=_data(30, 9)))
    b.setup(_ctx(_tiny(0), x, y, seed=5, reference=_data(30, 9)))
    assert torch.equal(torch.random.get_rng_state(), state)  # h drawn in a fork of torch's RNG
    assert _same(_params(a.h), _params(b.h))                 # and from the defence's seed
    c = get("advreg").hooks(1.0, K)
    c.setup(_ctx(_tiny(0), x, y, seed=6, reference=_data(30, 9)))
    assert not _same(_params(a.h), _params(c.h))


def test_advreg_loss_is_ce_plus_lambda_mean_log_h_and_reports_ce():
    model, (xm, ym), ref = _memorised()
    for lam in (1e-9, 0.5, 3.0):
        hooks = get("advreg").hooks(lam, K)
        hooks.setup(_ctx(model, xm, ym, reference=ref))
        h0 = _params(hooks.h)
        logits = model(xm[:16])
        objective, reported = hooks.loss(logits, ym[:16], 0)
        # the first loss ran Algorithm 1's k inference steps before the first classifier step
        assert not _same(h0, _params(hooks.h)) and hooks.batch_size == 16
        ce = F.cross_entropy(logits, ym[:16])
        with torch.no_grad():
            a = hooks.h(torch.softmax(logits, 1), F.one_hot(ym[:16], K).float())
            expected = ce + lam * torch.log(torch.sigmoid(a)).mean()
        assert float(objective.detach()) == pytest.approx(float(expected), rel=1e-5, abs=1e-6)
        assert float(reported) == pytest.approx(float(ce.detach()), rel=1e-6)
        assert not reported.requires_grad and objective.requires_grad
        if lam < 1e-6:
            assert float(objective.detach()) == pytest.approx(float(ce.detach()), abs=1e-6)
        else:
            assert float(objective.detach()) < float(ce.detach())  # log h < 0: the term is a real, negative, number
        # the classifier's backward gives h no gradient (h is fixed in the classifier's step)
        grads = [None if p.grad is None else p.grad.clone() for p in hooks.h.parameters()]
        objective.backward()
        assert all((g is None and p.grad is None) or torch.equal(g, p.grad)
                   for g, p in zip(grads, hooks.h.parameters()))
        assert all(p.grad is not None for p in model.parameters())
        model.zero_grad()


def test_advreg_inference_model_steps_after_each_classifier_step_and_touches_only_h():
    model, (xm, ym), ref = _memorised()
    hooks = get("advreg").hooks(1.0, K)
    hooks.setup(_ctx(model, xm, ym, reference=ref))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for _step in range(3):
        objective, _ = hooks.loss(model(xm[:8]), ym[:8], 0)
        opt.zero_grad()
        objective.backward()
        opt.step()
        h_before, f_before = _params(hooks.h), _params(model)
        hooks.after_step(model, xm[:8], ym[:8])
        assert not _same(h_before, _params(hooks.h))  # h moved
        assert _same(f_before, _params(model))         # the classifier did not
        assert model.training                          # and is back in train mode
        assert math.isfinite(hooks.last_gain) and hooks.last_gain < 0
    # k steps before the first classifier step, then k after each of the 3
    assert hooks.optimizer.state[next(hooks.h.parameters())]["step"] == INFERENCE_STEPS * 4


def test_advreg_inference_model_learns_membership_against_a_frozen_classifier():
    model, (xm, ym), (xr, yr) = _memorised()
    hooks = get("advreg").hooks(1.0, K)
    hooks.setup(_ctx(model, xm, ym, reference=(xr, yr)))
    hooks.batch_size = 32
    f_before = _params(model)
    before = hooks.membership_accuracy(model, xm, ym, xr, yr)
    for _ in range(150):
        hooks.after_step(model, xm[:32], ym[:32])
    after = hooks.membership_accuracy(model, xm, ym, xr, yr)
    assert _same(f_before, _params(model))
    assert before < 0.65 and after > 0.85, (before, after)


def test_advreg_gradient_makes_members_look_like_reference_samples():
    model, (xm, ym), (xr, yr) = _memorised()
    hooks = get("advreg").hooks(3.0, K)
    hooks.setup(_ctx(model, xm, ym, reference=(xr, yr)))
    hooks.batch_size = 32
    for _ in range(150):
        hooks.after_step(model, xm[:32], ym[:32])
    with torch.no_grad():
        z = model(xm)
    # the λ-term alone (objective minus CE), as the classifier descends it, on the members' logits
    zz = z.clone().requires_grad_(True)
    objective, reported = hooks.loss(zz, ym, 0)
    (g,) = torch.autograd.grad(objective - F.cross_entropy(zz, ym), zz)

    def belief(logits):
        with torch.no_grad():
            return float(torch.sigmoid(hooks.inference_logits(torch.softmax(logits, 1), ym)).mean())

    start = belief(z)
    assert start > 0.6                              # h calls the members members
    assert belief(z - 5.0 * g / g.norm()) < start   # descending the λ-term lowers h's belief
    assert belief(z + 5.0 * g / g.norm()) > start
    # the members' reference-like direction: lower confidence on their own label
    p = torch.softmax(z, 1).gather(1, ym[:, None])
    p_step = torch.softmax(z - 5.0 * g / g.norm(), 1).gather(1, ym[:, None])
    assert float(p_step.mean()) < float(p.mean())


# -- distillation -----------------------------------------------------------------------------

class _FakeTeachers:
    """ctx.train_submodel: records what each teacher got and returns a fixed random linear
    model per index (its logits depend on the teacher)."""

    def __init__(self, scale=3.0):
        self.calls: list[tuple[torch.Tensor, torch.Tensor, int]] = []
        self.scale = scale

    def __call__(self, x, y, index=0):
        self.calls.append((x.clone(), y.clone(), index))
        g = torch.Generator().manual_seed(100 + index)
        m = nn.Linear(D, K)
        with torch.no_grad():
            m.weight.copy_(self.scale * torch.randn(K, D, generator=g) / math.sqrt(D))
            m.bias.copy_(torch.randn(K, generator=g))
        m.train()  # the hooks must put them in eval mode themselves
        return m


def _distilled(temperature, n=43, seed=0, teachers=None):
    x, y = _data(n, 7)
    teachers = teachers or _FakeTeachers()
    hooks = get("distillation").hooks(temperature, K)
    hooks.setup(_ctx(None, x, y, seed=seed, train_submodel=teachers))
    return hooks, x, y, teachers


def test_distillation_teachers_get_disjoint_parts_covering_the_members():
    hooks, x, y, teachers = _distilled(4.0)
    assert [i for _, _, i in teachers.calls] == list(range(TEACHERS))
    seen = []
    for (tx, ty, _i), part in zip(teachers.calls, hooks.parts):
        # which members teacher i got, found by their (distinct, random) rows
        rows = [int(np.flatnonzero((x == r).all(1).numpy())[0]) for r in tx]
        assert sorted(rows) == sorted(part.tolist())
        assert torch.equal(ty, y[rows])
        seen += rows
    assert sorted(seen) == list(range(len(y)))                # covering, and no member twice
    sizes = [len(p) for p in hooks.parts]
    assert max(sizes) - min(sizes) <= 1
    assert (hooks.owner[hooks.parts[2]] == 2).all()
    other, _, _, _ = _distilled(4.0, seed=1)                   # the partition is the seed's
    assert any(not np.array_equal(a, b) for a, b in zip(hooks.parts, other.parts))


def test_distillation_labels_are_the_non_owning_teachers_tempered_softmax_average():
    for temperature in (0.5, 1.0, 4.0):
        hooks, x, y, teachers = _distilled(temperature)
        t = hooks.targets(x, y)
        assert t.shape == (len(y), K) and t.dtype == x.dtype
        np.testing.assert_allclose(t.sum(1).numpy(), 1.0, atol=1e-6)
        models = hooks.models
        assert all(not m.training for m in models)
        for i in range(len(y)):  # the slow reference: member by member, teacher by teacher
            rows = [torch.softmax(m(x[i]) / temperature, 0) for k, m in enumerate(models) if i not in hooks.parts[k]]
            assert len(rows) == TEACHERS - 1
            np.testing.assert_allclose(t[i].detach().numpy(), torch.stack(rows).mean(0).detach().numpy(),
                                       rtol=1e-5, atol=1e-7)


def test_distillation_label_never_depends_on_the_members_own_teacher():
    hooks, x, y, _ = _distilled(2.0)
    t = hooks.targets(x, y)
    with torch.no_grad():
        for p in hooks.models[1].parameters():
            p.add_(torch.randn_like(p) * 5)  # teacher 1 changed beyond recognition
    t2 = hooks.targets(x, y)
    own = hooks.parts[1]
    others = np.setdiff1d(np.arange(len(y)), own)
    assert torch.equal(t2[own], t[own])                             # its own part: the same labels
    assert (t2[others] - t[others]).abs().amax(1).min() > 1e-4      # every other member: changed
    # and the vectorised function on hand-made logits
    logits = torch.randn(3, 4, K)
    owner = np.array([0, 1, 2, 1])
    lab = teacher_labels(logits, owner, 1.0)
    np.testing.assert_allclose(lab[3].numpy(), (torch.softmax(logits[0, 3], 0) + torch.softmax(logits[2, 3], 0)).numpy()
                               / 2, rtol=1e-6)


def test_distillation_higher_temperature_gives_higher_entropy_labels():
    entropies = []
    for temperature in (0.5, 1.0, 4.0, 10.0):
        hooks, x, y, _ = _distilled(temperature)
        t = hooks.targets(x, y)
        entropies.append(float(-(t * t.clamp_min(1e-30).log()).sum(1).mean()))
    assert entropies == sorted(entropies) and entropies[0] < entropies[-1] - 0.3
    assert entropies[-1] < math.log(K) + 1e-6


def test_distillation_loss_is_t_squared_soft_ce_at_t_and_reports_the_soft_ce():
    z = torch.randn(6, K, requires_grad=True)
    t = torch.softmax(torch.randn(6, K), 1)
    for temperature in (1.0, 4.0):
        objective, reported = get("distillation").hooks(temperature, K).loss(z, t, 0)
        soft = -(t * F.log_softmax(z / temperature, 1)).sum(1).mean()
        assert float(objective.detach()) == pytest.approx(temperature ** 2 * float(soft.detach()), rel=1e-6)
        assert float(reported) == pytest.approx(float(soft.detach()), rel=1e-6) and not reported.requires_grad
        if temperature == 1.0:
            assert float(objective.detach()) == pytest.approx(float(cross_entropy(z, t).detach()), rel=1e-6)


def test_distillation_setup_needs_a_submodel_trainer_and_two_members():
    x, y = _data(5, 0)
    with pytest.raises(ConfigError, match="sub-model"):
        get("distillation").hooks(1.0, K).setup(_ctx(None, x, y))
    with pytest.raises(ConfigError, match="at least 2 members"):
        get("distillation").hooks(1.0, K).setup(_ctx(None, x[:1], y[:1], train_submodel=_FakeTeachers()))
    hooks, _, _, _ = _distilled(1.0, n=3)  # fewer members than teachers: one teacher each
    assert len(hooks.parts) == 3 and sorted(np.concatenate(hooks.parts).tolist()) == [0, 1, 2]


# -- end to end -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits():
    from privaudit.data.loaders import load_digits

    return load_digits()


def _capture(monkeypatch, name):
    d = get(name)
    made = []
    original = d.hooks

    def hooks(value, num_classes):
        made.append(original(value, num_classes))
        return made[-1]

    monkeypatch.setattr(d, "hooks", hooks)
    return made


def test_advreg_trains_end_to_end(digits, monkeypatch):
    from privaudit.core.config import make_config
    from privaudit.training.trainer import train_model

    made = _capture(monkeypatch, "advreg")
    cfg = make_config(dataset="digits", defence="advreg", knob=1.0, epochs=3, part_size=100)
    r = train_model(cfg, digits)
    assert len(r.loss_history) == 3 and np.isfinite(r.loss_history).all()
    assert r.metrics["test_accuracy"] > 0.1
    (hooks,) = made
    # 100 members in batches of 64: 2 classifier steps an epoch, k inference steps before and after each
    assert hooks.optimizer.state[next(hooks.h.parameters())]["step"] == INFERENCE_STEPS * (1 + 2 * 3)
    assert math.isfinite(hooks.last_gain)
    assert len(hooks.ctx.reference[0]) > 0 and hooks.ctx.reference[0].shape[1:] == hooks.ctx.x.shape[1:]


def test_distillation_trains_end_to_end_on_disjoint_teachers(digits, monkeypatch):
    from privaudit.core.config import make_config
    from privaudit.training.trainer import train_model

    made = _capture(monkeypatch, "distillation")
    cfg = make_config(dataset="digits", defence="distillation", knob=4.0, epochs=3, part_size=100)
    r = train_model(cfg, digits)
    assert len(r.loss_history) == 3 and np.isfinite(r.loss_history).all()
    assert r.metrics["test_accuracy"] > 0.1
    (hooks,) = made
    assert len(hooks.models) == TEACHERS and all(m is not r.model for m in hooks.models)
    assert sorted(np.concatenate(hooks.parts).tolist()) == list(range(100))
    # every teacher trained (they differ from one another) and is in eval mode
    first = [next(m.parameters()).detach().cpu() for m in hooks.models]
    assert not any(torch.equal(first[0], f) for f in first[1:])
    assert all(not m.training for m in hooks.models)
