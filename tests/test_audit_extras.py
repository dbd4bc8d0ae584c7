"""The audit's new by-products, each on constructed inputs with a known answer: the loss-trace
column of the exposure table, the stability of the top members across seeds, and what the
reference pool's size saves in a dry run."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from privaudit.executor.preview import LIRA_PROTOCOL_REFERENCES, pool_savings
from privaudit.pipeline.attacking import trace_exposure
from privaudit.pipeline.workspace import Workspace
from privaudit.reporting.build import exposure_stability


def test_trace_exposure_scores_the_trace_against_the_attack_and_says_when_there_is_none():
    members, epochs = 300, 6
    indices = np.arange(1000, 1000 + 2 * members)             # pool samples: members, then non-members
    rng = np.random.default_rng(0)
    spread = rng.gamma(1.0, 1.0, members)
    trace = (1.0 + spread[None, :] * np.linspace(1, 0, epochs)[:, None]).astype(np.float16)
    order = rng.permutation(members)                           # the trace's members in another order
    scores = np.r_[spread, rng.normal(size=members)]           # the attack ranks members by that spread
    got = trace_exposure((trace[:, order], indices[:members][order]), scores, indices, members, 0.01)
    assert got["available"] and got["epochs"] == epochs and got["precision"] == 1.0
    assert set(got["top"]) <= set(indices[:members].tolist())
    shuffled = trace_exposure((trace, indices[:members][order]), scores, indices, members, 0.01)
    assert shuffled["precision"] < 0.5                         # a trace of other members finds chance
    none = trace_exposure(None, scores, indices, members)
    assert not none["available"] and "no loss trace" in none["reason"]
    other = trace_exposure((trace, indices[members:]), scores, indices, members)
    assert not other["available"] and "not the target's" in other["reason"]


def _attack_folder(ws: Workspace, run: str, indices: np.ndarray, member: np.ndarray, score: np.ndarray) -> None:
    folder = ws.attacks / run
    folder.mkdir(parents=True)
    buf = io.BytesIO()
    np.savez(buf, indices=indices, labels=member.astype(np.int8), score_rmia=score)
    (folder / "scores.npz").write_bytes(buf.getvalue())


def test_stability_across_seeds_is_the_jaccard_of_the_top_members(tmp_path):
    ws = Workspace(tmp_path)
    ids = np.arange(400)
    member = np.r_[np.ones(200, bool), np.zeros(200, bool)]
    base = np.linspace(0, 1, 400)
    _attack_folder(ws, "a", ids, member, base)
    _attack_folder(ws, "b", ids, member, base + 0.0)           # the same ranking: Jaccard 1
    _attack_folder(ws, "c", ids, member, -base)                # the opposite: its top 1 % is disjoint
    ov = pd.DataFrame([{"strongest": "rmia", "runs": ["a", "b"]}, {"strongest": "rmia", "runs": ["a", "c"]},
                       {"strongest": "rmia", "runs": ["a"]}])
    extras: dict = {}
    exposure_stability(ws, ov.iloc[:1], extras)
    assert extras["a"]["stability"]["jaccard"] == 1.0 and extras["b"]["stability"]["seeds"] == 2
    extras = {}
    exposure_stability(ws, ov.iloc[1:], extras)
    assert extras["c"]["stability"]["jaccard"] == 0.0 and 0 < extras["c"]["stability"]["chance"] < 0.1
    assert "stability" not in extras.get("x", {})               # one run: nothing to compare


def test_pool_savings_counts_the_trainings_against_lira_protocol():
    models = [{"role": "reference", "models": 32, "seconds": 16.0}, {"role": "target", "models": 2, "seconds": 1.0}]
    (note,) = pool_savings(models, 16)
    assert f"{2 * (LIRA_PROTOCOL_REFERENCES - 16):,} fewer trainings" in note and "2 settings" in note
    assert pool_savings(models, 64) == [] and pool_savings([], 16) == []
