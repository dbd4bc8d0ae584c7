"""``benchmarks/gpu.sh``, the GPU run, works on the CPU (``DEVICE=cpu QUICK=1``): the digits
audit, a CIFAR-10-layout MLP audit and a bounded reproduction, each with its phase seconds,
and the reproduction's share of its models (or, stopped by its time limit, the projection)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_data

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cifar_like(tmp_path, monkeypatch):
    """A CIFAR-10 folder of 6 × 200 images in the original layout (the data tests' writer)."""
    monkeypatch.setattr(test_data, "N_PER_BATCH", 200)
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for i, name in enumerate(test_data.BATCHES):
        (folder / name).write_bytes(test_data._batch_bytes(i))
    return folder.parent


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_gpu_script_runs_on_the_cpu(cifar_like, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "DEVICE": "cpu", "QUICK": "1", "SUITE": "0", "OUT": str(out), "MLP_PART": "250",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu.sh"), str(cifar_like)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    walls = dict(line.split()[0::2] for line in (out / "wall.txt").read_text().splitlines())
    assert walls == {"digits-audit": "0", "mlp-audit": "0", "reproduce": "0"}      # every command succeeded
    for name in ("digits-audit", "mlp-audit"):
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["phase_seconds"]["train"] > 0
    summary = (out / "summary.md").read_text()
    assert "| digits-audit |" in summary and "| mlp-audit |" in summary
    assert "reproduce (reduced, mlp): finished, 5 of 5 models" in summary
