"""Workspaces written before checksummed manifests: never trusted blindly (issue 42, item 4).

Model folders are verified and migrated with a note; attack and pool folders (numbers an
earlier version's code computed) are moved aside, kept, and computed again by the commands that
compute them; ``report``, which computes nothing, refuses them with the command that does."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from cli_helpers import one_error_line, run_cli_joined

import privaudit
from privaudit.errors import ArtifactError, DamagedArtifactError
from privaudit.files.integrity import MANIFEST
from privaudit.pipeline.workspace import LEGACY_FOLDER, Workspace

pytestmark = pytest.mark.slow

SMALL = dict(dataset="digits", kappas="0.5", sigmas="none", epochs=2, width=16, part_size=60, attacks="shadow,lira",
             pool_size=4)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(a workspace a small audit wrote, its table): copied by each test."""
    root = tmp_path_factory.mktemp("legacy") / "ws"
    return root, privaudit.audit(**SMALL, workdir=root).table


def _old_copy(written, dest):
    """A copy of the written workspace as a privaudit from before manifests left it."""
    shutil.copytree(written[0], dest)
    assert _strip_manifests(dest) > 0
    return dest


def _strip_manifests(root) -> int:
    """Make ``root`` look as a privaudit from before manifests wrote it; returns how many."""
    manifests = list(root.glob(f"models/*/{MANIFEST}")) + list(root.glob(f"attacks/*/{MANIFEST}")) + \
        list(root.glob(f"attacks/pools/*/{MANIFEST}"))
    for m in manifests:
        m.unlink()
    return len(manifests)


def test_an_old_workspace_is_migrated_with_a_note_and_gives_a_fresh_runs_table(written, tmp_path):
    old = _old_copy(written, tmp_path / "old")
    # an earlier version's attack numbers: a changed AUC in an attack folder without a manifest
    metrics = next(old.glob("attacks/target-*/metrics.json"))
    metrics.write_text(metrics.read_text().replace('"auc": 0.', '"auc": 0.9', 1))
    lines: list[str] = []
    again = privaudit.audit(**SMALL, workdir=old, log=lines.append)
    notes = [line for line in lines if line.startswith("note:")]
    assert any("model folders" in n and "now carry a manifest" in n for n in notes), lines
    assert any("moved aside" in n for n in notes), lines
    ws = Workspace(old)
    assert ws.legacy_folders() == {"model": [], "attack": [], "pool": []}  # every folder checked from now on
    assert (old / "attacks" / LEGACY_FOLDER).is_dir() and any((old / "attacks" / LEGACY_FOLDER).iterdir())
    pd.testing.assert_frame_equal(again.table, written[1])
    lines.clear()
    privaudit.audit(**SMALL, workdir=old, log=lines.append)  # nothing left to migrate: no note
    assert not [line for line in lines if line.startswith("note:")]


def test_report_refuses_results_without_checksums_and_names_the_command_that_rebuilds_them(written, tmp_path):
    tmp_path = _old_copy(written, tmp_path / "old")
    code, out = run_cli_joined("report", "--workdir", str(tmp_path))
    line = one_error_line(out)
    assert code != 0 and "had no checksums" in line and "privaudit attack --target mlp" in line
    with pytest.raises(ArtifactError, match="had no checksums"):
        privaudit.report(workdir=tmp_path)


def test_an_old_model_whose_weights_do_not_load_is_refused(written, tmp_path):
    tmp_path = _old_copy(written, tmp_path / "old")
    weights = next(tmp_path.glob("models/target-*/weights.npz"))
    weights.write_bytes(weights.read_bytes()[:200])  # truncated
    with pytest.raises(DamagedArtifactError, match="is damaged"):
        Workspace(tmp_path).ensure_writable()
