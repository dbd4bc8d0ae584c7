"""Benchmark 1: training throughput, privaudit's trainer vs the loop users write.

The comparison is the standard PyTorch recipe: torchvision's ``CIFAR10`` dataset with
``ToTensor`` + ``Normalize``, a shuffled ``DataLoader`` (batch 128, no worker processes: on a
2-core machine workers compete with the model for the cores) and a plain Adam loop. Both
train the same architecture on the same number of images for the same epochs; throughput is
steady state (first epoch = warm-up, not counted). FLOP/s is the FLOPs a training step
actually executes (PyTorch's ``FlopCounterMode``) times samples/s, as a fraction of the fp32
matmul peak measured in the same run, right before and right after the row (the higher
of the two).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from torch import nn

from benchmarks.common import EpochClock, PeakMemory, matmul_peak, sync, train_step_flops
from privaudit.core.config import make_config
from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.models import build_model
from privaudit.training import train_model

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def torchvision_cifar(root: Path, train: bool = True):
    """torchvision's ``CIFAR10`` reading ``root/cifar-10-batches-py``, with ToTensor + Normalize.

    torchvision checks every file against the official archive's MD5; copies rebuilt from
    another encoding (like this project's development copy) fail that check, so the check is
    skipped here. Everything else (decoding to PIL, the transforms) is torchvision's own.
    """
    import torchvision
    from torchvision import transforms as T

    class CIFAR10Copy(torchvision.datasets.CIFAR10):
        def _check_integrity(self) -> bool:
            return True

        def _load_meta(self) -> None:
            with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as f:
                self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    transform = T.Compose([T.ToTensor(), T.Normalize(CIFAR_MEAN, CIFAR_STD)])
    return CIFAR10Copy(str(root), train=train, transform=transform, download=False)


def dataloader_loop(model_name: str, root: Path, n: int, epochs: int, batch: int, device: torch.device,
                    seed: int = 0, width: int | None = None) -> float:
    """Steady-state samples/s of the standard loop on the first ``n`` training images."""
    torch.manual_seed(seed)
    dataset = torch.utils.data.Subset(torchvision_cifar(root), range(n))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=0)
    model = build_model(model_name, (3, 32, 32), 10, width=width or DEFAULT_WIDTHS[model_name]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    clock = EpochClock(n)
    clock.start()
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
        clock()
    return clock.samples_per_second()


def privaudit_trainer(model_name: str, data, n: int, epochs: int, batch: int, device: torch.device,
                      width: int | None = None, engine: str | None = None, **defence) -> tuple[float, dict]:
    """Steady-state samples/s of ``privaudit.training.train_model`` (part size ``n``)."""
    cfg = make_config(model=model_name, dataset="cifar10", part_size=n, epochs=epochs, batch_size=batch,
                      width=width, **defence)
    clock = EpochClock(n)
    clock.start()
    result = train_model(cfg, data, device, on_epoch=clock, engine=engine)
    sync()
    return clock.samples_per_second(), result.metrics


def run(data, source: str, root: Path, device: torch.device, peak: float, quick: bool = False,
        repeats: int = 2) -> list[dict]:
    """One row per architecture; ``root`` holds ``cifar-10-batches-py`` with the same images.
    The two sides alternate ``repeats`` times and each keeps its best run (shared machines
    are noisy; the best run is the least disturbed one)."""
    models = ("mlp",) if quick else ("mlp", "cnn", "cnn-improved")
    n = 1024 if quick else 10_520
    epochs = 2 if quick else 3
    batch = 128
    rows = []
    for name in models:
        flops = train_step_flops(build_model(name, (3, 32, 32), 10, width=DEFAULT_WIDTHS[name]), (3, 32, 32))
        # The peak again, right before and right after this row: a shared machine's speed
        # drifts over minutes, and a fraction of peak means something only against the peak
        # of the same moment (the higher of the two, to stay conservative).
        row_peak = matmul_peak(device)["peak"] if not quick else peak
        ours = loop = 0.0
        for _ in range(1 if quick else repeats):
            with PeakMemory() as mem_p:
                speed, metrics = privaudit_trainer(name, data, n, epochs, batch, device)
            ours = max(ours, speed)
            with PeakMemory() as mem_l:
                loop = max(loop, dataloader_loop(name, root, n, epochs, batch, device))
        if not quick:
            row_peak = max(row_peak, matmul_peak(device)["peak"])
        rows.append({
            "benchmark": "training", "model": name, "data": source, "images": n, "epochs": epochs,
            "batch": batch, "repeats": 1 if quick else repeats, "privaudit_samples_per_s": ours,
            "dataloader_loop_samples_per_s": loop,
            "speedup": ours / loop, "train_flops_per_sample": flops,
            "peak_gflops": row_peak,
            "privaudit_gflops": ours * flops / 1e9, "privaudit_fraction_of_peak": ours * flops / 1e9 / row_peak,
            "loop_fraction_of_peak": loop * flops / 1e9 / row_peak,
            "privaudit_memory": mem_p.result(), "loop_memory": mem_l.result(),
            "privaudit_test_accuracy": metrics["test_accuracy"],
        })
    return rows
