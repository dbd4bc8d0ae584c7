"""Attacks: score functions against torch references, the ML-Leaks shadow attack on an
overfit target (AUC clearly above 1/2) and on exchangeable data (AUC about 1/2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privaudit.attacks import ShadowAttack, confidence_scores, loss_scores, softmax, top_k_posteriors
from privaudit.core.config import make_config
from privaudit.pipeline.attacking import attack_target, model_outputs, run_attacks
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace

CPU = torch.device("cpu")


def _auc_se(n1: int, n0: int) -> float:
    """Standard error of the AUC when members and non-members are exchangeable."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


# -- score functions ------------------------------------------------------------------------

def test_loss_scores_equal_minus_torch_cross_entropy():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (200, 10))
    labels = rng.integers(0, 10, 200)
    ref = -torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(labels),
                                             reduction="none").numpy()
    got = loss_scores(logits, labels)
    assert got.shape == (200,) and got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # float32 logits are promoted: the same numbers as float64
    np.testing.assert_allclose(loss_scores(logits.astype(np.float32), labels),
                               loss_scores(logits.astype(np.float32).astype(np.float64), labels), rtol=1e-15)


def test_scores_are_stable_for_extreme_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 800.0, 790.0]])
    labels = np.array([0, 2])
    s = loss_scores(logits, labels)
    assert np.all(np.isfinite(s))
    assert s[0] == pytest.approx(0.0, abs=1e-12)
    assert s[1] == pytest.approx(-10 - math.log1p(math.exp(-10)), rel=1e-12)
    p = softmax(logits)
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(confidence_scores(logits), [1.0, 1 / (1 + math.exp(-10))], rtol=1e-12)


def test_top_k_posteriors_sorted_descending_and_sum_at_most_one():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, (300, 10))
    top = top_k_posteriors(logits, 3)
    assert top.shape == (300, 3)
    assert np.all(np.diff(top, axis=1) <= 0)
    assert np.all(top.sum(1) <= 1 + 1e-12) and np.all(top > 0)
    ref = torch.softmax(torch.from_numpy(logits), 1).topk(3, dim=1).values.numpy()
    np.testing.assert_allclose(top, ref, rtol=1e-12)
    np.testing.assert_allclose(top[:, 0], confidence_scores(logits), rtol=1e-15)
    # with all classes, the sorted posteriors sum to one; k above C is clipped to C
    np.testing.assert_allclose(top_k_posteriors(logits, 10).sum(1), 1.0, rtol=1e-12)
    assert top_k_posteriors(logits[:, :2], 3).shape == (300, 2)


def test_shadow_attack_needs_fit_and_ignores_class_order():
    with pytest.raises(RuntimeError):
        ShadowAttack().scores(np.zeros((2, 10)))
    rng = np.random.default_rng(2)
    m_in, m_out = rng.normal(0, 4, (200, 10)), rng.normal(0, 1, (200, 10))
    atk = ShadowAttack().fit(m_in, m_out)
    test = rng.normal(0, 2, (50, 10))
    s = atk.scores(test)
    assert s.shape == (50,) and np.all((s >= 0) & (s <= 1))
    # features are sorted posteriors: permuting the classes changes nothing
    np.testing.assert_allclose(atk.scores(test[:, rng.permutation(10)]), s, rtol=1e-12)
    # confident (member-like) outputs score higher than flat ones
    assert atk.scores(np.eye(10)[:1] * 20)[0] > atk.scores(np.zeros((1, 10)))[0]


def test_attacks_are_at_chance_when_members_and_nonmembers_are_exchangeable():
    """Synthetic logits from one distribution for members and non-members (target and
    shadow alike): every attack's AUC lies within a few standard errors of 1/2."""
    rng = np.random.default_rng(3)
    n = 2000

    def outputs():
        def part():
            y = rng.integers(0, 10, n)
            logits = rng.normal(0, 1, (n, 10))
            logits[np.arange(n), y] += rng.gamma(2.0, 2.0, n)   # confident, but same law for all
            return logits, y
        (a, ya), (b, yb) = part(), part()
        return a, ya, b, yb

    metrics, arrays = run_attacks(outputs(), outputs())
    assert set(metrics) == {"shadow", "loss", "confidence"}
    se = _auc_se(n, n)
    for name, m in metrics.items():
        assert abs(m["auc"] - 0.5) < 4 * se, (name, m["auc"])
        assert abs(m["advantage"]) < 2.0 * math.sqrt(2 / n)
    assert arrays["labels"].tolist() == [1] * n + [0] * n
    assert {k for k in arrays} == {"labels", "score_shadow", "score_loss", "score_confidence"}
    for name in ("shadow", "loss", "confidence"):
        assert arrays[f"score_{name}"].shape == (2 * n,)
        assert metrics[name]["auc"] == pytest.approx(roc_auc_score(arrays["labels"], arrays[f"score_{name}"]))


def test_run_attacks_thresholds():
    """loss: threshold -(mean member loss); confidence: mean member top-1; shadow: 0.5."""
    rng = np.random.default_rng(4)
    t_in, t_out = rng.normal(0, 3, (40, 10)), rng.normal(0, 1, (30, 10))
    y_in, y_out = rng.integers(0, 10, 40), rng.integers(0, 10, 30)
    s = (rng.normal(0, 3, (40, 10)), y_in, rng.normal(0, 1, (40, 10)), y_in)
    metrics, _ = run_attacks((t_in, y_in, t_out, y_out), s)
    assert metrics["loss"]["threshold"] == pytest.approx(loss_scores(t_in, y_in).mean())
    assert metrics["confidence"]["threshold"] == pytest.approx(confidence_scores(t_in).mean())
    assert metrics["shadow"]["threshold"] == 0.5


# -- end to end on an overfit target --------------------------------------------------------

@pytest.fixture(scope="module")
def overfit_attack(tmp_path_factory, data_cache):
    """An MLP (width 256) trained 100 epochs on 80 digits: train accuracy 1, a large gap."""
    ws = Workspace(tmp_path_factory.mktemp("ws-attack")).ensure_writable()
    cfg = make_config(model="mlp", dataset="digits", width=256, part_size=80, epochs=100, batch_size=32, seed=1)
    target = ensure_model(cfg, ws, data_cache, CPU)
    result = attack_target(ws, target.name, data_cache, CPU)
    return ws, cfg, target, result


def test_shadow_attack_beats_chance_on_an_overfit_target(overfit_attack):
    ws, cfg, target, result = overfit_attack
    assert target.metrics["train_accuracy"] == 1.0
    assert target.metrics["generalisation_gap"] > 0.05
    n = cfg.data.part_size
    threshold = 0.5 + 3 * _auc_se(n, n)
    for name in ("shadow", "loss", "confidence"):
        assert result.metrics[name]["auc"] > threshold, (name, result.metrics[name]["auc"])
    assert result.metrics["shadow"]["advantage"] > 0.2
    assert not result.reused


def test_attack_artifacts_are_saved_and_consistent(overfit_attack, data_cache):
    ws, cfg, target, result = overfit_attack
    assert result.path == ws.attacks / target.name
    # the shadow: the identical recipe with role "shadow", saved in the workspace
    assert result.shadow == cfg.as_shadow().run_name
    assert ws.read_model_config(result.shadow) == cfg.as_shadow()
    saved = json.loads((result.path / "metrics.json").read_text())
    assert saved == result.metrics
    with np.load(result.path / "scores.npz", allow_pickle=False) as npz:
        labels = npz["labels"]
        scores = {k: npz[k] for k in npz.files if k.startswith("score_")}
    assert labels.tolist() == [1] * cfg.data.part_size + [0] * cfg.data.part_size
    for name in ("shadow", "loss", "confidence"):
        assert saved[name]["auc"] == pytest.approx(result.metrics[name]["auc"], rel=1e-12)
        assert roc_auc_score(labels, scores[f"score_{name}"]) == pytest.approx(saved[name]["auc"], rel=1e-12)
    # the saved loss scores are recomputable from the saved target
    t_in, y_in, t_out, y_out = model_outputs(ws, target.name, data_cache, CPU)
    np.testing.assert_allclose(scores["score_loss"], loss_scores(np.r_[t_in, t_out], np.r_[y_in, y_out]),
                               rtol=1e-10)
    # a second attack reuses the saved result
    again = attack_target(ws, target.name, data_cache, CPU)
    assert again.reused and again.metrics == saved
