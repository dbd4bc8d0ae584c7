"""The phase clock charges nested time to the innermost phase only."""

from __future__ import annotations

import privaudit.core.timing as timing


def test_nested_phases_are_exclusive(monkeypatch):
    ticks = iter([0.0, 1.0, 3.0, 4.0, 10.0])  # reset, enter attack, enter train, leave train, leave attack
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(ticks))
    clock = timing.PhaseClock()
    clock.reset()
    with clock.phase("attack"):
        with clock.phase("train"):
            pass
    assert clock.totals == {"attack": 2.0 + 6.0, "train": 1.0}


def test_timed_decorator_and_snapshot_keys():
    clock = timing.CLOCK
    clock.reset()

    @timing.timed("report")
    def work():
        return 42

    assert work() == 42
    snap = clock.snapshot()
    assert set(timing.PHASES) <= set(snap) and snap["report"] >= 0.0


def test_every_command_json_says_where_the_time_went(tmp_path):
    """--json carries phase_seconds, counted from the command's start: train spends time
    importing, training and evaluating; scan reading, attacking and writing its report."""
    import json
    import time

    import numpy as np
    from cli_helpers import run_cli

    t0 = time.perf_counter()
    code, out, err = run_cli("train", "--dataset", "digits", "--epochs", "2", "--part-size", "60", "--width", "16",
                             "--workdir", str(tmp_path / "ws"), "--json")
    wall = time.perf_counter() - t0
    assert code == 0, err
    phases = json.loads(out)["phase_seconds"]
    assert set(timing.PHASES) <= set(phases)
    assert phases["train"] > 0 and phases["evaluate"] > 0 and phases["import"] >= 0
    assert sum(phases.values()) <= wall + 1e-3
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "o.npz", loss_in=rng.exponential(0.5, 50), loss_out=rng.exponential(1.0, 50))
    code, out, err = run_cli("scan", str(tmp_path / "o.npz"), "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    phases = json.loads(out)["phase_seconds"]
    assert phases["data"] > 0 and phases["attack"] > 0 and phases["report"] > 0 and phases["train"] == 0
