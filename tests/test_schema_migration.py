"""A workspace written before config schema 2 (MG noise and DP as fields of their own, every
other defence a method and a knob) keeps its hashes and its models.

``tests/fixtures/workspace-schema1`` was written by the release before schema 2: the targets
and shadow models of ``audit --dataset digits --part-size 40 --epochs 2 --width 16 --attacks
shadow,loss`` with ``--kappas 0.5 --sigmas 1`` and then ``--defenses mixup,top-k --knobs
mixup=0.2 --knobs top-k=3``, with their attack results, and the ``tradeoff.csv`` that release's
``privaudit report`` built from them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from privaudit.core.config import RunConfig, make_config
from privaudit.pipeline.workspace import Workspace
from privaudit.reporting.summary import with_every_knob
from privaudit.reporting.table import POOL_COLUMNS

FIXTURE = Path(__file__).parent / "fixtures" / "workspace-schema1"
RECIPE = dict(dataset="digits", part_size=40, epochs=2, width=16)


@pytest.fixture
def old(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE / "models", ws / "models")
    shutil.copytree(FIXTURE / "attacks", ws / "attacks")
    return ws


def test_every_schema_1_config_reads_back_under_its_folder_name_as_one_defence_shape():
    seen = {}
    for folder in sorted((FIXTURE / "models").iterdir()):
        raw = json.loads((folder / "config.json").read_text())
        assert raw["schema"] == 1 and "kappa" in raw["defence"]
        cfg = RunConfig.from_dict(raw)
        assert cfg.run_name == folder.name == raw["run_name"]
        seen[folder.name.split("-")[3]] = (cfg.defence.name, cfg.defence.knob)
    assert seen == {"plain": ("none", 0.0), "k0.5": ("mg", 0.5), "dp": ("dpsgd", 1.0), "mix0.2": ("mixup", 0.2),
                    "top3": ("top-k", 3.0)}


@pytest.mark.parametrize("kwargs", [{}, {"kappa": 0.5}, {"dp": True, "noise_multiplier": 1.0},
                                    {"defense": "mg", "knob": 0.5}, {"defense": "dpsgd", "knob": 1.0},
                                    {"defense": "mixup", "knob": 0.2}, {"defense": "top-k", "knob": 3}])
def test_the_same_recipe_asked_today_names_the_old_model(old, kwargs):
    cfg = make_config(**RECIPE, **kwargs)
    assert Workspace(old).has_model(cfg), cfg.run_name


def test_the_report_of_an_old_workspace_is_the_old_report(old):
    """``privaudit report`` over the old models and attacks gives the table the old release
    wrote, every cell (floats to 1e-9 relative: the same numbers read back and summarised), but
    for the knob that MG noise's and DP's rows now carry (tests/test_regression.py) and the
    pool-replicate columns, empty: the old release kept no per-pool-model measures."""
    from privaudit import report

    report(workdir=old)
    new = pd.read_csv(old / "reports" / "tradeoff.csv")
    ref = with_every_knob(pd.read_csv(FIXTURE / "tradeoff.csv"))  # an intended change
    assert [c for c in new.columns if c not in POOL_COLUMNS] == list(ref.columns)
    assert list(new.columns[-len(POOL_COLUMNS):]) == POOL_COLUMNS and new[POOL_COLUMNS].isna().all().all()
    new = new.drop(columns=POOL_COLUMNS)
    pd.testing.assert_frame_equal(new, ref, check_exact=False, rtol=1e-9)
