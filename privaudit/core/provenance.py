"""Provenance recorded with every artifact: versions, git revision, device, time."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from pathlib import Path

import numpy as np
import torch

import privaudit


def git_revision() -> str | None:
    """The git commit of the privaudit source tree, when it is a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(privaudit.__file__).parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(device: str | torch.device) -> dict:
    try:
        import opacus

        opacus_version = opacus.__version__
    except (ImportError, AttributeError):  # pragma: no cover - opacus is a dependency
        opacus_version = None
    return {
        "privaudit_version": privaudit.__version__,
        "git_revision": git_revision(),
        "torch_version": torch.__version__,
        "opacus_version": opacus_version,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
