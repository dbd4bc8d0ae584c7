"""Artifact integrity: every committed folder carries a manifest of checksums; a reused folder
that no longer matches it (or whose config.json cannot be read) is refused at once, naming
the folder and the way out, before anything is trained."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

import privaudit.files.integrity as integrity
from privaudit.errors import ArtifactError, DamagedArtifactError
from privaudit.executor.bundle import pack, unpack
from privaudit.files.integrity import MANIFEST, verify_folder
from privaudit.pipeline.pools import ensure_pool
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace

from cli_helpers import run_cli_joined as _run_cli

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

def test_train_refuses_a_model_folder_with_a_flipped_byte(tmp_path):
    folder = _train(tmp_path)
    _flip_byte(folder / "weights.npz")
    before = _tree(tmp_path / "models")
    code, out = _run_cli(*TRAIN, "--workdir", str(tmp_path))
    assert code == 2
    line = _one_line_error(out)
    assert f"model folder {folder} is damaged" in line
    assert "weights.npz does not match the checksum" in line and "delete the folder and rerun" in line
    assert _tree(tmp_path / "models") == before            # neither reused nor silently retrained over


@pytest.mark.slow
def test_attack_with_a_damaged_target_fails_before_training_anything(tmp_path):
    folder = _train(tmp_path)
    _flip_byte(folder / "weights.npz", 0.3)
    models = _folders(tmp_path / "models")
    for attacks in ("lira", "shadow,lira,one-run"):
        code, out = _run_cli("attack", "--target", "mlp", "--attack", attacks, "--pool-size", "4",
                             "--workdir", str(tmp_path))
        assert code == 2
        line = _one_line_error(out)
        assert f"model folder {folder} is damaged" in line and "weights.npz" in line and "delete" in line
        assert _folders(tmp_path / "models") == models     # no shadow, reference or canary model trained
        assert not (tmp_path / "attacks" / folder.name).exists()


@pytest.mark.parametrize("damaged", ["canary", "reference"])
@pytest.mark.slow
def test_a_damaged_canary_or_reference_model_fails_before_the_shadow_trains(tmp_path, damaged):
    """The shadow model trains first; a damaged model needed later is found before it."""
    folder = _train(tmp_path)
    first = "one-run" if damaged == "canary" else "lira"
    code, out = _run_cli("attack", "--target", "mlp", "--attack", first, "--pool-size", "4", "--workdir", str(tmp_path))
    assert code == 0, out
    shutil.rmtree(tmp_path / "attacks")                    # the pool's logits and the attacks are gone, ...
    bad = sorted((tmp_path / "models").glob(f"{damaged}-*"))[-1]
    _flip_byte(bad / "metrics.json", 0.5)                  # ... and a model they need is damaged
    models = _folders(tmp_path / "models")
    code, out = _run_cli("attack", "--target", folder.name, "--attack", f"shadow,{first}", "--pool-size", "4",
                         "--workdir", str(tmp_path))
    assert code == 2
    assert f"model folder {bad} is damaged: metrics.json" in _one_line_error(out)
    assert _folders(tmp_path / "models") == models         # no shadow model trained


def test_a_damaged_pool_is_named_and_its_models_are_not_retrained(tmp_path, data_cache, tiny):
    ws = Workspace(tmp_path).ensure_writable()
    cfg = tiny(epochs=2)
    pool = ensure_pool(cfg, 4, ws, data_cache, CPU)
    _flip_byte(pool.path / "outputs.npz", 0.9)
    before = _tree(ws.models)
    with pytest.raises(DamagedArtifactError, match=f"pool folder {pool.path} is damaged: outputs.npz"):
        ensure_pool(cfg, 4, ws, data_cache, CPU)
    target = ensure_model(cfg, ws, data_cache, CPU)
    code, out = _run_cli("attack", "--target", target.name, "--attack", "lira", "--pool-size", "4",
                         "--workdir", str(tmp_path))
    assert code == 2 and f"pool folder {pool.path} is damaged" in _one_line_error(out)
    assert {k: v for k, v in _tree(ws.models).items() if k in before} == before


@pytest.mark.slow
def test_a_damaged_earlier_attack_folder_is_named(tmp_path):
    folder = _train(tmp_path)
    code, out = _run_cli("attack", "--target", "mlp", "--workdir", str(tmp_path))
    assert code == 0, out
    attack = tmp_path / "attacks" / folder.name
    _flip_byte(attack / "scores.npz", 0.5)
    code, out = _run_cli("attack", "--target", "mlp", "--attack", "shadow,loss,one-run", "--workdir", str(tmp_path))
    assert code == 2 and f"attack folder {attack} is damaged: scores.npz" in _one_line_error(out)
    code, out = _run_cli("report", "--workdir", str(tmp_path))
    assert code == 0 and f"attack folder {attack} is damaged: scores.npz" in out


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


def test_a_folder_without_manifest_whose_weights_do_not_load_is_refused(tmp_path):
    folder = _train(tmp_path)
    (folder / MANIFEST).unlink()
    raw = (folder / "weights.npz").read_bytes()
    (folder / "weights.npz").write_bytes(raw[: len(raw) // 2])
    for args in (TRAIN, ("attack", "--target", "mlp", "--attack", "lira", "--pool-size", "4")):
        models = _folders(tmp_path / "models")
        code, out = _run_cli(*args, "--workdir", str(tmp_path))
        assert code == 2
        line = _one_line_error(out)
        assert f"model folder {folder} is damaged" in line and "weights" in line and "delete" in line
        assert _folders(tmp_path / "models") == models


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
        assert "delete the folder and rerun" in line and "no trained" not in line
    assert not (tmp_path / "attacks").exists() or _folders(tmp_path / "attacks") == set()
    code, out = _run_cli(*TRAIN, "--workdir", str(tmp_path))   # the same settings: refused, not retrained over
    assert code == 2 and f"model folder {folder} is damaged: config.json" in _one_line_error(out)


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
def test_audit_checks_every_reused_folder_before_any_job_runs(tmp_path):
    audit = ("audit", "--dataset", "digits", "--kappas", "1", "--sigmas", "none", "--epochs", "2",
             "--workdir", str(tmp_path))
    code, out = _run_cli(*audit, "--attacks", "shadow")
    assert code == 0, out
    shadow = next((tmp_path / "models").glob("shadow-mlp-digits-k1-*"))
    _flip_byte(shadow / "weights.npz", 0.2)
    shutil.rmtree(tmp_path / "attacks")
    models = _folders(tmp_path / "models")
    code, out = _run_cli(*audit, "--attacks", "shadow,lira", "--pool-size", "4")
    assert code == 2
    assert f"model folder {shadow} is damaged: weights.npz" in _one_line_error(out)
    assert _folders(tmp_path / "models") == models         # no reference model trained first
