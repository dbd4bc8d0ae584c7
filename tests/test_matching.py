"""--match-accuracy and --seeds: the κ search on known accuracy curves, and both options end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_helpers import one_error_line, run_cli, run_cli_joined

from privaudit.analysis.matching import match_strength, round_kappa
from privaudit.defences import DEFENCES

#: the search's ceiling for MG noise: its knob's
MAX_KAPPA = DEFENCES["mg"].knob.search_max


def linear(kappa: float) -> float:
    return 0.90 - 0.08 * kappa


def test_the_search_brackets_and_lands_within_tolerance():
    calls = []

    def acc(k):
        calls.append(k)
        return linear(k)

    m = match_strength(0.55, acc, {0.0: linear(0.0), 0.5: linear(0.5), 1.0: linear(1.0)}, tolerance=0.005,
                       max_strength=MAX_KAPPA)
    assert m.within and abs(m.accuracy - 0.55) <= 0.005 and abs(m.kappa - 4.375) < 0.07
    assert calls[0] == 2.0 and calls[1] == 4.0            # doubling from the grid's largest κ to bracket 0.55
    assert len(m.steps) == len(calls) <= 8 and all(k == round_kappa(k) for k in calls)


def test_a_grid_point_within_tolerance_needs_no_training():
    m = match_strength(0.83, lambda k: pytest.fail("trained"), {0.0: 0.9, 1.0: 0.826, 2.0: 0.74}, tolerance=0.01,
                       max_strength=MAX_KAPPA)
    assert (m.kappa, m.within, m.steps) == (1.0, True, ())


def test_noisy_non_monotone_accuracy_still_converges():
    rng = np.random.default_rng(0)
    wobble = {}

    def acc(k):
        wobble.setdefault(k, 0.01 * rng.standard_normal())
        return 0.9 * np.exp(-0.3 * k) + wobble[k]

    m = match_strength(0.45, acc, {0.0: 0.9}, tolerance=0.01, max_steps=10, max_strength=MAX_KAPPA)
    assert m.within, m
    assert abs(0.9 * np.exp(-0.3 * m.kappa) - 0.45) < 0.03    # near the true crossing κ = ln 2 / 0.3 ≈ 2.31


def test_unreachable_goals_return_the_closest_kappa_not_within():
    above = match_strength(0.95, lambda k: pytest.fail("trained"), {0.0: 0.9, 1.0: 0.85}, tolerance=0.01,
                           max_strength=MAX_KAPPA)
    assert (above.kappa, above.within) == (0.0, False)       # more accurate than the baseline itself
    floor = match_strength(0.05, lambda k: max(0.2, linear(k)), {0.0: 0.9}, tolerance=0.01, max_strength=16)
    assert not floor.within and floor.accuracy == 0.2 and max(k for k, _ in floor.steps) <= 16
    with pytest.raises(ValueError):
        match_strength(1.5, linear, {0.0: 0.9}, max_strength=MAX_KAPPA)


# -- end to end ---------------------------------------------------------------------------

def test_match_accuracy_dry_run_prices_the_search_at_its_budget(tmp_path):
    """--match-accuracy is --target-accuracies' search: --dry-run counts its MG-noise trainings
    at the search's budget (one per stand-in κ, on the first seed), as it does for the targets."""
    import privaudit
    from privaudit.executor.auditing import TARGET_SEARCH_STEPS

    kw = dict(dataset="digits", kappas="1", sigmas="1,2", attacks="shadow", epochs=2, workdir=tmp_path, dry_run=True)
    with_search = privaudit.audit(match_accuracy=True, **kw)
    without = privaudit.audit(**kw)
    note = next(n for n in with_search.notes if n.startswith("--match-accuracy: counted at its budget"))
    assert "1 defences x 2 targets" in note
    trained = lambda plan: sum(m["models"] - m["reused"] for m in plan.models)  # noqa: E731
    extra = trained(with_search) - trained(without)
    assert 2 <= extra <= 2 * TARGET_SEARCH_STEPS * 2 + 2 * 2  # stand-in searches, and one κ per DP row audited
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())  # nothing trained

AUDIT = ["audit", "--dataset", "digits", "--kappas", "1", "--sigmas", "1", "--attacks", "shadow", "--epochs", "4"]


@pytest.mark.slow
def test_seeds_and_match_accuracy_end_to_end(tmp_path):
    ws = str(tmp_path)
    code, out, err = run_cli(*AUDIT, "--seeds", "0,1", "--match-accuracy", "--match-tolerance", "0.02", "--json",
                             "--workdir", ws)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["seeds"] == [0, 1]
    (match,) = doc["match_accuracy"]  # the search of --target-accuracies, to the DP row's accuracy
    dp_acc = next(t["metrics"]["test_accuracy"] for t in doc["targets"] if t["run"] == match["dp_run"])
    assert match["defence"] == "mg" and match["target_accuracy"] == pytest.approx(dp_acc)
    if match["within_tolerance"]:
        assert abs(match["accuracy"] - dp_acc) <= 0.02 and match["status"] == "reached"
    table = pd.read_csv(tmp_path / "reports" / "tradeoff.csv")
    assert set(table["seed"]) == {0, 1}
    kappas = sorted(set(table["kappa"]))
    assert match["knob"] in kappas or match["knob"] in (0, None)  # the matched κ is audited on every seed
    per = table.groupby(["kappa", "dp", "attack"])["seed"].nunique()
    assert (per == 2).all()                                    # one row per (setting, seed, attack)
    settings = doc["summary"]["settings"]
    assert {s["interval"] for s in settings} == {"t over 2 seeds"} and all(s["n_seeds"] == 2 for s in settings)
    assert len(doc["summary"]["verdicts"]) == 3
    # seed 1 of --seeds is the model that --seed 1 trains: a rerun with it trains nothing
    code, out, err = run_cli(*AUDIT, "--seed", "1", "--json", "--workdir", ws)
    assert code == 0 and all(t["reused"] for t in json.loads(out)["targets"]), err
    # the search's models are cached: a rerun of the whole audit trains nothing
    code, out, err = run_cli(*AUDIT, "--seeds", "0,1", "--match-accuracy", "--match-tolerance", "0.02", "--json",
                             "--workdir", ws)
    assert code == 0 and json.loads(out)["match_accuracy"] == doc["match_accuracy"], err
    assert all(t["reused"] for t in json.loads(out)["targets"])
    assert "trained" not in err                                # nothing was trained again
    # attack and train take the seeds too
    code, out, err = run_cli("attack", "--target", "mlp", "--seeds", "1", "--attacks", "shadow", "--json",
                             "--workdir", ws)
    assert code == 0, err
    runs = {a["target"] for a in json.loads(out)["attacks"]}
    assert runs and all(t in set(table[table["seed"] == 1]["target_run"]) for t in runs)
    code, out, err = run_cli("train", "--dataset", "digits", "--epochs", "4", "--seeds", "0,1", "--json",
                             "--workdir", ws)
    assert code == 0 and [r["config"]["seed"] for r in json.loads(out)["runs"]] == [0, 1], err


@pytest.mark.parametrize("args, needle", [
    (["--seeds", "0,0"], "--seeds lists 0 twice"),
    (["--seeds", "0,x"], "--seeds expects comma-separated integers"),
    (["--seeds", "-1"], "--seeds expects comma-separated integers"),
    (["--match-accuracy", "--sigmas", "none"], "--match-accuracy matches MG noise to the DP-SGD rows"),
    (["--match-tolerance", "0"], "--match-tolerance"),
])
def test_bad_seeds_and_matching_options_are_one_line_errors(tmp_path, args, needle):
    code, output = run_cli_joined(*AUDIT, *args, "--workdir", str(tmp_path))
    assert code != 0
    assert needle in one_error_line(output)
    assert not (tmp_path / "models").exists()
