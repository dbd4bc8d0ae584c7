"""``--download`` exercised offline: the real download path against a local archive served
over HTTP on the loopback interface (no other network is touched)."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import tarfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.data import loaders
from privaudit.errors import DataError


def _batch(n: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    return pickle.dumps({"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         "labels": [int(v) for v in rng.integers(0, 10, n)],
                         "filenames": [f"img{i}.png" for i in range(n)], "batch_label": "fixture"}, protocol=2)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture
def local_archive(tmp_path, monkeypatch):
    """A cifar-10-python.tar.gz of tiny batches served by a local HTTP server on 127.0.0.1."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i, name in enumerate(loaders.CIFAR_TRAIN_BATCHES + (loaders.CIFAR_TEST_BATCH,)):
            data = _batch(20, i)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "served" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(buf.getvalue())
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(archive.parent)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(loaders, "CIFAR_URL", f"http://127.0.0.1:{server.server_port}/{archive.name}")
    monkeypatch.setattr(loaders, "CIFAR_MD5", hashlib.md5(buf.getvalue()).hexdigest())
    monkeypatch.delenv(loaders.DATA_DIR_ENV, raising=False)
    yield archive
    server.shutdown()
    server.server_close()


def test_download_fetches_checks_and_unpacks(local_archive, tmp_path):
    root = tmp_path / "data"
    with pytest.raises(DataError, match="`download`"):
        loaders.load_cifar10(root)
    data = loaders.load_cifar10(root, download=True)
    assert data.x.shape == (120, 3, 32, 32) and data.y.shape == (120,)
    assert (root / "cifar-10-batches-py" / "test_batch").is_file()
    again = loaders.load_cifar10(root)  # found locally now, no second download
    assert np.array_equal(again.x, data.x)


def test_download_with_wrong_checksum_is_refused(local_archive, tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "CIFAR_MD5", "0" * 32)
    with pytest.raises(DataError, match="could not download"):
        loaders.load_cifar10(tmp_path / "data", download=True)
    assert not (tmp_path / "data" / "cifar-10-batches-py").exists()


def test_cli_train_with_download(local_archive, tmp_path):
    result = CliRunner().invoke(app, ["train", "--kappa", "0.5", "--download", "--data-dir", str(tmp_path / "data"),
                                      "--part-size", "25", "--epochs", "2", "--width", "16", "--device", "cpu",
                                      "--workdir", str(tmp_path / "ws"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["run"].startswith("target-mlp-cifar10-k0.5-") and doc["metrics"]["n_train"] == 25
