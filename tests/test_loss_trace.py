"""Loss traces recorded by the training loop, saved with the model, and the LT-IQR ranking."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.attacks.loss_trace import lt_iqr, top_precision, top_set
from privaudit.core.config import make_config
from privaudit.data import load_dataset
from privaudit.errors import DamagedArtifactError
from privaudit.pipeline.runs import DataCache, ensure_model
from privaudit.pipeline.workspace import Workspace
from privaudit.training import train_model
from privaudit.training.stacked import train_stacked
from privaudit.training.trace import FILE, LossTrace


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.mark.parametrize("kw", [{}, {"kappa": 0.5}, {"defense": "label-smoothing", "knob": 0.1}])
def test_trace_is_the_epoch_losses_of_each_member(digits, kw):
    """Full passes: every member once an epoch, and the epoch's mean of the trace is the
    epoch's reported mean loss (the trace is the loss the step computed, row by row)."""
    r = train_model(make_config(dataset="digits", epochs=4, **kw), digits)
    assert r.loss_trace.shape == (4, len(r.trace_indices)) and r.loss_trace.dtype == np.float16
    assert np.isfinite(r.loss_trace.astype(float)).all()
    np.testing.assert_allclose(r.loss_trace.astype(float).mean(axis=1), r.loss_history, rtol=2e-3)
    assert r.loss_history[-1] < r.loss_history[0]  # and it falls, as a training loss does


def test_dp_sgd_trace_leaves_unsampled_epochs_empty(digits):
    cfg = make_config(dataset="digits", epochs=3, dp=True, noise_multiplier=1.0)
    r = train_model(cfg, digits)
    t = r.loss_trace.astype(float)
    seen = np.isfinite(t)
    assert 0.0 < seen.mean() < 1.0  # Poisson batches: some members unsampled in some epochs
    np.testing.assert_allclose(np.nanmean(t, axis=1), r.loss_history, rtol=0.05)


def test_stacked_models_record_their_own_traces(digits):
    """Stacked training records each model's trace in its own members' order, the same as
    training it alone (up to the float summation order of the batched products)."""
    cfgs = [make_config(dataset="digits", epochs=3).as_reference(4, i).validated() for i in range(3)]
    stacked = train_stacked(cfgs, digits)
    for c, r in zip(cfgs, stacked):
        alone = train_model(c, digits, stack=False)
        np.testing.assert_array_equal(r.trace_indices, alone.trace_indices)
        np.testing.assert_allclose(r.loss_trace.astype(float), alone.loss_trace.astype(float), atol=2e-3, rtol=2e-3)
    assert not np.array_equal(stacked[0].trace_indices, stacked[1].trace_indices)


def test_trace_is_saved_checksummed_and_changes_no_hash(tmp_path, digits):
    ws = Workspace(tmp_path)
    cfg = make_config(dataset="digits", epochs=2)
    hash_before = cfg.config_hash
    run = ensure_model(cfg, ws, DataCache(), "cpu")
    assert cfg.config_hash == hash_before and run.name == cfg.run_name
    trace, idx = ws.read_loss_trace(run.name)
    assert trace.shape == (2, len(idx))
    assert (ws.model_dir(run.name) / FILE).stat().st_size < 2 * trace.size + 8 * len(idx) + 2000
    manifest = (ws.model_dir(run.name) / "manifest.json").read_text()
    assert FILE in manifest
    (ws.model_dir(run.name) / FILE).write_bytes(b"not a trace")
    with pytest.raises(DamagedArtifactError, match="damaged"):
        ws.read_loss_trace(run.name)


def test_model_without_trace_reads_none(tmp_path, digits):
    ws = Workspace(tmp_path)
    run = ensure_model(make_config(dataset="digits", epochs=1), ws, DataCache(), "cpu")
    (ws.model_dir(run.name) / FILE).unlink()
    from privaudit.files.integrity import write_manifest

    write_manifest(ws.model_dir(run.name))
    assert ws.read_loss_trace(run.name) is None


def test_lt_iqr_against_a_slow_reference():
    rng = np.random.default_rng(0)
    t = rng.gamma(2.0, 1.0, size=(9, 50))
    t[rng.random(t.shape) < 0.2] = np.nan
    t[:, 7] = np.nan  # never sampled
    got = lt_iqr(t)
    for j in range(t.shape[1]):
        col = t[:, j][np.isfinite(t[:, j])]
        want = -np.inf if col.size == 0 else np.percentile(col, 75) - np.percentile(col, 25)
        assert got[j] == pytest.approx(want)
    with pytest.raises(ValueError, match="epochs, members"):
        lt_iqr(np.zeros(5))


def test_top_precision_identity_chance_and_ties():
    rng = np.random.default_rng(1)
    s = rng.normal(size=10_000)
    assert top_precision(s, s, 0.01) == 1.0
    chance = np.mean([top_precision(rng.normal(size=10_000), s, 0.01) for _ in range(40)])
    assert 0.0 <= chance < 0.03  # chance level is 1 %
    assert list(top_set(np.zeros(5), 0.4)) == [0, 1]  # ties by index


def test_loss_trace_accumulates_means():
    import torch

    tr = LossTrace(3, 2)
    tr.next_epoch()
    tr.record(torch.tensor([0, 0, 2]), torch.tensor([1.0, 3.0, 5.0]))
    tr.next_epoch()
    tr.record(torch.tensor([1]), torch.tensor([4.0]))
    a = tr.array().astype(float)
    np.testing.assert_array_equal(a[0], [2.0, np.nan, 5.0])
    np.testing.assert_array_equal(a[1], [np.nan, 4.0, np.nan])


def test_stacked_dp_sgd_records_the_traces_one_by_one_training_records(digits):
    """The stacked DP-SGD engine draws each model's Poisson batches as the one-by-one engine
    does, so the same members are sampled in the same epochs and their losses agree."""
    cfgs = [make_config(dataset="digits", epochs=3, dp=True, noise_multiplier=1.0).as_reference(4, i).validated()
            for i in range(2)]
    for c, r in zip(cfgs, train_stacked(cfgs, digits)):
        alone = train_model(c, digits, stack=False)
        a, b = r.loss_trace.astype(float), alone.loss_trace.astype(float)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], atol=5e-3, rtol=5e-3)


def test_no_trace_beyond_its_memory_cap(digits, monkeypatch):
    import privaudit.training.trace as trace_module

    monkeypatch.setattr(trace_module, "MAX_CELLS", 10)
    r = train_model(make_config(dataset="digits", epochs=2), digits)
    assert r.loss_trace is None and len(r.loss_history) == 2
    cfgs = [make_config(dataset="digits", epochs=2).as_reference(4, i).validated() for i in range(2)]
    assert all(s.loss_trace is None for s in train_stacked(cfgs, digits))


def test_engines_that_compute_no_row_losses_leave_no_trace(digits):
    """Opacus's engine and NoisyCGD record nothing: their models have no trace, not an empty one."""
    opacus = train_model(make_config(dataset="digits", epochs=2, dp=True, noise_multiplier=1.0), digits,
                         engine="reference")
    convex = train_model(make_config(dataset="digits", model="convex-relu", epochs=2, dp=True, noise_multiplier=1.0),
                         digits)
    assert opacus.loss_trace is None and convex.loss_trace is None
