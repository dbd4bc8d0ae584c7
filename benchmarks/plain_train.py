"""The script a user writes instead of ``privaudit train``, timed from outside by
``bench_commands``: torchvision's ``CIFAR10`` with ``ToTensor`` + ``Normalize``, a shuffled
``DataLoader``, Adam, then the accuracy on the training images and as many test images.

    python -m benchmarks.plain_train --data-dir DIR --model cnn --epochs 3 [--images 10520]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

from benchmarks.bench_training import torchvision_cifar
from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.models import build_model


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--model", default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--images", type=int, default=10_520)
    p.add_argument("--batch-size", type=int, default=100)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    root = Path(args.data_dir)
    train = torch.utils.data.Subset(torchvision_cifar(root), range(args.images))
    test = torch.utils.data.Subset(torchvision_cifar(root, train=False), range(min(args.images, 10_000)))
    model = build_model(args.model, (3, 32, 32), 10, width=DEFAULT_WIDTHS[args.model])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(args.epochs):
        model.train()
        for x, y in torch.utils.data.DataLoader(train, batch_size=args.batch_size, shuffle=True):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        for part in (train, test):
            hits = sum(int((model(x).argmax(1) == y).sum())
                       for x, y in torch.utils.data.DataLoader(part, batch_size=1000))
            print(f"accuracy {hits / len(part):.4f}")


if __name__ == "__main__":
    main()
