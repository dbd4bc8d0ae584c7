"""The outputs of a fixed set of runs are still what privaudit writes (docs/architecture.md).

``tests/regression/runs.py`` names the runs (the digits audit, ``--defenses all --epochs 10``,
``--canaries mislabeled:20``, ``--target-accuracies 0.85``, ``reproduce mg-noise --dataset
digits --scale reduced``, and a ``scan`` of the audit's exported target) and gathers every CSV
they write; ``tests/fixtures/regression/`` holds the CSVs recorded (docs/architecture.md says
when, and what changed when they were recorded again). The suite reruns the quick ones (the
audit and the scan, a minute or two) and compares every cell: text identical, numbers to a
relative 1e-6 (the same float32 arithmetic; only a summation order may differ).
``python tests/regression/runs.py OUT`` reruns them all, and :func:`compare` checks any of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "regression"))
from runs import QUICK, RTOL, RUNS, record  # noqa: E402


FIXTURES = Path(__file__).parent / "fixtures" / "regression"


def compare(got: Path, want: Path) -> list[str]:
    """Every difference between two folders of CSVs (missing files, columns, rows, cells)."""
    problems = []
    want_files = sorted(p.relative_to(want) for p in want.rglob("*.csv"))
    got_files = sorted(p.relative_to(got) for p in got.rglob("*.csv"))
    if want_files != got_files:
        problems.append(f"files differ: recorded {want_files}, now {got_files}")
    for rel in set(want_files) & set(got_files):
        a, b = pd.read_csv(want / rel), pd.read_csv(got / rel)
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            problems.append(f"{rel}: shape or columns differ ({a.shape} vs {b.shape})")
            continue
        for col in a.columns:
            x, y = a[col], b[col]
            if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
                ok = np.isclose(x.to_numpy(float), y.to_numpy(float), rtol=RTOL, atol=1e-12, equal_nan=True)
            else:
                ok = (_text(x) == _text(y)).to_numpy(bool)
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                problems.append(f"{rel} column {col}: {int((~ok).sum())} cells differ, first row {i}: "
                                f"{x.iloc[i]!r} recorded, {y.iloc[i]!r} now")
    return problems


def _text(column: pd.Series) -> pd.Series:
    """A column's cells as text, a missing cell as ``<NA>`` (so that two missing cells agree)."""
    return column.astype(object).where(column.notna(), "<NA>").astype(str)


def test_every_run_has_its_recorded_outputs():
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(RUNS)
    for name in RUNS:
        assert list((FIXTURES / name).rglob("*.csv")), name


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK)
def test_a_quick_run_writes_what_it_wrote_when_recorded(tmp_path_factory, name):
    out = tmp_path_factory.getbasetemp() / "regression"
    record(out, [name])
    problems = compare(out / "csv" / name, FIXTURES / name)
    assert not problems, "\n".join(problems)
