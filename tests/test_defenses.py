"""The defence registry (issue: every common defence at equal accuracy): each defence tested
for its defining property, exact where it is exact (label smoothing's targets, the
confidence penalty's loss, top-k and rounding outputs), by Monte Carlo where it draws (MixUp's
λ ~ Beta(α, α), additive noise's σ), and for the trend that must hold (more of the knob, less
fit to the members); the registry's errors name what exists."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from cli_helpers import one_error_line, run_cli
from scipy import stats

from privaudit.core.config import make_config
from privaudit.data.loaders import load_digits
from privaudit.defences import DEFENCES, FIELD_DEFENCES, TrainingContext, get, parse
from privaudit.defences.base import FLOOR
from privaudit.defences.confidence_penalty import entropy
from privaudit.errors import ConfigError
from privaudit.models import build_model
from privaudit.training.trainer import train_model


@pytest.fixture(scope="module")
def digits():
    return load_digits()


def _ctx(x, y, seed=0, classes=10):
    return TrainingContext(model=None, x=x, y=y, num_classes=classes, generator=torch.Generator().manual_seed(seed),
                           rng=np.random.default_rng(seed), epochs=1)


# -- the registry ---------------------------------------------------------------------------

def test_every_defence_documents_its_knob_paper_and_formula():
    for name, d in DEFENCES.items():
        assert d.name == name and d.title and d.paper and d.formula and d.tag
        assert type(d).__module__.startswith("privaudit.defences.")
        assert (type(d).__doc__ or __import__(type(d).__module__, fromlist=["x"]).__doc__)
        if d.knob is not None:
            assert d.knob.grid, name
            for v in d.knob.grid:
                assert d.check_knob(v) == v
            assert d.knob.stronger in ("higher", "lower")


def test_unknown_defence_and_bad_knob_are_one_line_errors_listing_what_exists():
    with pytest.raises(ConfigError, match="expected one of mg, dpsgd, .*label-only"):
        get("dropconnect")
    with pytest.raises(ConfigError, match=r"alpha α: a number in \(0, 0.99\] \(got 1.5\)"):
        make_config(dataset="digits", defence="label-smoothing", knob=1.5)
    with pytest.raises(ConfigError, match="an integer"):
        make_config(dataset="digits", defence="top-k", knob=2.5)
    with pytest.raises(ConfigError, match="needs `knob`"):
        make_config(dataset="digits", defence="mixup")
    with pytest.raises(ConfigError, match="one defence a model"):
        make_config(dataset="digits", defence="mixup", knob=0.2, kappa=0.5)
    code, out, err = run_cli("train", "--dataset", "digits", "--defense", "mixup", "--knob", "-1")
    assert code == 2 and "--knob for mixup is its alpha" in one_error_line(err)
    code, out, err = run_cli("audit", "--dataset", "digits", "--defenses", "mixup,nope", "--dry-run")
    assert code == 2 and "unknown defence 'nope'" in one_error_line(err) and "label-only" in err


def test_parse_all_and_aliases():
    names = [d.name for d in parse("all")]
    assert names == [n for n in DEFENCES if n != "noisycgd"]
    assert [d.name for d in parse("topk, mixup,top-k")] == ["top-k", "mixup"]


def test_method_configs_hash_apart_and_leave_old_configs_alone():
    plain = make_config(dataset="digits")
    assert "method" not in plain.hash_dict()["defence"] and "knob" not in plain.hash_dict()["defence"]
    a = make_config(dataset="digits", defence="label-smoothing", knob=0.1)
    b = make_config(dataset="digits", defence="label-smoothing", knob=0.2)
    assert len({plain.config_hash, a.config_hash, b.config_hash}) == 3
    assert a.run_name.startswith("target-mlp-digits-ls0.1-")
    assert type(a).from_dict(a.to_dict()) == a
    es = make_config(dataset="digits", defence="early-stopping", knob=7)
    assert es.train.epochs == 7
    wd = make_config(dataset="digits", defence="weight-decay", knob=0.01)
    assert wd.train.weight_decay == 0.01
    with pytest.raises(ConfigError, match="do not also give `epochs`"):
        make_config(dataset="digits", defence="early-stopping", knob=7, epochs=8)


# -- defining properties ----------------------------------------------------------------------

def test_label_smoothing_targets_are_exact():
    y = torch.tensor([0, 3, 9])
    t = get("label-smoothing").hooks(0.3, 10).targets(torch.zeros(3, 4), y)
    expected = np.full((3, 10), 0.03)
    expected[np.arange(3), y.numpy()] = 0.7 + 0.03
    np.testing.assert_allclose(t.numpy(), expected, atol=1e-7)
    np.testing.assert_allclose(t.sum(1).numpy(), 1.0, atol=1e-6)


def test_confidence_penalty_is_ce_minus_beta_entropy():
    g = torch.Generator().manual_seed(1)
    z, y = torch.randn(16, 10, generator=g), torch.randint(0, 10, (16,), generator=g)
    objective, reported = get("confidence-penalty").hooks(2.0, 10).loss(z, y, 0)
    p = torch.softmax(z.double(), 1)
    h = -(p * p.log()).sum(1)
    ce = -p.log()[torch.arange(16), y]
    assert float(objective) == pytest.approx(float((ce - 2.0 * h).mean()), rel=1e-5)
    assert float(reported) == pytest.approx(float(ce.mean()), rel=1e-5)
    assert float(entropy(torch.zeros(1, 4))[0]) == pytest.approx(math.log(4), rel=1e-6)


def test_mixup_weights_follow_beta_and_mixes_are_exact():
    hooks = get("mixup").hooks(0.4, 10)
    x = torch.randn(8, 1, 2, 2, generator=torch.Generator().manual_seed(0))
    y = torch.arange(8) % 10
    hooks.setup(_ctx(x, y, seed=3))
    t = hooks.targets(x, y)
    lambdas = []
    for _ in range(3000):
        xm, tm = hooks.view(x, t)
        lambdas.append(hooks.terms.last_drawn[0][0])  # the batch's (λ, π)
    lam = lambdas[-1]
    # the last mix: every row is λ·x_i + (1 − λ)·x_j with the same j for inputs and labels
    for i in range(8):
        j = int(torch.argmax(tm[i] - lam * t[i]).item()) if lam < 1 else i
        np.testing.assert_allclose(tm[i].sum().item(), 1.0, atol=1e-6)
        np.testing.assert_allclose(xm[i].numpy(), (lam * x[i] + (1 - lam) * x[j]).numpy(), atol=1e-5)
    # λ ~ Beta(0.4, 0.4): Kolmogorov-Smirnov, seeded
    assert stats.kstest(lambdas, stats.beta(0.4, 0.4).cdf).pvalue > 0.01
    assert stats.kstest(lambdas, stats.beta(1.0, 1.0).cdf).pvalue < 1e-6


def test_additive_noise_has_the_asked_std():
    hooks = get("input-noise").hooks(0.7, 10)
    x = torch.zeros(2000, 1, 4, 4)
    hooks.setup(_ctx(x, torch.zeros(2000, dtype=torch.long)))
    noisy, _ = hooks.view(x, None)
    assert float(noisy.std()) == pytest.approx(0.7, rel=0.02)
    assert abs(float(noisy.mean())) < 0.01


def test_dropout_keeps_the_layers_and_weights_of_the_plain_model():
    torch.manual_seed(0)
    with_dropout = build_model("mlp", (1, 8, 8), 10, width=16, dropout=0.5)
    plain = build_model("mlp", (1, 8, 8), 10, width=16)
    assert set(with_dropout.state_dict()) == set(plain.state_dict())
    plain.load_state_dict(with_dropout.state_dict())
    x = torch.randn(5, 1, 8, 8)
    with_dropout.eval(), plain.eval()
    torch.testing.assert_close(with_dropout(x), plain(x))
    with_dropout.train()
    drops = [m for m in with_dropout.modules() if isinstance(m, torch.nn.Dropout)]
    assert len(drops) == 1 and drops[0].p == 0.5
    with pytest.raises(ConfigError, match="adds dropout to mlp and cnn"):
        make_config(dataset="digits", model="cnn-improved-small", defence="dropout", knob=0.5)


def test_output_defences_release_exactly_what_they_say():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(50, 10, generator=g, dtype=torch.float64) * 3
    p = torch.softmax(z, 1)
    top3 = get("top-k").release(z, 3).exp()
    kept = top3 > FLOOR * 10
    assert (kept.sum(1) == 3).all()
    torch.testing.assert_close(top3[kept], p[kept])
    assert (p.masked_fill(kept, -1.0).max(1).values <= p.topk(3, 1).values[:, -1]).all()  # the 3 largest kept
    rounded = get("rounding").release(z, 2).exp()
    expected = torch.round(p * 100) / 100
    nonzero = expected > 0
    torch.testing.assert_close(rounded[nonzero], expected[nonzero])
    assert (rounded[~nonzero] < 1e-20).all()
    labels = get("label-only").release(z, 0).exp()
    assert torch.equal(labels.argmax(1), z.argmax(1)) and ((labels > 0.5).sum(1) == 1).all()
    assert (labels.max(1).values == 1.0).all()


def test_workspace_queries_see_the_released_outputs(tmp_path, digits):
    from privaudit.pipeline.runs import DataCache, ensure_model
    from privaudit.pipeline.workspace import Workspace
    from privaudit.training.results import predict_logits

    ws = Workspace(tmp_path)
    cfg = make_config(dataset="digits", defence="top-k", knob=1, epochs=3, part_size=100)
    run = ensure_model(cfg, ws, DataCache(None), torch.device("cpu"))
    loaded = ws.load_model(run.name, digits.input_shape, digits.num_classes)
    scores = predict_logits(loaded.model, torch.from_numpy(loaded.normaliser(digits.x[:20]))).exp()
    assert ((scores > 1e-20).sum(1) == 1).all()  # one score released per query


def test_an_output_defence_reuses_the_undefended_weights_and_trains_nothing(tmp_path, digits):
    """Top-k and rounding change what a query returns, never a training step: their models
    are the undefended model's weights (trained once), saved without training, and the audit's
    plan trains no model for them."""
    from privaudit.executor.plan import audit_jobs
    from privaudit.pipeline.attacking import AttackPlan
    from privaudit.pipeline.runs import DataCache, ensure_model, ensure_models
    from privaudit.pipeline.workspace import Workspace

    ws, data, cpu = Workspace(tmp_path), DataCache(None), torch.device("cpu")
    plain = make_config(dataset="digits", epochs=3, part_size=100)
    top = make_config(dataset="digits", defence="top-k", knob=1, epochs=3, part_size=100)
    assert top.trained_as == plain and plain.trained_as is plain
    started = []
    run = ensure_model(top, ws, data, cpu, on_start=started.append)
    assert [c.run_name for c in started] == [plain.run_name]  # the undefended model trained, once
    assert not run.reused and run.metrics["trained_as"] == plain.run_name
    base = ensure_model(plain, ws, data, cpu, on_start=started.append)
    assert base.reused and len(started) == 1
    assert ((ws.model_dir(run.name) / "weights.npz").read_bytes()
            == (ws.model_dir(base.name) / "weights.npz").read_bytes())
    assert run.metrics["test_accuracy"] == base.metrics["test_accuracy"]
    # the released outputs differ: one score per query against all of them
    x = torch.from_numpy(ws.load_model(base.name, digits.input_shape, digits.num_classes).normaliser(digits.x[:20]))
    z_top = ws.load_model(run.name, digits.input_shape, digits.num_classes).model(x).exp()
    z_plain = ws.load_model(base.name, digits.input_shape, digits.num_classes).model(x).exp()
    assert ((z_top > 1e-20).sum(1) == 1).all() and ((z_plain > 1e-20).sum(1) > 1).any()
    # many at once (a reference pool): the rounding models need no training of their own
    pool = [make_config(dataset="digits", defence="rounding", knob=2, epochs=3, part_size=100).as_reference(4, i)
            for i in range(4)]
    runs = ensure_models(pool, ws, data, cpu, on_start=started.append)
    assert all(r.metrics["trained_as"] == c.trained_as.run_name for r, c in zip(runs, pool))
    flat = [c for s in started[1:] for c in (s if isinstance(s, list) else [s])]
    assert len(flat) == 4 and all(c.trained_as is c for c in flat)  # the undefended references alone
    # the audit's plan: a derive job per output-side model, after its undefended model's job
    targets = [plain, top, make_config(dataset="digits", defence="label-only", epochs=3, part_size=100)]
    jobs = audit_jobs(targets, AttackPlan.from_choices(["shadow", "lira"], pool_size=4),
                      {"digits": (digits.input_shape, len(digits.y))})
    trained = [c for j in jobs if j.kind == "train" and j.deps == () for c in j.configs]
    derived = [j for j in jobs if j.kind == "train" and j.deps]
    assert all(c.trained_as is c for c in trained)
    assert len(trained) == 1 + 1 + 4 and len(derived) == 2 * (1 + 1 + 4)  # target, shadow, pool; twice derived
    index = {j.id: i for i, j in enumerate(jobs)}
    assert all(index[d] < index[j.id] for j in derived for d in j.deps)


# -- trends ---------------------------------------------------------------------------------

def _fit(digits, **kwargs):
    cfg = make_config(dataset="digits", part_size=300, seed=0, **kwargs)
    m = train_model(cfg, digits).metrics
    return m["train_loss"], m["test_loss"], m["train_accuracy"]


@pytest.mark.parametrize("name", ["input-noise", "weight-decay", "early-stopping", "dropout", "mixup"])
def test_more_of_the_knob_fits_the_members_less(digits, name):
    """Stronger setting → larger training loss (the members fitted less) and a smaller
    train-test loss gap, the quantity the loss attack thresholds."""
    d = get(name)
    weak, strong = d.knob.grid[0], d.knob.grid[-1]
    extra = {} if name == "early-stopping" else {"epochs": 40}
    w_train, w_test, w_acc = _fit(digits, defence=name, knob=weak, **extra)
    s_train, s_test, s_acc = _fit(digits, defence=name, knob=strong, **extra)
    assert s_train > w_train
    assert (s_test - s_train) < (w_test - w_train)
    assert s_acc <= w_acc  # and the members are classified no better


def test_every_training_defence_trains(digits):
    for name, d in DEFENCES.items():
        if name in FIELD_DEFENCES:
            continue
        v = d.knob.grid[0] if d.knob else None
        extra = {} if name == "early-stopping" else {"epochs": 2}
        cfg = make_config(dataset="digits", part_size=100, defence=name, knob=v, **extra)
        r = train_model(cfg, digits)
        assert np.isfinite(r.loss_history).all() and r.metrics["test_accuracy"] > 0.1, name


def test_label_only_attacks_run_on_output_defences_and_the_gap_attack_is_the_accuracy_gap(tmp_path):
    """A target behind ``label-only`` gets the gap and augmentation attacks without asking;
    the gap attack's AUC is exactly (1 + train accuracy − test accuracy) / 2."""
    from privaudit.pipeline.attacking import AttackPlan, attack_target
    from privaudit.pipeline.runs import DataCache, ensure_model
    from privaudit.pipeline.workspace import Workspace

    ws, data, cpu = Workspace(tmp_path), DataCache(None), torch.device("cpu")
    cfg = make_config(dataset="digits", defence="label-only", epochs=20, part_size=200)
    run = ensure_model(cfg, ws, data, cpu)
    result = attack_target(ws, run.name, data, cpu, AttackPlan.from_choices(["shadow"]))
    assert {"gap", "augmentation", "shadow"} <= set(result.metrics)
    m = run.metrics
    assert result.metrics["gap"]["auc"] == pytest.approx((1 + m["train_accuracy"] - m["test_accuracy"]) / 2, abs=1e-9)
    # label only: the shadow attack's sorted posteriors are all (1, 0, 0): it cannot tell anything
    assert result.metrics["shadow"]["auc"] == pytest.approx(0.5, abs=1e-9)
    plain = attack_target(ws, ensure_model(make_config(dataset="digits", epochs=20, part_size=200), ws, data, cpu).name,
                          data, cpu, AttackPlan.from_choices(["shadow"]))
    assert "gap" not in plain.metrics  # a target that releases its scores gets them only when asked


def test_the_defences_page_lists_every_defence_with_its_knob_range():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "defences.md").read_text(encoding="utf-8")
    for name in DEFENCES:
        assert f"| `{name}` |" in page, name


def test_recipe_and_output_defences_train_stacked_and_agree_with_one_by_one(digits):
    """Weight decay, early stopping and the output-side defences change no step of training:
    their models stack (batched training) and match the one-by-one models."""
    from privaudit.training.stacked import can_stack, train_stacked

    cfgs = [make_config(dataset="digits", part_size=100, defence="weight-decay", knob=0.01, epochs=3),
            make_config(dataset="digits", part_size=100, defence="top-k", knob=1, epochs=3, seed=1, weight_decay=0.01)]
    assert all(can_stack(c, digits.input_shape) for c in cfgs)
    assert not can_stack(make_config(dataset="digits", defence="advreg", knob=1.0), digits.input_shape)
    stacked = train_stacked(cfgs, digits)
    for cfg, res in zip(cfgs, stacked):
        alone = train_model(cfg, digits, stack=False)
        for a, b in zip(res.model.state_dict().values(), alone.model.state_dict().values()):
            torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-3)


def test_loss_and_input_defences_train_stacked_as_one_by_one(digits):
    """Label smoothing, the confidence penalty, additive input noise, MixUp, RelaxLoss and HAMP's
    training are per-model terms of the stacked step: in one stacked run beside a plain model, each model
    follows its own one-by-one run (same initial weights, targets, loss gradient, branch and
    draws), to float summation order; the run's loss history is the one-by-one run's too."""
    from privaudit.training.stacked import can_stack, stack_groups, train_stacked

    cfgs = [make_config(dataset="digits", part_size=100, epochs=4),
            make_config(dataset="digits", part_size=100, defence="label-smoothing", knob=0.3, epochs=4, seed=1),
            make_config(dataset="digits", part_size=100, defence="confidence-penalty", knob=2.0, epochs=4),
            make_config(dataset="digits", part_size=100, defence="input-noise", knob=1.0, epochs=4, seed=2),
            make_config(dataset="digits", part_size=100, defence="input-noise", knob=0.5, epochs=4).as_reference(4, 1),
            make_config(dataset="digits", part_size=100, defence="mixup", knob=0.4, epochs=4, seed=3),
            make_config(dataset="digits", part_size=100, defence="relaxloss", knob=1.0, epochs=4),
            make_config(dataset="digits", part_size=100, defence="hamp", knob=0.8, epochs=4, seed=1)]
    assert all(can_stack(c, digits.input_shape) for c in cfgs)
    assert len(stack_groups(cfgs, digits.input_shape, len(digits.y))) == 1  # one run for all eight
    stacked = train_stacked(cfgs, digits)
    for cfg, res in zip(cfgs, stacked):
        alone = train_model(cfg, digits, stack=False)
        for a, b in zip(res.model.state_dict().values(), alone.model.state_dict().values()):
            torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-3, msg=cfg.defence.label)
        np.testing.assert_allclose(res.loss_history, alone.loss_history, rtol=1e-4, err_msg=cfg.defence.label)
    # the terms matter: without its noise the input-noise model would have trained otherwise
    plain_twin = train_model(make_config(dataset="digits", part_size=100, epochs=4, seed=2), digits, stack=False)
    assert not torch.allclose(plain_twin.model.state_dict()[next(iter(plain_twin.model.state_dict()))],
                              stacked[3].model.state_dict()[next(iter(stacked[3].model.state_dict()))], atol=1e-3)
    assert not can_stack(make_config(dataset="digits", defence="dropout", knob=0.5), digits.input_shape)
