"""Every dataset format privaudit reads, from small files the tests write in each format
(offline: ``--download`` goes through a stand-in for torchvision's downloader), the user's
own data by ``npz:`` and ``folder:``, and the fingerprint that ties a model to its data."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_error_line, run_cli, run_cli_joined

from privaudit.core.config import dataset_tag, make_config
from privaudit.data import load_dataset
from privaudit.data.formats import parse_idx
from privaudit.errors import ConfigError, DataError
from privaudit.pipeline.runs import DataCache


def _images(n, c, h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(n, c, h, w), dtype=np.uint8)


# -- torchvision's datasets, in their own file formats -------------------------------------------

def _write_cifar100(root: Path) -> tuple[np.ndarray, np.ndarray]:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    x = _images(12, 3, 32, 32, 1)
    y = np.arange(12) * 8 % 100
    for part, sl in (("train", slice(0, 8)), ("test", slice(8, 12))):
        with open(folder / part, "wb") as fh:
            pickle.dump({"data": x[sl].reshape(-1, 3072), "fine_labels": y[sl].tolist(),
                         "coarse_labels": (y[sl] // 5).tolist()}, fh, protocol=2)
    return x, y


def _idx_bytes(a: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, a.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in a.shape)
    return header + a.astype(np.uint8).tobytes()


def _write_idx(root: Path, folder: str, gz: bool) -> tuple[np.ndarray, np.ndarray]:
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    x = _images(10, 1, 28, 28, 2)[:, 0]
    y = np.arange(10) % 10
    for (images, labels), sl in ((("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), slice(0, 6)),
                                 (("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"), slice(6, 10))):
        for stem, a in ((images, x[sl]), (labels, y[sl])):
            data = _idx_bytes(a)
            if gz:
                with gzip.open(raw / f"{stem}.gz", "wb") as fh:
                    fh.write(data)
            else:
                (raw / stem).write_bytes(data)
    return x, y


def _write_svhn(root: Path) -> tuple[np.ndarray, np.ndarray]:
    from scipy.io import savemat

    root.mkdir(parents=True, exist_ok=True)
    x = _images(9, 3, 32, 32, 3)
    y = np.array([10, 1, 2, 3, 4, 5, 6, 7, 10])  # SVHN's class 10 is the digit 0
    for fname, sl in (("train_32x32.mat", slice(0, 5)), ("test_32x32.mat", slice(5, 9))):
        savemat(root / fname, {"X": np.transpose(x[sl], (2, 3, 1, 0)), "y": y[sl][:, None]})
    return x, np.where(y == 10, 0, y)


def test_cifar100_reads_fine_labels(tmp_path):
    x, y = _write_cifar100(tmp_path)
    d = load_dataset("cifar100", tmp_path)
    assert d.num_classes == 100 and d.x.shape == (12, 3, 32, 32)
    assert np.array_equal(d.x, x) and np.array_equal(d.y, y)


@pytest.mark.parametrize("name, folder, gz", [("mnist", "MNIST", True), ("fashion-mnist", "FashionMNIST", False)])
def test_mnist_and_fashion_mnist_read_idx_files(tmp_path, name, folder, gz):
    x, y = _write_idx(tmp_path, folder, gz)
    d = load_dataset(name, tmp_path)
    assert d.x.shape == (10, 1, 28, 28) and d.num_classes == 10
    assert np.array_equal(d.x[:, 0], x) and np.array_equal(d.y, y)


def test_svhn_reads_matlab_files_and_maps_ten_to_zero(tmp_path):
    x, y = _write_svhn(tmp_path)
    d = load_dataset("svhn", tmp_path)
    assert np.array_equal(d.x, x) and np.array_equal(d.y, y)


def test_idx_header_is_checked():
    with pytest.raises(DataError, match="holds 3 bytes"):
        parse_idx(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3]), "labels")
    with pytest.raises(DataError, match="not an IDX"):
        parse_idx(b"\x89PNG....", "images")


def test_missing_files_name_data_dir_and_download(tmp_path):
    with pytest.raises(DataError) as exc:
        load_dataset("mnist", tmp_path)
    assert "`data_dir`" in str(exc.value) and "`download`" in str(exc.value)


def test_download_goes_through_torchvision_then_reads_the_files(tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    calls = []

    class FakeMNIST:  # torchvision's MNIST downloads into root/MNIST/raw; this one writes the files
        def __init__(self, root, train=True, download=False):
            calls.append((root, train, download))
            if not (Path(root) / "MNIST").exists():
                _write_idx(Path(root), "MNIST", gz=False)

    monkeypatch.setattr(tvd, "MNIST", FakeMNIST)
    d = load_dataset("mnist", tmp_path, download=True)
    assert len(d.y) == 10 and calls == [(str(tmp_path), True, True), (str(tmp_path), False, True)]


# -- the user's own data --------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["nhwc", "nchw", "grey"])
def test_npz_layouts(tmp_path, layout):
    x = _images(20, 3 if layout != "grey" else 1, 6, 5, 4)
    stored = {"nhwc": np.transpose(x, (0, 2, 3, 1)), "nchw": x, "grey": x[:, 0]}[layout]
    np.savez(tmp_path / "d.npz", x=stored, y=np.arange(20) % 4)
    d = load_dataset(f"npz:{tmp_path / 'd.npz'}")
    assert d.x.shape == x.shape and np.array_equal(d.x, x) and d.num_classes == 4
    assert len(d.fingerprint) == 16


def test_folder_of_class_folders(tmp_path):
    from PIL import Image

    x = _images(6, 3, 7, 9, 5)
    for i in range(6):
        cls = tmp_path / "imgs" / ("cat" if i % 2 else "ant")
        cls.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.transpose(x[i], (1, 2, 0))).save(cls / f"{i}.png")
    d = load_dataset(f"folder:{tmp_path / 'imgs'}")
    assert d.x.shape == (6, 3, 7, 9) and d.num_classes == 2
    assert np.array_equal(d.y, [0, 0, 0, 1, 1, 1])  # ant, then cat (sorted class names)
    assert np.array_equal(d.x[0], x[0]) and np.array_equal(d.x[3], x[1])  # ant/0.png; cat/1.png


@pytest.mark.parametrize("arrays, message", [
    (dict(x=np.zeros((4, 5, 5), np.float32), y=np.arange(4) % 2), "uint8"),
    (dict(x=np.zeros((4, 5, 5), np.uint8)), "'y'"),
    (dict(x=np.zeros((4, 5, 5), np.uint8), y=np.zeros(4, int)), "at least 2 classes"),
    (dict(x=np.zeros((4, 5, 5, 7), np.uint8), y=np.arange(4) % 2), "channels"),
    (dict(x=np.zeros((4, 5, 5), np.uint8), y=np.array([object()] * 4)), "y: holds Python objects"),
])
def test_bad_npz_is_one_clear_error(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DataError, match=message):
        load_dataset(f"npz:{tmp_path / 'bad.npz'}")


def test_folder_with_mixed_sizes_names_the_image(tmp_path):
    from PIL import Image

    for cls, size in (("a", (4, 4)), ("b", (5, 4))):
        (tmp_path / cls).mkdir()
        Image.new("RGB", size).save(tmp_path / cls / "x.png")
    with pytest.raises(DataError, match="b/x.png is 5x4"):
        load_dataset(f"folder:{tmp_path}")


def test_config_of_own_data_carries_its_fingerprint(tmp_path):
    np.savez(tmp_path / "mine.npz", x=_images(400, 1, 8, 8), y=np.arange(400) % 10)
    name = f"npz:{tmp_path / 'mine.npz'}"
    kwargs = DataCache().config_kwargs(name)
    cfg = make_config(dataset=name, **kwargs)
    assert cfg.data.part_size == 100  # a quarter of 400 images
    assert cfg.run_name.startswith("target-mlp-npz-mine-plain-")
    assert dataset_tag("folder:/a/b/my pics/") == "folder-my_pics"
    with pytest.raises(ConfigError, match="fingerprint"):
        make_config(dataset=name)
    with pytest.raises(ConfigError, match="fingerprint"):
        make_config(dataset="digits", fingerprint="0123456789abcdef")
    # a dataset known by name keeps the hash it had before fingerprints existed
    assert "fingerprint" not in make_config(dataset="digits").hash_dict()["data"]


# -- end to end on the command line ---------------------------------------------------------------

def test_train_and_attack_on_own_npz_then_a_changed_file_is_caught(tmp_path):
    rng = np.random.default_rng(7)
    data = tmp_path / "mine.npz"
    np.savez(data, x=rng.integers(0, 256, (240, 8, 8, 1), dtype=np.uint8), y=np.arange(240) % 3)
    ws = tmp_path / "ws"
    code, out, err = run_cli("train", "--dataset", f"npz:{data}", "--epochs", "2", "--width", "16",
                             "--workdir", str(ws), "--json")
    assert code == 0, err
    run = json.loads(out)
    assert run["config"]["data"]["part_size"] == 60 and run["config"]["data"]["dataset"] == f"npz:{data.resolve()}"
    assert "npz-mine" in run["run"]
    code, out = run_cli_joined("attack", "--target", run["run"], "--attacks", "shadow", "--workdir", str(ws),
                               "--no-report")
    assert code == 0, out
    np.savez(data, x=rng.integers(0, 256, (240, 8, 8, 1), dtype=np.uint8), y=np.arange(240) % 3)
    code, out = run_cli_joined("attack", "--target", run["run"], "--attacks", "loss,lira", "--pool-size", "4",
                               "--workdir", str(ws), "--no-report")
    assert code == 2 and "has changed since" in one_error_line(out)


@pytest.mark.parametrize("value", ["npz:", "folder:  ", "imagenet", "npz"])
def test_dataset_option_refuses_bad_names(value):
    code, out = run_cli_joined("train", "--dataset", value)
    assert code == 2 and "--dataset" in one_error_line(out)


def test_flip_is_refused_for_digit_datasets():
    with pytest.raises(ConfigError, match="mirror"):
        make_config(dataset="svhn", augment="flip")
    assert make_config(dataset="cifar100", augment="flip").train.augment == "flip"


@pytest.mark.slow
def test_transfer_attack_trains_its_shadow_on_other_data(tmp_path, digits):
    """ML-Leaks adversary 2: the shadow has the target's recipe but the attacker's own data
    (here the digits transposed, 5 classes), and its attack sits beside the paper's."""
    other = tmp_path / "other.npz"
    np.savez(other, x=np.transpose(digits.x[:600, 0], (0, 2, 1)), y=digits.y[:600] % 5)
    ws = tmp_path / "ws"
    code, out, err = run_cli("train", "--dataset", "digits", "--part-size", "100", "--epochs", "30", "--width", "64",
                             "--workdir", str(ws), "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    args = ("attack", "--target", run, "--attacks", "shadow", "--shadow-dataset", f"npz:{other}", "--workdir", str(ws),
            "--json")
    code, out, err = run_cli(*args)
    assert code == 0, err
    m = json.loads(out)["attacks"][0]["metrics"]
    assert {"shadow", "shadow-transfer"} <= set(m)
    assert "-npz-other-" in m["shadow-transfer"]["source"] and m["shadow-transfer"]["source"] != m["shadow"]["source"]
    assert 0.0 <= m["shadow-transfer"]["auc"] <= 1.0 and m["shadow-transfer"]["eps_lower_bound"] >= 0
    code, out, err = run_cli(*args)
    assert code == 0 and json.loads(out)["attacks"][0]["reused"]
