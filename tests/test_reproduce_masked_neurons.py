"""The masked-neurons reproduction (privaudit/reproduction/masked_neurons*.py, docs/methods/c-masked-neurons.md C.4):
the batched rounds against a slow NumPy reference with the same masks, the protocol, the
cached (resumable) runs, and the claims against simulated outcomes with a known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from test_communities import write_communities

from privaudit.errors import ConfigError
from privaudit.reproduction import masked_neurons as mn
from privaudit.reproduction.claims import AGREES, DISAGREES, UNDECIDED
from privaudit.reproduction.masked_neurons_claims import grid_claims, trajectory_claims
from privaudit.theorems.masked_neurons import (
    PreactivationNet,
    cell_rng,
    keep_probability,
    masked_round,
    sample_masks,
    train_masked,
)
from privaudit.theorems.twolayer import make_problem, predict


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# -- the batched rounds against the reference ----------------------------------------------------

def _reference(problem, kind, p, tau, xi, lr, rounds, rng):
    """Weight space, one subnetwork at a time (NumPy): errors per round and the subnetworks'
    own errors before each local step."""
    W, a, X, y = problem.W0.copy(), problem.a, problem.X, problem.y
    m, scale = len(a), keep_probability(kind, p, xi)
    errors, local = [float(np.sum((y - scale * predict(W, a, X)) ** 2))], []
    for _ in range(rounds):
        masks = sample_masks(kind, p, m, xi, rng)
        row = []
        for t in range(tau):  # the subnetworks' errors before step t (each runs its own copy)
            subs = []
            for mask in masks:
                if mask.any():
                    idx = np.flatnonzero(mask)
                    Wj = masked_round(W, a, X, y, mask[None, :], t, lr)[idx] if t else W[idx]
                    subs.append(float(np.sum((y - predict(Wj, a[idx], X, m=m)) ** 2)))
            row.append(np.mean(subs))
        local.append(row)
        W = masked_round(W, a, X, y, masks, tau, lr)
        errors.append(float(np.sum((y - scale * predict(W, a, X)) ** 2)))
    return np.array(errors), np.array(local)


@pytest.mark.parametrize("kind,p,tau,xi", [("bernoulli", 3, 2, 0.4), ("bernoulli", 1, 3, 0.7),
                                           ("categorical", 4, 3, 0.25)])
def test_batched_rounds_match_the_reference(kind, p, tau, xi):
    problem = make_problem(10, 6, 24, labels="gaussian", seed=5)
    ref_e, ref_l = _reference(problem, kind, p, tau, xi, 0.3, 6, cell_rng(1, kind, p, tau, xi))
    for dtype, rtol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        got = train_masked(PreactivationNet.from_problem(problem, dtype), kind=kind, p=p, local_steps=tau, xi=xi,
                           lr=0.3, rounds=6, rng=cell_rng(1, kind, p, tau, xi), record_local=True)
        assert np.allclose(got.errors, ref_e, rtol=rtol, atol=0)
        assert np.allclose(got.local, ref_l, rtol=rtol, atol=0)


# -- a tiny protocol ------------------------------------------------------------------------------

def tiny(seeds=(0, 1), experiments=mn.EXPERIMENTS):
    return mn.MaskedNeuronsProtocol("reduced", tuple(seeds), tuple(experiments), n=10, width=16, rounds=4,
                                    trajectory_tau=2, trajectory_steps=7, bernoulli_ps=(1, 2), bernoulli_xis=(0.5, 1.0),
                                    categorical_ps=(1, 2), categorical_taus=(1, 2), sub_ps=(1, 2),
                                    sub_xis=(0.5, 1.0), sub_taus=(1, 2), reduces=("tiny",))


@pytest.fixture
def folder(tmp_path):
    return write_communities(tmp_path / "data" / "communities-and-crime", rows=30)


def test_protocols_and_unknown_names():
    full, reduced = mn.protocol("full"), mn.protocol("reduced")
    assert (full.width, full.rounds, len(full.bernoulli_ps), len(full.bernoulli_xis), len(full.seeds)) == \
        (4000, 200, 10, 10, 5)
    assert reduced.reduces and reduced.width < full.width and not full.reduces
    plan = mn.masked_neurons_plan("full")
    assert plan["runs"] == 5 * (3 + 100 + 100 + 2 * (16 + 16)) and plan["estimated_seconds"] > 0
    with pytest.raises(ConfigError, match="unknown masked-neurons experiment 'heatmaps'"):
        mn.protocol("reduced", experiments=["bernoulli", "heatmaps"])
    with pytest.raises(ConfigError, match="scale must be one of"):
        mn.protocol("huge")
    assert mn.protocol("reduced", experiments=["categorical"]).runs()[0].experiment == "categorical"


def test_no_data_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="needs its data"):
        mn.masked_neurons_reproduction("reduced", data=None, workdir=tmp_path)


def test_runs_are_cached_resumed_and_reproducible(monkeypatch, tmp_path, folder):
    real = mn.train_run
    monkeypatch.setattr(mn, "protocol", lambda scale, seeds=None, experiments=None: tiny(seeds or (0, 1)))
    first = mn.masked_neurons_reproduction("reduced", data=tmp_path / "data", workdir=tmp_path / "ws")
    runs = tiny().runs()
    assert first.settings["models_needed"] == len(runs) and first.settings["reduces"] == ["tiny"]
    assert mn.masked_neurons_plan("reduced", data=tmp_path / "data", workdir=tmp_path / "ws")["to_train"] == 0
    cached = list((tmp_path / "ws" / "models" / "reproduce" / "masked-neurons").rglob("*.json"))
    assert len(cached) == len(runs)

    def fail(*args, **kwargs):
        raise AssertionError("a cached run was trained again")

    monkeypatch.setattr(mn, "train_run", fail)
    lines = []
    again = mn.execute(tiny(), mn.resolve_data(tmp_path / "data"), tmp_path / "ws", lines.append, trainer=fail)
    assert len(again) == len(runs) and any("cached" in line for line in lines)
    # an interrupted run: one file gone, one damaged, only those two are trained again
    cached[0].unlink()
    cached[1].write_text("{not json")
    trained = []
    mn.execute(tiny(), mn.resolve_data(tmp_path / "data"), tmp_path / "ws",
               trainer=lambda pr, run, net: trained.append(run) or real(pr, run, net))
    assert len(trained) == 2
    # the same seed gives the same numbers in a fresh workspace
    monkeypatch.undo()
    monkeypatch.setattr(mn, "protocol", lambda scale, seeds=None, experiments=None: tiny(seeds or (0, 1)))
    second = mn.masked_neurons_reproduction("reduced", data=tmp_path / "data", workdir=tmp_path / "ws2")
    for name, frame in first.tables.items():
        pd.testing.assert_frame_equal(frame, second.tables[name])
    assert {f.section for f in first.figures} == set(first.section_order)
    assert {"trajectories.csv", "bernoulli.csv", "categorical.csv", "step-sizes.csv"} <= set(first.tables)
    assert any("TMLR" in n for n in first.notes) and any("Colour range" in n for n in first.notes)
    t = first.tables["trajectories.csv"]
    assert t.groupby(["xi", "seed"]).size().max() == 1 + 3 * (2 + 1)   # rounds ⌈7/3⌉ = 3, τ + 1 points each


def test_the_dry_run_learns_this_machines_speed_from_trained_runs(monkeypatch, tmp_path, folder):
    """Runs trained here record their seconds; the estimate of the rest is the timed cost
    model scaled by measured / modelled time over them (here set to 3×, and the cost model
    given, so no timing decides the test)."""
    import json

    costs = mn.RunCosts({"bernoulli": 2e-3, "categorical": 1e-3}, {"bernoulli": 5e-7, "categorical": 3e-7})
    monkeypatch.setattr(mn, "protocol", lambda scale, seeds=None, experiments=None: tiny(seeds or (0,)))
    before = mn.masked_neurons_plan("reduced", data=tmp_path / "data", workdir=tmp_path / "ws", costs=costs)
    mn.masked_neurons_reproduction("reduced", data=tmp_path / "data", workdir=tmp_path / "ws")
    proto = tiny((0,))
    files = sorted((tmp_path / "ws" / "models" / "reproduce" / "masked-neurons").rglob("*.json"))
    runs = {r.name: r for r in proto.runs()}
    for path in files:
        doc = json.loads(path.read_text())
        assert doc["seconds"] >= 0
        doc["seconds"] = 3 * costs.seconds(runs[path.name], proto.width)
        path.write_text(json.dumps(doc))
    files[0].unlink()                                                     # one run left to train
    after = mn.masked_neurons_plan("reduced", data=tmp_path / "data", workdir=tmp_path / "ws", costs=costs)
    r = runs[files[0].name]
    assert after["to_train"] == 1 and "times 3" in after["cost_model"]
    assert after["estimated_seconds"] == pytest.approx(3 * costs.seconds(r, proto.width), abs=0.1)
    assert before["to_train"] == len(runs) and "times" not in before["cost_model"]
    assert before["estimated_seconds"] == pytest.approx(sum(costs.seconds(r, proto.width) for r in runs.values()),
                                                        abs=0.1)


def test_the_timed_cost_model_is_a_line_in_rounds_and_row_steps(monkeypatch, tmp_path):
    """The three timing runs are fitted exactly when their times are a line: a fake clock
    charges 0.01 s a round and 1e-6 s a kept row and local step (no real timing decides it)."""
    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    clock = {"t": 0.0}

    def fake_train(net, *, kind, p, local_steps, xi, lr, rounds, rng, record_local=False):
        rows = net.m if kind == "categorical" else xi * p * net.m
        clock["t"] += rounds * (0.01 + 1e-6 * rows * local_steps)

    monkeypatch.setattr(mn, "train_masked", fake_train)
    monkeypatch.setattr(mn.time, "perf_counter", lambda: clock["t"])
    costs = mn.timed_costs(tiny())
    for kind in ("bernoulli", "categorical"):
        assert costs.per_round[kind] == pytest.approx(0.01) and costs.per_row_step[kind] == pytest.approx(1e-6)
    monkeypatch.setattr(mn, "train_masked", lambda *a, **k: (_ for _ in ()).throw(AssertionError("timed again")))
    assert mn.timed_costs(tiny()).per_round["bernoulli"] == pytest.approx(0.01)  # cached for this machine


@pytest.mark.slow
def test_the_estimate_holds_against_a_measured_run(tmp_path, folder, monkeypatch):
    """The plan's estimate (timed here, from a fresh cost cache) against the same runs'
    measured time: within 2x either way. A ratio of two times on one machine, not a speed."""
    import time

    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    proto = mn.protocol("reduced", (0,), ("bernoulli",))
    small = mn.MaskedNeuronsProtocol("reduced", (0,), ("bernoulli",), width=proto.width, rounds=40,
                                     bernoulli_ps=proto.bernoulli_ps, bernoulli_xis=proto.bernoulli_xis,
                                     sub_ps=(), sub_xis=(), step_factors=(1.0,))
    monkeypatch.setattr(mn, "protocol", lambda scale, seeds=None, experiments=None: small)
    plan = mn.masked_neurons_plan("reduced", data=tmp_path / "data", workdir=tmp_path / "ws")
    t = time.perf_counter()
    mn.execute(small, mn.resolve_data(tmp_path / "data"), tmp_path / "ws")
    actual = time.perf_counter() - t
    assert plan["to_train"] == 16
    assert 0.5 < actual / plan["estimated_seconds"] < 2.0, (actual, plan["estimated_seconds"])


# -- claims against simulated outcomes ------------------------------------------------------------

def _grid(direction: float, noise: float, seed0: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fake final errors over (p, ξ) and (p, τ), five seeds: `direction` × the paper's trend plus noise."""
    rng = np.random.default_rng(seed0)
    bern, cat = [], []
    for seed in range(5):
        for p in range(1, 11):
            for k in range(1, 11):
                xi, tau = k / 10, k
                bern.append({"seed": seed, "p": p, "local_steps": 1, "xi": xi, "step_factor": 1.0, "lr": 0.02,
                             "final_error": 0.04 - direction * (0.01 * xi + 0.001 * p) + noise * rng.normal()})
                cat.append({"seed": seed, "p": p, "local_steps": tau, "xi": 1 / p, "step_factor": 1.0, "lr": 0.02,
                            "final_error": 0.01 + direction * (0.001 * tau + 0.001 * p) + noise * rng.normal()})
    return pd.DataFrame(bern), pd.DataFrame(cat)


@pytest.mark.parametrize("direction,expected", [(1.0, AGREES), (0.0, UNDECIDED), (-1.0, DISAGREES)])
def test_grid_claims_read_a_known_truth(direction, expected):
    bern, cat = _grid(direction, 1e-3)
    claims = grid_claims(bern, cat)
    assert [c.figure for c in claims] == ["Figure 2(b)", "Figure 2(b)", "Figure 2(c)", "Figure 2(c)"]
    verdicts = {c.verdict for c in claims}
    if direction == 0.0:  # flat noise: each 95 % interval may miss 0 by chance, rarely all of them
        assert sum(c.verdict == UNDECIDED for c in claims) >= 3
    else:
        assert verdicts == {expected}


def _trajectory(gap: float, rise: float, seeds=range(4)) -> pd.DataFrame:
    """A fake saw-tooth: per round τ = 3 local points falling, then the aggregated one; a
    redraw jumps by `rise` (log₁₀); the level is lower by `gap` per 0.1 of ξ."""
    rows, rng = [], np.random.default_rng(0)
    for xi in (0.8, 0.5, 0.3):
        for seed in seeds:
            level, step = -1.0 - gap * xi * 10 + 0.01 * rng.normal(), 0
            rows.append({"xi": xi, "seed": seed, "step": 0, "round": 0, "phase": "aggregated", "local_step": -1,
                         "error": 10 ** level})
            for k in range(1, 6):
                for t in range(3):
                    step += 1
                    rows.append({"xi": xi, "seed": seed, "step": step, "round": k, "phase": "local",
                                 "local_step": t, "error": 10 ** (level + rise - 0.1 * t + 0.01 * rng.normal())})
                step += 1
                level -= 0.05
                rows.append({"xi": xi, "seed": seed, "step": step, "round": k, "phase": "aggregated",
                             "local_step": 3, "error": 10 ** level})
    return pd.DataFrame(rows)


def test_trajectory_claims_read_a_known_truth():
    claims = {c.label: c for c in trajectory_claims(_trajectory(gap=0.05, rise=0.5), steps=24)}
    assert claims["log error, ξ 0.8 − ξ 0.5"].verdict == AGREES
    assert claims["log error, ξ 0.5 − ξ 0.3"].verdict == AGREES
    assert claims["jump at mask redraw"].verdict == AGREES
    assert claims["change over local steps"].verdict == AGREES
    assert claims["change at aggregation"].verdict == AGREES
    reverse = {c.label: c for c in trajectory_claims(_trajectory(gap=-0.05, rise=-0.5), steps=24)}
    assert reverse["log error, ξ 0.8 − ξ 0.5"].verdict == DISAGREES
    assert reverse["jump at mask redraw"].verdict == DISAGREES
