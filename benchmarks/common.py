"""Shared pieces of the benchmark suite: the machine's matmul peak, peak memory, FLOP counts,
CIFAR-10-shaped data (real when a data folder is given, else generated) and timing helpers.

Every benchmark compares privaudit with what users run instead *in the same process run*,
one after the other, because these machines are noisy: ratios measured side by side are
the figures to trust, absolute figures are context.
"""

from __future__ import annotations

import os
import pickle
import platform
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from privaudit.data import ImageData, load_dataset

CIFAR_SHAPE = (3, 32, 32)


# -- the machine ----------------------------------------------------------------------------

def machine() -> dict:
    from privaudit.core.provenance import cpu_name

    info = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _rate(fn, flops: float, seconds: float = 0.6) -> float:
    """Best FLOP/s of ``fn`` over repeated calls for about ``seconds``, at least one call timed
    (a process descheduled for ``seconds`` on a busy machine still gets a rate, never 0)."""
    fn()
    best, end = 0.0, time.perf_counter() + seconds
    while True:
        t = time.perf_counter()
        fn()
        sync()
        best = max(best, flops / (time.perf_counter() - t))
        if time.perf_counter() >= end:
            return best


def sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def matmul_peak(device: torch.device) -> dict:
    """The fp32 matrix-multiply peak measured now, in GFLOP/s.

    CPU: the best of MKL's sgemm (``torch.mm``) and oneDNN's matmul (the library PyTorch
    uses for convolutions, and privaudit for dense layers) on 2048×2048 matrices; on AMD CPUs
    MKL runs its AVX2 path and oneDNN is ~2× faster, so the peak is oneDNN's. CUDA: ``torch.mm``
    at 8192×8192 with TF32 off (true fp32).
    """
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        n = 8192
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        g = _rate(lambda: a @ b, 2 * n ** 3) / 1e9
        return {"cublas_sgemm": g, "peak": g, "peak_library": "cublas"}
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = {"mkl_sgemm": _rate(lambda: a @ b, 2 * n ** 3) / 1e9}
    from privaudit.models.fast_linear import onednn_enabled, onednn_matmul_nt
    if onednn_enabled():
        bt = b.t().contiguous()
        out["onednn_matmul"] = _rate(lambda: onednn_matmul_nt(a, bt), 2 * n ** 3) / 1e9
    lib = max(out, key=out.get)
    return {**out, "peak": out[lib], "peak_library": lib}


# -- memory ---------------------------------------------------------------------------------

def rss_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except (OSError, ValueError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakMemory:
    """Peak resident memory (MB) while the block runs, sampled every 10 ms in a thread, and
    the rise over the level at entry; on CUDA also the peak allocated device memory. (The
    sampler costs the measured code a few per cent; allocations shorter than 10 ms can be
    missed, which for the whole-dataset buffers that matter here they are not.)"""

    def __enter__(self) -> PeakMemory:
        self.start = rss_mb()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())

    def result(self) -> dict:
        out = {"peak_rss_mb": round(self.peak, 1), "rss_rise_mb": round(self.peak - self.start, 1)}
        if torch.cuda.is_available():
            out["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2 ** 20, 1)
        return out


# -- work -----------------------------------------------------------------------------------

def train_step_flops(model: nn.Module, input_shape: tuple[int, ...], batch: int = 64) -> float:
    """FLOPs of one training step (forward + backward) per sample, counted by PyTorch's
    ``FlopCounterMode`` on a plain copy of the model: what actually executes (no input
    gradient for the first layer), not a 3×-forward rule of thumb."""
    import copy

    from torch.utils.flop_counter import FlopCounterMode
    m = copy.deepcopy(model).cpu().train()
    x = torch.randn(batch, *input_shape)
    y = torch.randint(0, 10, (batch,))
    with FlopCounterMode(display=False) as counter:
        nn.functional.cross_entropy(m(x), y).backward()
    return counter.get_total_flops() / batch


@dataclass
class EpochClock:
    """Timestamps of epoch ends: steady-state throughput skips the first (warm-up) epoch."""

    n: int
    stamps: list[float]

    def __init__(self, n: int):
        self.n, self.stamps = n, []

    def start(self) -> None:
        sync()
        self.stamps = [time.perf_counter()]

    def __call__(self, *args) -> None:
        sync()
        self.stamps.append(time.perf_counter())

    def samples_per_second(self) -> float:
        if len(self.stamps) >= 3:
            return self.n * (len(self.stamps) - 2) / (self.stamps[-1] - self.stamps[1])
        return self.n / (self.stamps[-1] - self.stamps[0])


# -- data -----------------------------------------------------------------------------------

def cifar_data(data_dir: str | None, seed: int = 0) -> tuple[ImageData, str]:
    """Real CIFAR-10 (pooled train + test) from ``data_dir``, else 60,000 generated images of
    the same shape: uint8 pixels whose mean depends on the class (so models can learn)."""
    if data_dir:
        return load_dataset("cifar10", data_dir), "cifar10"
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, 60_000)
    x = rng.integers(0, 160, (60_000, *CIFAR_SHAPE), dtype=np.uint8) + (y * 9).astype(np.uint8)[:, None, None, None]
    return ImageData("cifar10", x, y.astype(np.int64), 10), "generated"


def cifar_folder(data: ImageData, root: Path) -> Path:
    """Write ``data`` in the CIFAR-10 python-pickle layout under ``root`` (for torchvision's
    ``CIFAR10`` and privaudit's ``--data-dir``, when no real copy was given)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    x = data.x.reshape(len(data.y), -1)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, name in enumerate(names):
        sl = slice(i * 10_000, (i + 1) * 10_000)
        with open(folder / name, "wb") as f:
            pickle.dump({"data": x[sl], "labels": data.y[sl].tolist(), "batch_label": name,
                         "filenames": [f"{j}.png" for j in range(10_000)]}, f)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [str(c) for c in range(10)]}, f)
    return root


def temp_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="privaudit-bench-")
