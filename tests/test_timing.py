"""The phase clock charges nested time to the innermost phase only."""

from __future__ import annotations

import privaudit.timing as timing


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
