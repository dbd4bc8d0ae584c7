"""Workspace: exact save/load, config-keyed reuse, refusal of damaged or hostile files,
interrupted saves and atomic writes."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import privaudit.pipeline.workspace as workspace_mod
from privaudit.errors import ArtifactError
from privaudit.files import atomic
from privaudit.files.atomic import owner_tag, read_json, write_bytes, write_json, write_text
from privaudit.files.locks import LOCK_FOLDER
from privaudit.pipeline.workspace import Workspace, load_weights
from privaudit.training.results import predict_logits, role_data

CPU = torch.device("cpu")


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes), hidden ones included."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def saved(trained_mg, tmp_path):
    """A private copy of the session's trained model folder: (workspace, config, weights path)."""
    import shutil

    ws_src, cfg, run = trained_mg
    ws = Workspace(tmp_path / "ws").ensure_writable()
    shutil.copytree(ws_src.model_dir(run.name), ws.model_dir(run.name))
    return ws, cfg, ws.model_dir(run.name) / "weights.npz"


# -- save and load --------------------------------------------------------------------------

def test_save_then_load_gives_identical_logits(trained_mg, digits, tmp_path):
    ws_src, cfg, run = trained_mg
    loaded = ws_src.load_model(run.name, digits.input_shape, digits.num_classes)
    assert loaded.config == cfg and loaded.name == run.name
    assert loaded.metrics["test_accuracy"] == run.metrics["test_accuracy"]
    rd = role_data(cfg, digits, CPU, normaliser=loaded.normaliser)
    logits = predict_logits(loaded.model, rd.x_out)
    # save again into a fresh workspace and load: bit-identical logits and normaliser
    ws = Workspace(tmp_path / "again").ensure_writable()
    path = ws.save_model(cfg, loaded.model, loaded.normaliser, {"x": 1}, {"device": "cpu"})
    assert path == ws.model_dir(cfg.run_name) and path.name == run.name
    again = ws.load_model(cfg.run_name, digits.input_shape, digits.num_classes)
    assert torch.equal(predict_logits(again.model, rd.x_out), logits)
    np.testing.assert_array_equal(again.normaliser.mean, loaded.normaliser.mean)
    np.testing.assert_array_equal(again.normaliser.std, loaded.normaliser.std)
    for k, v in loaded.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[k], v)
    saved_cfg = json.loads((path / "config.json").read_text())
    assert saved_cfg["config_hash"] == cfg.config_hash and saved_cfg["run_name"] == cfg.run_name
    assert saved_cfg["provenance"] == {"device": "cpu"}


@pytest.mark.parametrize("model", ["cnn-improved", "cnn"])
def test_save_load_round_trip_with_buffers(model, digits, tiny, tmp_path):
    """BatchNorm running statistics (buffers) and integer counters survive the round trip."""
    from privaudit.data import Normaliser
    from privaudit.models import build_model

    torch.manual_seed(0)
    cfg = tiny(model=model)
    net = build_model(model, (1, 8, 8), 10, width=cfg.model.width)
    net.train()
    net(torch.randn(16, 1, 8, 8))            # move the BatchNorm running statistics
    net.eval()
    norm = Normaliser.fit(digits.x[:100])
    ws = Workspace(tmp_path).ensure_writable()
    ws.save_model(cfg, net, norm, {}, {})
    again = ws.load_model(cfg.run_name, (1, 8, 8))
    x = torch.randn(8, 1, 8, 8)
    assert torch.equal(predict_logits(again.model, x), predict_logits(net, x))
    for k, v in net.state_dict().items():
        got = again.model.state_dict()[k]
        assert got.dtype == v.dtype and torch.equal(got, v), k


def test_has_model_only_for_exactly_the_same_config(trained_mg, tiny):
    ws, cfg, run = trained_mg
    assert ws.has_model(cfg)
    assert not ws.has_model(cfg.as_shadow())
    for other in (tiny(kappa=1.0, part_size=80, width=64, epochs=9, seed=3),
                  tiny(kappa=0.9, part_size=80, width=64, epochs=8, seed=3),
                  tiny(kappa=1.0, part_size=80, width=64, epochs=8, seed=4)):
        assert other != cfg and not ws.has_model(other)
    assert run.name in ws.model_names("target") and ws.model_names("shadow") == []


def test_a_renamed_or_edited_model_folder_is_not_reused(saved, tiny):
    ws, cfg, _ = saved
    folder = ws.model_dir(cfg.run_name)
    # a folder renamed to another config's name is refused, never reused
    other = tiny(epochs=99)
    os.rename(folder, ws.model_dir(other.run_name))
    assert not ws.has_model(other) and not ws.has_model(cfg)
    with pytest.raises(ArtifactError, match="renamed or edited"):
        ws.read_model_config(other.run_name)
    os.rename(ws.model_dir(other.run_name), folder)
    assert ws.has_model(cfg)
    # an edited config.json (hash no longer matches the folder name)
    raw = json.loads((folder / "config.json").read_text())
    raw["train"]["epochs"] = 1
    (folder / "config.json").write_text(json.dumps(raw))
    assert not ws.has_model(cfg)
    (folder / "config.json").write_text("{not json")   # damaged, not edited: refused, never retrained over
    with pytest.raises(ArtifactError, match="damaged: config.json is not valid JSON"):
        ws.has_model(cfg)
    with pytest.raises(ArtifactError):
        ws.read_model_config(cfg.run_name)


# -- hostile or damaged weights -------------------------------------------------------------

class _MakesADirectory:
    """Unpickling this object creates a folder: the side effect the loader must never run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def _load(path: Path, cfg) -> None:
    load_weights(path, cfg, (1, 8, 8), 10)


def test_weights_load_from_the_untouched_copy(saved):
    """The baseline for the refusals below: the unmodified copy loads."""
    ws, cfg, path = saved
    model, norm = load_weights(path, cfg, (1, 8, 8), 10)
    assert norm.mean.shape == (1, 8, 8) and not model.training


def test_random_bytes_are_refused(saved):
    ws, cfg, path = saved
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ArtifactError, match="weights"):
        _load(path, cfg)
    with pytest.raises(ArtifactError):
        ws.load_model(cfg.run_name, (1, 8, 8))


def test_truncated_weights_are_refused(saved):
    ws, cfg, path = saved
    raw = path.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 10, 100, 0):
        path.write_bytes(raw[:cut])
        with pytest.raises(ArtifactError):
            _load(path, cfg)


def test_corrupted_member_of_the_zip_is_refused(saved):
    """Bytes flipped inside one array (a CRC mismatch), the archive otherwise intact."""
    ws, cfg, path = saved
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as zf:
        info = zf.getinfo("norm/mean.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    raw[start:start + 8] = b"\xff" * 8
    path.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError):
        _load(path, cfg)


def test_foreign_npz_is_refused(saved):
    ws, cfg, path = saved
    np.savez(path, a=np.zeros(3), b=np.ones((2, 2)))
    with pytest.raises(ArtifactError, match="not a privaudit weights file"):
        _load(path, cfg)


def test_npy_instead_of_npz_is_refused(saved):
    """A plain ``.npy`` array saved under the weights name is foreign, not a crash."""
    ws, cfg, path = saved
    with open(path, "wb") as fh:
        np.save(fh, np.zeros((4, 4), dtype=np.float32))
    with pytest.raises(ArtifactError):
        _load(path, cfg)


def test_npz_whose_array_header_lies_about_its_size_is_refused(saved):
    """A 200-byte member whose .npy header claims 10^12 float64 values (7 TiB): refused as a
    damaged file, not a MemoryError escaping from numpy."""
    from numpy.lib import format as npformat

    ws, cfg, path = saved
    member = io.BytesIO()
    npformat.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 12,)})
    member.write(b"\0" * 64)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("norm/mean.npy", member.getvalue())
        zf.writestr("norm/std.npy", member.getvalue())
    with pytest.raises(ArtifactError):
        _load(path, cfg)


def test_weights_of_another_architecture_are_refused(saved, tiny):
    ws, cfg, path = saved
    with pytest.raises(ArtifactError, match="does not match"):
        load_weights(path, tiny(model="cnn"), (1, 8, 8), 10)


def _rewrite(path: Path, change) -> None:
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    change(arrays)
    np.savez(path, **arrays)


@pytest.mark.parametrize("what", ["state-shape", "norm-shape", "extra-layer", "missing-layer", "string-dtype",
                                  "zero-std"])
def test_npz_with_wrong_shapes_or_keys_is_refused(saved, what):
    ws, cfg, path = saved

    def change(a):
        key = sorted(k for k in a if k.startswith("state/"))[0]
        if what == "state-shape":
            a[key] = np.zeros(a[key].shape[:-1] + (a[key].shape[-1] + 1,), dtype=np.float32)
        elif what == "norm-shape":
            a["norm/mean"] = np.zeros((3, 8, 8), dtype=np.float32)
        elif what == "extra-layer":
            a["state/9.weight"] = np.zeros((3, 3), dtype=np.float32)
        elif what == "missing-layer":
            del a[key]
        elif what == "string-dtype":
            a[key] = np.full(a[key].shape, "x")
        elif what == "zero-std":
            a["norm/std"] = np.zeros_like(a["norm/std"])

    _rewrite(path, change)
    with pytest.raises(ArtifactError):
        _load(path, cfg)


@pytest.mark.parametrize("where", ["state", "norm", "extra"])
def test_npz_holding_a_pickled_object_is_refused_and_not_executed(saved, tmp_path, where):
    ws, cfg, path = saved
    marker = tmp_path / f"pwned-{where}"
    evil = np.empty(1, dtype=object)
    evil[0] = _MakesADirectory(marker)

    def change(a):
        if where == "state":
            a[sorted(k for k in a if k.startswith("state/"))[0]] = evil
        elif where == "norm":
            a["norm/mean"] = evil
        else:
            a["aaa_evil"] = evil

    _rewrite(path, change)
    with zipfile.ZipFile(path) as zf:   # the pickle really is in the file
        assert any(b"mkdir" in zf.read(n) for n in zf.namelist())
    with pytest.raises(ArtifactError):
        _load(path, cfg)
    with pytest.raises(ArtifactError):
        ws.load_model(cfg.run_name, (1, 8, 8))
    assert not marker.exists()


# -- interrupted writes ---------------------------------------------------------------------

class _Boom(RuntimeError):
    pass


def _failing_write_json(fail_on: str):
    """write_json that writes metrics.json, then dies on ``fail_on`` (mid-way through a save)."""
    real = workspace_mod.write_json

    def fake(path, obj):
        if Path(path).name == fail_on:
            raise _Boom(f"interrupted while writing {path}")
        real(path, obj)

    return fake


@pytest.mark.parametrize("exc", [_Boom, KeyboardInterrupt])
def test_interrupted_save_leaves_no_model_folder(trained_mg, tmp_path, monkeypatch, exc):
    _, cfg, _ = trained_mg
    loaded = trained_mg[0].load_model(cfg.run_name, (1, 8, 8))
    ws = Workspace(tmp_path).ensure_writable()

    def fake(path, obj):
        if Path(path).name == "config.json":
            raise exc("interrupted")
        atomic.write_json(path, obj)

    monkeypatch.setattr(workspace_mod, "write_json", fake)
    with pytest.raises(exc):
        ws.save_model(cfg, loaded.model, loaded.normaliser, {"a": 1}, {})
    assert not ws.model_dir(cfg.run_name).exists()
    assert list(ws.models.iterdir()) == []          # no .partial-* (nor any other) folder
    assert not ws.has_model(cfg)


def test_interrupted_save_keeps_an_earlier_model_untouched(saved, monkeypatch):
    ws, cfg, _ = saved
    folder = ws.model_dir(cfg.run_name)
    before = _tree(ws.models)
    loaded = ws.load_model(cfg.run_name, (1, 8, 8))
    monkeypatch.setattr(workspace_mod, "write_json", _failing_write_json("config.json"))
    with pytest.raises(_Boom):
        ws.save_model(cfg, loaded.model, loaded.normaliser, {"new": True}, {})
    assert _tree(ws.models) == before
    assert sorted(p.name for p in ws.models.iterdir()) == [folder.name]
    assert ws.has_model(cfg)


def test_save_interrupted_between_the_two_renames_keeps_the_earlier_model(saved, monkeypatch):
    """Replacing an existing model moves it aside, then renames the new folder into place.
    If the second rename fails (or Ctrl-C lands between the two), the earlier model must be
    back under its name, not stranded in a hidden ``.old-*`` folder."""
    ws, cfg, _ = saved
    before = _tree(ws.model_dir(cfg.run_name))
    loaded = ws.load_model(cfg.run_name, (1, 8, 8))
    real_replace = os.replace

    def replace(src, dst):
        if Path(src).name.startswith(".partial-"):
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(workspace_mod.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        ws.save_model(cfg, loaded.model, loaded.normaliser, {"new": True}, {})
    monkeypatch.undo()
    assert ws.has_model(cfg)
    assert _tree(ws.model_dir(cfg.run_name)) == before
    assert sorted(p.name for p in ws.models.iterdir() if p.name != LOCK_FOLDER) == [cfg.run_name]  # no .partial-*


def test_stale_partial_folders_of_dead_processes_are_cleaned(saved):
    ws, cfg, _ = saved
    dead_pid = 2 ** 22 + 12345    # above the usual pid_max: no such process
    stale = ws.models / f".partial-{dead_pid}-x-abc"
    live = ws.models / f".partial-{os.getpid()}-y-abc"
    host = owner_tag().split("@", 1)[1]
    stale_here = ws.models / f".partial-{dead_pid}@{host}-x-abc"      # the names folders get now
    other_host = ws.models / f".partial-{dead_pid}@elsewhere-x-abc"   # a workspace shared with another machine
    for folder in (stale, live, stale_here, other_host):
        folder.mkdir()
    loaded = ws.load_model(cfg.run_name, (1, 8, 8))
    ws.save_model(cfg, loaded.model, loaded.normaliser, {}, {})
    assert not stale.exists() and live.exists()
    assert not stale_here.exists() and other_host.exists()            # another machine's pid means nothing here
    assert ws.model_names() == [cfg.run_name]


def test_write_text_never_leaves_a_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "out" / "report.txt"
    write_text(path, "old content\n")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    with pytest.raises(ArtifactError, match="No space left"):
        write_text(path, "new content that never lands\n" * 1000)
    assert path.read_text() == "old content\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.txt"]

    def interrupted_fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt):
        write_bytes(tmp_path / "out" / "fresh.bin", b"x" * 10_000)
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.txt"]
    monkeypatch.undo()
    # a writer that raises (non-string text) leaves nothing either
    with pytest.raises(TypeError):
        write_text(tmp_path / "out" / "bad.txt", object())
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.txt"]


def test_json_round_trip_and_damage(tmp_path):
    path = tmp_path / "m.json"
    write_json(path, {"b": np.float32(0.5), "a": [np.int64(3), float("nan")], "p": Path("x/y")})
    assert read_json(path) == {"a": [3, None], "b": 0.5, "p": "x/y"}
    assert path.read_text().index('"a"') < path.read_text().index('"b"')   # keys sorted
    with pytest.raises(TypeError):
        write_json(tmp_path / "bad.json", {"x": object()})
    assert not (tmp_path / "bad.json").exists()
    path.write_text("{trunc")
    with pytest.raises(ArtifactError):
        read_json(path)
    with pytest.raises(ArtifactError, match="missing"):
        read_json(tmp_path / "nope.json")


# -- writability ----------------------------------------------------------------------------

def test_ensure_writable_creates_the_three_folders(tmp_path):
    ws = Workspace(tmp_path / "deep" / "ws").ensure_writable()
    assert all(p.is_dir() for p in (ws.models, ws.attacks, ws.reports))
    assert all(list(p.iterdir()) == [] for p in (ws.models, ws.attacks, ws.reports))


def test_ensure_writable_under_a_regular_file_is_an_artifact_error(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ArtifactError, match="not writable"):
        Workspace(tmp_path / "file" / "ws").ensure_writable()


def test_ensure_writable_on_a_read_only_folder_is_an_artifact_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        try:                       # root (and some file systems) ignore the mode bits
            (ro / "probe").write_text("x")
            (ro / "probe").unlink()
            pytest.skip("chmod does not prevent writing here (running as root?)")
        except PermissionError:
            pass
        with pytest.raises(ArtifactError, match="not writable"):
            Workspace(ro / "ws").ensure_writable()
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_artifacts_get_the_permissions_of_any_file_the_user_writes(tmp_path, mask):
    """Atomic writes and committed folders go through tempfile, which makes them private
    (0600, 0700): they end with 0666 / 0777 less the umask, as open() and mkdir() would give,
    so a colleague or a web server reads a report and a model folder as any other file."""
    old = os.umask(mask)
    try:
        write_json(tmp_path / "reports" / "a.json", {"x": 1})
        ws = Workspace(tmp_path / "ws").ensure_writable()

        def fill(folder: Path) -> None:
            write_text(folder / "config.json", "{}")
            (folder / "plain.txt").write_text("made by open()")

        done = ws.commit_folder(ws.root / "models", "m", fill)
    finally:
        os.umask(old)
    assert (tmp_path / "reports" / "a.json").stat().st_mode & 0o777 == 0o666 & ~mask
    assert done.stat().st_mode & 0o777 == 0o777 & ~mask
    assert (done / "config.json").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (done / "plain.txt").stat().st_mode & 0o777 == (done / "config.json").stat().st_mode & 0o777
    assert atomic.umask() == old
