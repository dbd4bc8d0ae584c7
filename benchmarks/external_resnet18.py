"""A model trained elsewhere, audited: a plain PyTorch script trains a torchvision ResNet-18
on part of CIFAR-10 and saves its state dict; ``privaudit audit-model`` then audits it.

    python -m benchmarks.external_resnet18 --data-dir ../shared/data [--members 2000] [--epochs 8]

The training half is what a user writes (torchvision's ``CIFAR10`` with ``ToTensor`` and
``Normalize``, a shuffled ``DataLoader``, Adam), nothing of privaudit. The members are
training-set indices, which are also their indices in privaudit's pooled CIFAR-10 (the
50,000 training images come first). Prints the wall time of each half and the audit's
headline; the audit's files land in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torchvision
from torch import nn

from benchmarks.bench_training import CIFAR_MEAN, CIFAR_STD, torchvision_cifar


def train_plain(root: Path, members: np.ndarray, epochs: int, batch: int, lr: float, seed: int) -> nn.Module:
    """The user's script: ResNet-18 (torchvision, 10 classes, random init), Adam, no augmentation."""
    torch.manual_seed(seed)
    data = torch.utils.data.Subset(torchvision_cifar(root), members.tolist())
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return model


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True, help="folder holding cifar-10-batches-py")
    p.add_argument("--members", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--references", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="reports/audit-model/resnet18", help="the audit's folder")
    args = p.parse_args(argv)
    root = Path(args.data_dir)
    members = np.sort(np.random.default_rng(args.seed).permutation(50_000)[:args.members])
    with tempfile.TemporaryDirectory(prefix="resnet18-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        model = train_plain(root, members, args.epochs, args.batch_size, args.lr, args.seed)
        torch.save(model.state_dict(), tmp / "resnet18.pt")
        np.save(tmp / "members.npy", members)
        train_s = time.perf_counter() - t0
        cmd = [sys.executable, "-m", "privaudit", "audit-model", "--weights", str(tmp / "resnet18.pt"),
               "--model", "torchvision:resnet18", "--dataset", "cifar10", "--data-dir", str(root),
               "--members", str(tmp / "members.npy"), "--references", str(args.references),
               "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
               "--mean", ",".join(map(str, CIFAR_MEAN)), "--std", ",".join(map(str, CIFAR_STD)),
               "--seed", str(args.seed), "--workdir", str(tmp / "ws"), "--out", args.out, "--json"]
        t1 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        audit_s = time.perf_counter() - t1
    if done.returncode != 0:
        sys.exit(done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                 else f"audit-model failed ({done.returncode})")
    doc = json.loads(done.stdout)
    ref = doc["references"]
    print(json.dumps({"members": args.members, "epochs": args.epochs, "references": args.references,
                      "plain_training_seconds": round(train_s, 1), "audit_model_seconds": round(audit_s, 1),
                      "target_train_accuracy": ref["target_train_accuracy"],
                      "target_test_accuracy": ref["target_test_accuracy"],
                      "reference_test_accuracy": ref["reference_test_accuracy"], "ks_distance": ref["ks_distance"],
                      "warnings": ref["warnings"], "headline": doc["headline"],
                      "attacks": {k: {"auc": v["auc"], "auc_lo": v["auc_lo"], "auc_hi": v["auc_hi"],
                                      "tpr_at_1pct_fpr": v["tpr_at_1pct_fpr"], "eps_lower_bound": v["eps_lower_bound"]}
                                  for k, v in doc["metrics"].items()},
                      "html": doc["html"]}, indent=1))


if __name__ == "__main__":
    main()
