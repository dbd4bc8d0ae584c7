"""Ctrl-C under load (issue 42, item 5): every interrupt ends in the one ``interrupted`` line
and exit status 130, never a C++ abort (``terminate called without an active exception``,
exit 134), and the interrupted workspace resumes to the table of an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

pytestmark = pytest.mark.slow


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it. A suite started in the background by a shell without
    job control (``bash -c '... &'``) runs with SIGINT ignored; its children inherit that and
    Python keeps an ignored SIGINT ignored, so the audit would never see the interrupt
    (measured: exit 0 after the whole run, 130 with this reset)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupts_under_load_end_cleanly_and_the_run_resumes(tmp_path):
    env = {**os.environ, "PRIVAUDIT_CACHE_DIR": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, "-m", "privaudit", "audit", "--dataset", "digits", "--kappas", "0.5", "--sigmas", "1",
            "--epochs", "4", "--width", "32", "--pool-size", "4", "--device", "cpu", "--workdir", str(tmp_path / "w")]
    sibling = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # another process holds a core
    outcomes = []
    try:
        # interrupts at start-up, while models train side by side (DP-SGD's noise thread too),
        # and while pools and attacks run
        for delay in (1.5, 4.0, 7.0):
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                    preexec_fn=_default_sigint)
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=300)
            outcomes.append((delay, proc.returncode, err))
    finally:
        sibling.kill()
        sibling.wait()
    for delay, code, err in outcomes:
        assert "terminate called" not in err and "Traceback" not in err, (delay, err[-2000:])
        assert code in (0, 130), (delay, code, err[-2000:])  # 0: the audit (resumed) ended before the signal
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert errors in ([], ["error: interrupted; finished artifacts are kept and a rerun resumes from them"]), \
            (delay, err[-2000:])
    assert any(code == 130 for _, code, _ in outcomes)
    resumed = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    fresh = subprocess.run(args[:-1] + [str(tmp_path / "fresh")], capture_output=True, text=True, env=env,
                           timeout=600)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "w" / "reports" / "tradeoff.csv").drop(columns="wall_seconds", errors="ignore"),
                                  pd.read_csv(tmp_path / "fresh" / "reports" / "tradeoff.csv").drop(columns="wall_seconds", errors="ignore"))
