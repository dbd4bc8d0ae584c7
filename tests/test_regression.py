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

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "regression"))
from runs import QUICK, RTOL, RUNS, VERSIONS, numeric_versions, record  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "regression"


#: Where the numerical libraries differ from the recorded ones, a new release may move the
#: last float digits of training (a kernel's summation order), and a threshold chosen on a
#: score then moves by one sample: the comparison keeps every file, column, row and text
#: cell, and the numbers that no threshold chooses (each model's accuracies, the AUCs) to
#: this relative tolerance; the rest is compared exactly only on the recorded libraries.
DRIFT_RTOL = 1e-3
DRIFT_COLUMNS = ("test_accuracy", "train_accuracy", "auc", "auc_lo", "auc_hi", "n_members", "n_nonmembers",
                 "epsilon", "knob", "kappa", "noise_multiplier", "seed", "part_size", "epochs")
#: attacks that fit a model to the scores (scan's gradient-boosted trees): a moved digit may
#: change a split, so on other libraries their numbers are not compared at all
DRIFT_FITTED = ("classifier",)


def compare(got: Path, want: Path, drift: bool = False) -> list[str]:
    """Every difference between two folders of CSVs (missing files, columns, rows, cells);
    with ``drift`` (other numerical libraries than the recorded ones), numbers only in
    :data:`DRIFT_COLUMNS`, to :data:`DRIFT_RTOL`, and none of :data:`DRIFT_FITTED`'s rows."""
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
                if drift and col not in DRIFT_COLUMNS:
                    continue
                ok = np.isclose(x.to_numpy(float), y.to_numpy(float), rtol=DRIFT_RTOL if drift else RTOL, atol=1e-12,
                                equal_nan=True)
                if drift and "attack" in a.columns:
                    ok |= a["attack"].isin(DRIFT_FITTED).to_numpy(bool)
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
    assert sorted(json.loads((FIXTURES / VERSIONS).read_text())) == sorted(numeric_versions())
    for name in RUNS:
        assert list((FIXTURES / name).rglob("*.csv")), name


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK)
def test_a_quick_run_writes_what_it_wrote_when_recorded(tmp_path_factory, name):
    out = tmp_path_factory.getbasetemp() / "regression"
    record(out, [name])
    recorded = json.loads((FIXTURES / VERSIONS).read_text())
    drift = recorded != numeric_versions()
    problems = compare(out / "csv" / name, FIXTURES / name, drift=drift)
    context = f"recorded with {recorded}, now {numeric_versions()}: compared for drift\n" if drift else ""
    assert not problems, context + "\n".join(problems)


def test_drift_mode_still_catches_a_changed_accuracy_and_text(tmp_path):
    """The comparison on other libraries keeps what no release may move."""
    want = tmp_path / "want"
    want.mkdir()
    pd.DataFrame({"attack": ["lira"], "test_accuracy": [0.9], "auc": [0.7], "threshold": [0.1]}).to_csv(want / "t.csv")
    for change, caught in (({"threshold": [0.3]}, False), ({"auc": [0.70001]}, False), ({"auc": [0.71]}, True),
                           ({"test_accuracy": [0.91]}, True), ({"attack": ["rmia"]}, True)):
        got = tmp_path / f"got{len(list(tmp_path.iterdir()))}"
        got.mkdir()
        row = {"attack": ["lira"], "test_accuracy": [0.9], "auc": [0.7], "threshold": [0.1], **change}
        pd.DataFrame(row).to_csv(got / "t.csv")
        assert bool(compare(got, want, drift=True)) is caught, change
        assert compare(got, want) or change == {}
