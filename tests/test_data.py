"""Data: the CIFAR-10 pickle loader (on a tiny fixture), the ML-Leaks split, the normaliser."""

from __future__ import annotations

import io
import os
import pickle
import struct

import numpy as np
import pytest
import torch

from privaudit.data import DATA_DIR_ENV, Normaliser, load_dataset, split_parts
from privaudit.data.loaders import load_cifar10
from privaudit.errors import ConfigError, DataError
from privaudit.training.results import role_data

N_PER_BATCH = 8
BATCHES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


# -- a CIFAR-10 fixture in the original layout ----------------------------------------------

class _Py2Pickler(pickle._Pickler):
    """Writes what Python 2's cPickle (protocol 2) wrote for the original CIFAR-10 batches:
    byte strings as BINSTRING (no ``_codecs.encode``) and arrays through
    ``numpy.core.multiarray._reconstruct``."""

    dispatch = pickle._Pickler.dispatch.copy()

    def _save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch[bytes] = _save_py2_str

    def save_global(self, obj, name=None):
        if getattr(obj, "__name__", None) == "_reconstruct":
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n")
            self.memoize(obj)
            return
        super().save_global(obj, name)


def _batch_content(index: int) -> tuple[np.ndarray, list[int]]:
    """Batch ``index`` (0-4 train, 5 test): random pixels, first byte = 10*index + row."""
    rng = np.random.default_rng(100 + index)
    data = rng.integers(0, 256, size=(N_PER_BATCH, 3072), dtype=np.uint8)
    data[:, 0] = 10 * index + np.arange(N_PER_BATCH)
    labels = [(index + j) % 10 for j in range(N_PER_BATCH)]
    return data, labels


def _batch_bytes(index: int) -> bytes:
    data, labels = _batch_content(index)
    label = b"testing batch 1 of 1" if index == 5 else b"training batch %d of 5" % (index + 1)
    batch = {b"batch_label": label, b"labels": labels, b"data": data,
             b"filenames": [b"img_%d_%d.png" % (index, j) for j in range(N_PER_BATCH)]}
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(batch)
    return buf.getvalue()


@pytest.fixture
def cifar_root(tmp_path):
    """``tmp_path/data/cifar-10-batches-py`` with five training batches and a test batch."""
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for i, name in enumerate(BATCHES):
        (folder / name).write_bytes(_batch_bytes(i))
    return folder


def _expected() -> tuple[np.ndarray, np.ndarray]:
    parts = [_batch_content(i) for i in range(6)]
    return np.concatenate([d for d, _ in parts]), np.concatenate([lab for _, lab in parts])


def test_fixture_has_the_original_layout(cifar_root):
    """The fixture itself: protocol 2, only numpy globals (as in the 2009 files)."""
    import pickletools

    raw = (cifar_root / "data_batch_1").read_bytes()
    assert raw[:2] == b"\x80\x02"
    globals_ = {arg for op, arg, _ in pickletools.genops(raw) if op.name == "GLOBAL"}
    assert globals_ == {"numpy.core.multiarray _reconstruct", "numpy ndarray", "numpy dtype"}


def test_load_cifar10_shape_order_layout_and_labels(cifar_root):
    images = load_cifar10(cifar_root.parent)
    flat, labels = _expected()
    assert images.name == "cifar10" and images.num_classes == 10
    assert images.x.shape == (6 * N_PER_BATCH, 3, 32, 32) and images.x.dtype == np.uint8
    assert images.input_shape == (3, 32, 32)
    # train batches 1-5 then the test batch, rows in file order
    assert images.x[:, 0, 0, 0].tolist() == [10 * i + j for i in range(6) for j in range(N_PER_BATCH)]
    np.testing.assert_array_equal(images.y, labels)
    assert images.y.dtype == np.int64
    # channel-major rows: [0:1024] red, [1024:2048] green, [2048:3072] blue, each row-major 32x32
    for k in (0, 13, 47):
        row = flat[k]
        np.testing.assert_array_equal(images.x[k, 0], row[:1024].reshape(32, 32))
        np.testing.assert_array_equal(images.x[k, 1], row[1024:2048].reshape(32, 32))
        np.testing.assert_array_equal(images.x[k, 2], row[2048:].reshape(32, 32))
        assert images.x[k, 1, 2, 3] == row[1024 + 2 * 32 + 3]
        assert images.x[k, 2, 31, 30] == row[2048 + 31 * 32 + 30]


def test_python3_protocol2_batch_loads(tmp_path):
    """The same batch dict re-saved by Python 3 with ``pickle.dump(..., protocol=2)`` (which
    writes bytes through ``_codecs.encode``) is still a CIFAR-10 batch and must load."""
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i, name in enumerate(BATCHES):
        data, labels = _batch_content(i)
        batch = {"batch_label": f"batch {i}", "labels": labels, "data": data,
                 "filenames": [b"img_%d.png" % j for j in range(N_PER_BATCH)]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh, protocol=2)
    images = load_cifar10(folder)
    np.testing.assert_array_equal(images.x.reshape(len(images.x), -1), _expected()[0])


def test_data_dir_may_be_the_parent_the_folder_or_the_env_var(cifar_root, monkeypatch, tmp_path):
    ref = load_cifar10(cifar_root.parent)
    for where in (cifar_root, str(cifar_root), cifar_root.parent):
        np.testing.assert_array_equal(load_cifar10(where).x, ref.x)
    monkeypatch.setenv(DATA_DIR_ENV, str(cifar_root.parent))
    np.testing.assert_array_equal(load_cifar10().x, ref.x)
    np.testing.assert_array_equal(load_dataset("cifar10").y, ref.y)
    monkeypatch.setenv(DATA_DIR_ENV, str(cifar_root))
    np.testing.assert_array_equal(load_cifar10(None).x, ref.x)
    # without the env var the default is ./data
    monkeypatch.delenv(DATA_DIR_ENV)
    monkeypatch.chdir(tmp_path)
    np.testing.assert_array_equal(load_cifar10().x, ref.x)


def test_missing_cifar10_names_the_three_ways_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for where in (tmp_path / "nowhere", None):
        with pytest.raises(DataError) as info:
            load_cifar10(where)
        msg = str(info.value)
        assert "`data_dir`" in msg and "`download`" in msg and "`dataset` digits" in msg


def test_missing_training_batch_is_a_data_error(cifar_root):
    (cifar_root / "data_batch_3").unlink()
    with pytest.raises(DataError, match="data_batch_3"):
        load_cifar10(cifar_root)


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class _EvilMkdir:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (str(self.path),))


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_malicious_batch_is_refused_and_not_executed(cifar_root, tmp_path, protocol):
    marker = tmp_path / "pwned"
    marker_dir = tmp_path / "pwned-dir"
    data, labels = _batch_content(0)
    evil = {"data": data, "labels": labels, "filenames": [_Evil(marker)], "batch_label": _EvilMkdir(marker_dir)}
    (cifar_root / "data_batch_1").write_bytes(pickle.dumps(evil, protocol=protocol))
    with pytest.raises(DataError, match="data_batch_1"):
        load_cifar10(cifar_root)
    assert not marker.exists() and not marker_dir.exists()


def test_truncated_batch_is_a_data_error(cifar_root):
    path = cifar_root / "test_batch"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DataError, match="test_batch"):
        load_cifar10(cifar_root)


@pytest.mark.parametrize("bad", ["wrong_width", "label_out_of_range", "label_count", "not_a_dict"])
def test_batch_with_a_wrong_layout_is_a_data_error(cifar_root, bad):
    data, labels = _batch_content(2)
    batch = {b"batch_label": b"x", b"labels": labels, b"data": data, b"filenames": []}
    if bad == "wrong_width":
        batch[b"data"] = data[:, :3000]
    elif bad == "label_out_of_range":
        batch[b"labels"] = [10] + labels[1:]
    elif bad == "label_count":
        batch[b"labels"] = labels[:-1]
    else:
        batch = [1, 2, 3]
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(batch)
    (cifar_root / "data_batch_3").write_bytes(buf.getvalue())
    with pytest.raises(DataError, match="data_batch_3"):
        load_cifar10(cifar_root)


def test_unknown_dataset_is_a_data_error():
    with pytest.raises(DataError, match="mnist"):
        load_dataset("mnist")


def test_digits_loader(digits):
    assert digits.x.shape == (1797, 1, 8, 8) and digits.x.dtype == np.uint8
    assert digits.y.shape == (1797,) and digits.y.dtype == np.int64
    assert digits.x.max() == 16 and digits.x.min() == 0
    assert sorted(np.unique(digits.y).tolist()) == list(range(10))


# -- the ML-Leaks split ---------------------------------------------------------------------

@pytest.mark.parametrize("n, part", [(1797, 449), (1797, 60), (400, 100), (8, 2)])
def test_split_four_disjoint_parts_of_the_given_size(n, part):
    s = split_parts(n, part, seed=7)
    parts = [s.target_in, s.target_out, s.shadow_in, s.shadow_out]
    assert [len(p) for p in parts] == [part] * 4
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == 4 * part
    assert allidx.min() >= 0 and allidx.max() < n
    assert s.for_role("target") == (s.target_in, s.target_out)
    assert s.for_role("shadow") == (s.shadow_in, s.shadow_out)
    with pytest.raises(ValueError):
        s.for_role("attacker")


def test_split_is_reproducible_and_seed_dependent():
    a, b, c = split_parts(1797, 100, 1), split_parts(1797, 100, 1), split_parts(1797, 100, 2)
    for name in ("target_in", "target_out", "shadow_in", "shadow_out"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert not np.array_equal(getattr(a, name), getattr(c, name))
    # a pooled shuffle: the parts are not just consecutive blocks of the data
    assert not np.array_equal(np.sort(a.target_in), np.arange(a.target_in.min(), a.target_in.min() + 100))


def test_split_part_too_large_is_a_config_error():
    assert len(split_parts(1797, 449, 0).shadow_out) == 449  # 4 * 449 = 1796 fits
    with pytest.raises(ConfigError, match="`part_size` 450"):
        split_parts(1797, 450, 0)


# -- normalisation --------------------------------------------------------------------------

def test_normaliser_closed_form_and_std_floor():
    rng = np.random.default_rng(0)
    x = np.zeros((200, 1, 2, 2), dtype=np.uint8)
    x[:, 0, 0, 0] = 7                                   # constant: std 0 -> floor 1
    x[:, 0, 0, 1] = rng.integers(0, 2, 200)             # std about 0.5 -> floor 1
    x[:, 0, 1, 0] = rng.integers(0, 256, 200)           # std about 74 -> kept
    x[:, 0, 1, 1] = np.where(np.arange(200) % 2, 10, 0)  # mean 5, std exactly 5
    norm = Normaliser.fit(x)
    xf = x.astype(np.float64)
    np.testing.assert_allclose(norm.mean, xf.mean(0), rtol=1e-6)
    assert norm.std[0, 0, 0] == 1.0 and norm.std[0, 0, 1] == 1.0
    assert norm.std[0, 1, 1] == pytest.approx(5.0)
    assert norm.std[0, 1, 0] == pytest.approx(xf[:, 0, 1, 0].std(), rel=1e-6) and norm.std[0, 1, 0] > 50
    assert norm.mean.dtype == norm.std.dtype == np.float32 and norm.mean.shape == (1, 2, 2)
    z = norm(x)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z[:, 0, 0, 0], 0.0)
    np.testing.assert_allclose(z[:, 0, 1, 1], np.where(np.arange(200) % 2, 1.0, -1.0), rtol=1e-6)
    np.testing.assert_allclose(z, (xf - xf.mean(0)) / np.maximum(xf.std(0), 1.0), atol=1e-5)


@pytest.mark.parametrize("role", ["target", "shadow"])
def test_normaliser_statistics_come_from_the_models_own_training_part(digits, tiny, role):
    cfg = tiny(part_size=100, seed=5, role=role)
    rd = role_data(cfg, digits, torch.device("cpu"))
    split = split_parts(len(digits.y), 100, cfg.data.seed)
    members, nonmembers = split.for_role(role)
    x_in = digits.x[members].astype(np.float64)
    np.testing.assert_allclose(rd.normaliser.mean, x_in.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rd.normaliser.std, np.maximum(x_in.std(0), 1.0), rtol=1e-6)
    # the digits' blank border pixels are constant in the part: floored, not blown up
    assert (rd.normaliser.std == 1.0).any()
    np.testing.assert_array_equal(rd.y_in.numpy(), digits.y[members])
    np.testing.assert_array_equal(rd.y_out.numpy(), digits.y[nonmembers])
    np.testing.assert_allclose(rd.x_out.numpy(), rd.normaliser(digits.x[nonmembers]))
    # the members are standardised: per-pixel mean 0 (non-members are not, in general)
    np.testing.assert_allclose(rd.x_in.numpy().mean(0), 0.0, atol=1e-5)
    assert np.abs(rd.x_out.numpy().mean(0)).max() > 0.05


# -- the decoded-dataset cache (privaudit.data.cache) --------------------------------------------

def test_cache_is_written_once_then_memory_mapped(cifar_root, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    first = load_cifar10(cifar_root.parent)
    folders = list((tmp_path / "cache").glob("cifar10-*"))
    assert len(folders) == 1 and {p.name for p in folders[0].iterdir()} == {"x.npy", "y.npy", "meta.json"}
    second = load_cifar10(cifar_root.parent)
    assert isinstance(second.x, np.memmap) and not isinstance(first.x, np.memmap)
    np.testing.assert_array_equal(second.x, first.x)
    np.testing.assert_array_equal(second.y, first.y)


def test_cache_is_rebuilt_when_a_source_file_changes(cifar_root, tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    load_cifar10(cifar_root.parent)
    before = {p.name for p in (tmp_path / "cache").iterdir()}
    (cifar_root / "test_batch").write_bytes(_batch_bytes(0))  # other contents in the test batch
    st = (cifar_root / "test_batch").stat()
    os.utime(cifar_root / "test_batch", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    again = load_cifar10(cifar_root.parent)
    after = {p.name for p in (tmp_path / "cache").iterdir()}
    assert after != before and len(after) == 1  # the new cache replaced the old one
    np.testing.assert_array_equal(again.x[-N_PER_BATCH:], again.x[:N_PER_BATCH])  # the new test batch


def test_damaged_cache_is_refused_in_one_line_and_kept(cifar_root, tmp_path, monkeypatch):
    from privaudit.errors import DataError

    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    load_cifar10(cifar_root.parent)
    x_file = next((tmp_path / "cache").glob("cifar10-*/x.npy"))
    raw = bytearray(x_file.read_bytes())
    raw[-1] ^= 0xFF
    x_file.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"cache .* is damaged \(x.npy does not match its checksum\)") as exc:
        load_cifar10(cifar_root.parent)
    assert "\n" not in str(exc.value) and x_file.is_file()  # nothing deleted behind the user's back
    assert all((cifar_root / b).is_file() for b in BATCHES)


def test_cache_off_and_unwritable(cifar_root, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", "off")
    assert not isinstance(load_cifar10(cifar_root.parent).x, np.memmap)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("PRIVAUDIT_CACHE_DIR", str(blocked / "cache"))  # cannot be created
    assert load_cifar10(cifar_root.parent).x.shape == (6 * N_PER_BATCH, 3, 32, 32)
