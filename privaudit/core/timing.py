"""Where an audit's time goes: a process-wide, exclusive phase clock.

``with phase("train"): ...`` attributes the wall time inside the block to ``train``; time
in a nested phase counts only for the innermost one (a reference pool trained inside an
attack counts as training, not attack; the evaluation after training counts as
``evaluate``). The clock follows the main thread: work it waits for in worker threads (the
local executor's concurrent training runs) counts for the phase the main thread is in, so the
phases never add up to more than the wall time. Every command's ``--json`` reports the totals
(``phase_seconds``; the clock starts with the command), and
``benchmarks/bench_audit.py`` turns them into the time shares of an audit.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("import", "data", "train", "evaluate", "attack", "report")


class PhaseClock:
    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[str] = []
        self._since = 0.0

    def _charge(self, now: float) -> None:
        if self._stack:
            self.totals[self._stack[-1]] += now - self._since
        self._since = now

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._charge(time.perf_counter())
        self._stack.append(name)
        try:
            yield
        finally:
            self._charge(time.perf_counter())
            self._stack.pop()

    def snapshot(self) -> dict[str, float]:
        """Seconds per phase so far (the running phases included)."""
        self._charge(time.perf_counter())
        return {name: round(self.totals.get(name, 0.0), 4) for name in PHASES} | {
            k: round(v, 4) for k, v in self.totals.items() if k not in PHASES}

    def reset(self) -> None:
        self.totals.clear()
        self._since = time.perf_counter()


CLOCK = PhaseClock()
phase = CLOCK.phase


def timed(name: str):
    """Decorator: the function's calls run in phase ``name``."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with phase(name):
                return fn(*args, **kwargs)
        return inner
    return wrap


#: set by the console entry point (:func:`privaudit.cli.entry`): the process is the command's own
FREEZE_IMPORTS = False


@contextmanager
def importing() -> Iterator[None]:
    """The block's time counts as the ``import`` phase: the library a command loads when it
    runs (torch, pandas, scikit-learn; the command line itself loads none of them, and the
    Python API loads them on the call that needs them).

    In the command's own process (:data:`FREEZE_IMPORTS`), what the imports created is then
    moved out of the cyclic garbage collector's reach (:func:`gc.freeze`): torch, scikit-learn
    and Opacus leave hundreds of thousands of objects that every full collection would walk
    again, never to free them (docs/performance.md)."""
    import gc

    with phase("import"):
        yield
    if FREEZE_IMPORTS:
        gc.freeze()
