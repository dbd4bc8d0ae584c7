"""Artifact integrity: every committed folder carries a manifest of checksums; a reused folder
that no longer matches it (or whose config.json cannot be read) is never reused: the library
refuses it, naming the folder, and the commands that compute it (train, attack, audit) set it
aside, kept, and compute just that folder again (:mod:`privaudit.api.repair`)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from cli_helpers import run_cli_joined as _run_cli

import privaudit.files.integrity as integrity
from privaudit.errors import ArtifactError, DamagedArtifactError
from privaudit.executor.bundle import pack, unpack
from privaudit.files.integrity import MANIFEST, verify_folder
from privaudit.pipeline.pools import ensure_pool
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace

CPU = torch.device("cpu")
TRAIN = ("train", "--dataset", "digits", "--epochs", "2")


def _one_line_error(output: str) -> str:
    """The single ``error:`` line of a failed command (and no traceback)."""
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


def _flip_byte(path: Path, where: float = 0.6) -> None:
    raw = bytearray(path.read_bytes())
    i = int(len(raw) * where)
    raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))


def _folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if not p.name.startswith(".")} if root.is_dir() else set()


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".locks" not in p.parts}


def _train(root: Path, *extra: str) -> Path:
    """Train one digits target (2 epochs) with ``extra`` options; its model folder."""
    before = _folders(root / "models")
    code, out = _run_cli(*TRAIN, *extra, "--workdir", str(root))
    assert code == 0, out
    (new,) = _folders(root / "models") - before
    return root / "models" / new


def _json(out: str) -> dict:
    """The JSON document at the start of ``_run_cli``'s output (stdout comes before stderr)."""
    return json.JSONDecoder().raw_decode(out[out.index("{"):])[0]


# -- the manifest -----------------------------------------------------------------------------

def test_every_committed_folder_records_size_and_sha256_of_its_files(trained_mg, tmp_path):
    ws, cfg, run = trained_mg
    folder = ws.model_dir(run.name)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["schema"] == 1
    assert set(manifest["files"]) == {"config.json", "metrics.json", "weights.npz", "loss_trace.npz"}
    for name, entry in manifest["files"].items():
        data = (folder / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert verify_folder(folder, "model") is True


def test_a_folder_shipped_as_a_bundle_keeps_its_manifest_and_damage_in_transit_is_refused(trained_mg, tmp_path):
    ws, _, run = trained_mg
    rel = f"models/{run.name}"
    bundle = pack(ws, [rel])
    assert MANIFEST in bundle[rel]
    other = Workspace(tmp_path / "worker").ensure_writable()
    unpack(other, bundle)
    assert _tree(other.model_dir(run.name)) == _tree(ws.model_dir(run.name))   # the same manifest, not a new one
    bad = {rel: dict(bundle[rel])}
    raw = bytearray(bad[rel]["weights.npz"])
    raw[len(raw) // 2] ^= 1
    bad[rel]["weights.npz"] = bytes(raw)
    third = Workspace(tmp_path / "driver").ensure_writable()
    with pytest.raises(ArtifactError, match="arrived damaged: weights.npz"):
        unpack(third, bad)
    assert not third.model_dir(run.name).exists() and _folders(third.models) == set()


def test_repeated_checks_hash_each_file_once_and_an_edit_is_still_seen(trained_mg, tmp_path, monkeypatch):
    ws, _, run = trained_mg
    folder = tmp_path / run.name
    shutil.copytree(ws.model_dir(run.name), folder)
    monkeypatch.setattr(integrity, "RACY_SECONDS", -1e9)   # as if the files were written long ago
    monkeypatch.setattr(integrity, "_digests", {})
    calls = []
    real = hashlib.sha256

    def counting(*a):
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(integrity.hashlib, "sha256", counting)
    for _ in range(5):
        assert verify_folder(folder, "model")
    assert len(calls) == 4                                 # config, metrics, weights, loss trace: hashed once each
    with open(folder / "weights.npz", "ab") as fh:         # changed: another size and mtime
        fh.write(b"\0")
    with pytest.raises(DamagedArtifactError, match="weights.npz has"):
        verify_folder(folder, "model")


def test_a_folder_replaced_while_it_is_verified_is_read_again(trained_mg, tmp_path, monkeypatch):
    """Another process committing the same artifact swaps the folder mid-check: that is no
    damage (the new folder is complete), so the check reads the new one."""
    ws, _, run = trained_mg
    folder = tmp_path / "m"
    shutil.copytree(ws.model_dir(run.name), folder)
    real = integrity._problem
    swapped = []

    def racing(path, only):
        if not swapped:
            swapped.append(1)
            shutil.copytree(folder, tmp_path / "new")
            shutil.rmtree(folder)
            os.replace(tmp_path / "new", folder)
            return "metrics.json does not match the checksum recorded when it was written"
        return real(path, only)

    monkeypatch.setattr(integrity, "_problem", racing)
    assert verify_folder(folder, "model") and swapped


# -- damaged weights: train and attack -------------------------------------------------------

def _set_aside(root: Path, name: str) -> Path:
    """The one copy of ``name`` kept under ``root/.damaged/``."""
    (kept,) = (root / ".damaged").glob(f"{name}-*")
    return kept


def _note(out: str, folder: Path) -> str:
    """The one note line saying ``folder`` was set aside."""
    notes = [line for line in out.splitlines()
             if line.startswith(f"note: {folder_kind(folder)} folder {folder} is damaged")]
    assert len(notes) == 1, out
    return notes[0]


def folder_kind(folder: Path) -> str:
    return {"models": "model", "pools": "pool", "attacks": "attack"}[folder.parent.name]


def test_train_sets_a_damaged_model_aside_and_trains_only_it_again(tmp_path):
    """Two seeds trained; seed 1's weights get a flipped byte. The rerun sets that folder
    aside (kept, with its damaged file), says so in one line, trains that model again (the
    same bytes as before: same config, same seed) and reuses seed 0's untouched folder."""
    seeds = (*TRAIN, "--seeds", "0,1", "--workdir", str(tmp_path), "--json")
    code, out = _run_cli(*seeds)
    assert code == 0, out
    first, second = (Path(r["path"]) for r in _json(out)["runs"])
    original = _tree(second)
    untouched = {p.name: os.stat(p).st_mtime_ns for p in first.iterdir()}
    _flip_byte(second / "weights.npz")
    damaged_bytes = (second / "weights.npz").read_bytes()
    code, out = _run_cli(*seeds)
    assert code == 0, out
    assert [r["reused"] for r in _json(out)["runs"]] == [True, False]    # only the damaged one trains
    assert "weights.npz does not match the checksum" in _note(out, second)
    _retrained_equal(original, _tree(second))                                # trained again: the same model
    assert {p.name: os.stat(p).st_mtime_ns for p in first.iterdir()} == untouched
    kept = _set_aside(tmp_path / "models", second.name)
    assert (kept / "weights.npz").read_bytes() == damaged_bytes              # nothing lost
    assert _folders(tmp_path / "models") == {first.name, second.name}


def _retrained_equal(before: dict[str, bytes], after: dict[str, bytes]) -> None:
    """The same files, but for provenance (wall time) in config.json and metrics' timings."""
    assert set(after) == set(before)
    for name in ("weights.npz", "loss_trace.npz"):
        if name in before:
            assert after[name] == before[name], name
    old, new = json.loads(before["metrics.json"]), json.loads(after["metrics.json"])
    assert {k: new[k] for k in ("train_accuracy", "test_accuracy")} == {k: old[k] for k in ("train_accuracy",
                                                                                              "test_accuracy")}


@pytest.mark.slow
def test_attack_trains_a_damaged_target_again_from_its_config(tmp_path):
    folder = _train(tmp_path)
    original = _tree(folder)
    _flip_byte(folder / "weights.npz", 0.3)
    code, out = _run_cli("attack", "--target", "mlp", "--attack", "lira", "--pool-size", "4",
                         "--workdir", str(tmp_path))
    assert code == 0, out
    assert "weights.npz" in _note(out, folder)
    _retrained_equal(original, _tree(folder))
    assert (_set_aside(tmp_path / "models", folder.name) / "weights.npz").is_file()
    assert (tmp_path / "attacks" / folder.name / "scores.npz").is_file()


@pytest.mark.parametrize("damaged", ["canary", "reference"])
@pytest.mark.slow
def test_a_damaged_canary_or_reference_model_is_trained_again_and_the_others_reused(tmp_path, damaged):
    folder = _train(tmp_path)
    first = "one-run" if damaged == "canary" else "lira"
    code, out = _run_cli("attack", "--target", "mlp", "--attack", first, "--pool-size", "4", "--workdir", str(tmp_path))
    assert code == 0, out
    shutil.rmtree(tmp_path / "attacks")                    # the pool's logits and the attacks are gone, ...
    bad = sorted((tmp_path / "models").glob(f"{damaged}-*"))[-1]
    original = _tree(bad)
    _flip_byte(bad / "metrics.json", 0.5)                  # ... and a model they need is damaged
    others = {p.name: _tree(p) for p in (tmp_path / "models").iterdir()
              if not p.name.startswith(".") and p != bad}
    code, out = _run_cli("attack", "--target", folder.name, "--attack", f"shadow,{first}", "--pool-size", "4",
                         "--workdir", str(tmp_path))
    assert code == 0, out
    assert "metrics.json" in _note(out, bad)
    _retrained_equal(original, _tree(bad))
    assert {n: _tree(tmp_path / "models" / n) for n in others} == others     # reused, untouched
    assert (_set_aside(tmp_path / "models", bad.name) / "metrics.json").is_file()


def test_a_damaged_pool_is_named_and_computed_again_from_its_models(tmp_path, data_cache, tiny):
    ws = Workspace(tmp_path).ensure_writable()
    cfg = tiny(epochs=2)
    pool = ensure_pool(cfg, 4, ws, data_cache, CPU)
    original = (pool.path / "outputs.npz").read_bytes()
    _flip_byte(pool.path / "outputs.npz", 0.9)
    before = _tree(ws.models)
    with pytest.raises(DamagedArtifactError, match=f"pool folder {pool.path} is damaged: outputs.npz"):
        ensure_pool(cfg, 4, ws, data_cache, CPU)           # the library: refused, named
    target = ensure_model(cfg, ws, data_cache, CPU)
    code, out = _run_cli("attack", "--target", target.name, "--attack", "lira", "--pool-size", "4",
                         "--workdir", str(tmp_path))
    assert code == 0, out                                  # the command: set aside, computed again
    assert "outputs.npz" in _note(out, pool.path)
    assert (pool.path / "outputs.npz").read_bytes() == original
    assert (_set_aside(pool.path.parent, pool.path.name) / "outputs.npz").is_file()
    assert {k: v for k, v in _tree(ws.models).items() if k in before} == before


@pytest.mark.slow
def test_a_damaged_earlier_attack_folder_is_named_by_report_and_computed_again_by_attack(tmp_path):
    folder = _train(tmp_path)
    code, out = _run_cli("attack", "--target", "mlp", "--workdir", str(tmp_path))
    assert code == 0, out
    attack = tmp_path / "attacks" / folder.name
    _flip_byte(attack / "scores.npz", 0.5)
    code, out = _run_cli("report", "--workdir", str(tmp_path))
    assert code == 0 and f"attack folder {attack} is damaged: scores.npz" in out
    code, out = _run_cli("attack", "--target", "mlp", "--attack", "shadow,loss,one-run", "--workdir", str(tmp_path))
    assert code == 0, out
    assert "scores.npz" in _note(out, attack)
    assert verify_folder(attack, "attack") and (_set_aside(attack.parent, attack.name) / "scores.npz").is_file()
    code, out = _run_cli("report", "--workdir", str(tmp_path))
    assert code == 0 and "is damaged" not in out and "skipped" not in out


# -- folders written before manifests ---------------------------------------------------------

@pytest.mark.slow
def test_a_folder_without_manifest_is_reused_when_its_weights_load(tmp_path):
    folder = _train(tmp_path)
    (folder / MANIFEST).unlink()
    code, out = _run_cli(*TRAIN, "--workdir", str(tmp_path), "--json")
    assert code == 0, out
    assert _json(out)["reused"] is True
    assert (folder / MANIFEST).is_file()                   # verified, then migrated: checked from now on
    assert "1 model folder in" in out and "now carry a manifest" in out  # with a note
    code, out = _run_cli("attack", "--target", "mlp", "--workdir", str(tmp_path))
    assert code == 0, out
    assert (tmp_path / "attacks" / folder.name / MANIFEST).is_file()   # what this version writes has one


def test_a_folder_without_manifest_whose_weights_do_not_load_is_set_aside_and_trained_again(tmp_path):
    folder = _train(tmp_path)
    (folder / MANIFEST).unlink()
    raw = (folder / "weights.npz").read_bytes()
    (folder / "weights.npz").write_bytes(raw[: len(raw) // 2])
    code, out = _run_cli(*TRAIN, "--workdir", str(tmp_path), "--json")
    assert code == 0, out
    assert "weights" in _note(out, folder) and _json(out)["reused"] is False
    assert (folder / "weights.npz").read_bytes() == raw and verify_folder(folder, "model")
    assert (_set_aside(tmp_path / "models", folder.name) / "weights.npz").stat().st_size == len(raw) // 2


# -- a damaged config.json (item 5) ----------------------------------------------------------

def test_attack_names_a_model_folder_whose_config_is_truncated(tmp_path):
    folder = _train(tmp_path)
    _train(tmp_path, "--kappa", "1")
    config = folder / "config.json"
    config.write_bytes(config.read_bytes()[:40])
    for target in ("mlp", folder.name):
        code, out = _run_cli("attack", "--target", target, "--workdir", str(tmp_path))
        assert code == 2
        line = _one_line_error(out)
        assert f"model folder {folder} is damaged: config.json is not valid JSON" in line
        assert "without its settings attack cannot train it again" in line and "no trained" not in line
    assert not (tmp_path / "attacks").exists() or _folders(tmp_path / "attacks") == set()
    assert (folder / "config.json").stat().st_size == 40               # refused: left where it is
    code, out = _run_cli(*TRAIN, "--workdir", str(tmp_path))   # the settings given again: trained again
    assert code == 0 and "config.json is not valid JSON" in _note(out, folder)
    assert verify_folder(folder, "model")


@pytest.mark.slow
def test_report_warns_about_the_damaged_model_folder_and_keeps_the_rest(tmp_path):
    plain = _train(tmp_path)
    noisy = _train(tmp_path, "--kappa", "1")
    code, out = _run_cli("attack", "--target", "mlp", "--workdir", str(tmp_path))
    assert code == 0, out
    (plain / "config.json").write_text('{"schema": 1, "model": ')
    code, out = _run_cli("report", "--workdir", str(tmp_path), "--json")
    assert code == 0, out
    warnings = [line for line in out.splitlines() if "damaged" in line]
    assert len(warnings) == 1, out
    assert f"model folder {plain} is damaged: config.json" in warnings[0] and "attack folder" not in warnings[0]
    doc = _json(out)
    assert doc["skipped"] == [plain.name]
    assert {r["target_run"] for r in doc["table"]} == {noisy.name}


@pytest.mark.slow
def test_audit_sets_a_damaged_model_aside_before_any_job_runs_and_trains_only_it_again(tmp_path):
    audit = ("audit", "--dataset", "digits", "--kappas", "1", "--sigmas", "none", "--epochs", "2",
             "--workdir", str(tmp_path))
    code, out = _run_cli(*audit, "--attacks", "shadow")
    assert code == 0, out
    table = (tmp_path / "reports" / "tradeoff.csv").read_text()
    shadow = next((tmp_path / "models").glob("shadow-mlp-digits-k1-*"))
    original = _tree(shadow)
    _flip_byte(shadow / "weights.npz", 0.2)
    others = {p.name: _tree(p) for p in (tmp_path / "models").iterdir() if not p.name.startswith(".") and p != shadow}
    code, out = _run_cli(*audit, "--attacks", "shadow")
    assert code == 0, out
    assert "weights.npz" in _note(out, shadow)
    _retrained_equal(original, _tree(shadow))
    assert {n: _tree(tmp_path / "models" / n) for n in others} == others
    assert _rows((tmp_path / "reports" / "tradeoff.csv").read_text()) == _rows(table)   # the same numbers


def _rows(text: str) -> list[dict[str, str]]:
    """A trade-off table's rows but for their wall-time column."""
    return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in csv.DictReader(io.StringIO(text))]
