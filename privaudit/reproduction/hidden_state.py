"""``privaudit reproduce hidden-state``: the hidden-state paper's Table 1 and Figure 3, and the
audit of its released models (docs/methods/b-hidden-state.md B.4–B.5).

A reproduction is a list of *cells*, one method (:mod:`.hidden_state_methods`) trained at one
target ε with one seed on one dataset. Each cell's result (test accuracy, σ, ε, Figure 3's
curve) is saved as a small JSON file under ``models/reproduce/hidden-state/`` named by the
cell and a hash of its recipe, written atomically, so an interrupted run resumes and a rerun
trains nothing. The audit (:mod:`.hidden_state_audit`) keeps its pools beside them.

``full`` is the paper's protocol (P = 100 gates, 400 epochs, batch 1,000, five restarts);
``reduced`` keeps every method, ε and statement but trains fewer gates for fewer epochs
(:attr:`HiddenStateProtocol.reduces`), and reads only the statements it can decide.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from privaudit.errors import ConfigError
from privaudit.files.atomic import write_json
from privaudit.reproduction.hidden_state_methods import METHODS, Recipe

if TYPE_CHECKING:
    import torch

SCALES = ("full", "reduced")
DATASETS = ("cifar10", "mnist", "fashion-mnist", "digits")
EXPERIMENTS = ("table1", "figure3", "audit")
#: Table 1's privacy levels, δ = 1e-5 (σ = 15 ↔ 1.33, σ = 5 ↔ 4.76 in the paper)
EPSILONS = (1.33, 4.76)
PAPER_SIGMA = {1.33: 15.0, 4.76: 5.0}
TABLE_METHODS = METHODS[:6]
FIGURE_METHODS = ("noisycgd-convex", "dpsgd-convex", "dpsgd-relu", "dpsgd-logistic")
CACHE = ("reproduce", "hidden-state")  # under the workspace's models/
#: held-out test images per dataset: the official test split (digits: the last 397 of 1,797)
TEST_SIZE = {"cifar10": 10_000, "mnist": 10_000, "fashion-mnist": 10_000, "digits": 397}


@dataclass(frozen=True)
class AuditSetting:
    """The audit of the released models: ``models`` per (method, ε), each trained on a random
    half of a population of ``population`` training images (models 2j and 2j+1 on
    complementary halves), attacked leave-one-out."""

    population: int
    models: int
    epochs: int
    batch: int
    methods: tuple[str, ...] = ("noisycgd-convex", "dpsgd-convex", "dpsgd-relu")


@dataclass(frozen=True)
class HiddenStateProtocol:
    scale: str
    dataset: str
    seeds: tuple[int, ...]
    experiments: tuple[str, ...]
    recipe: Recipe
    audit: AuditSetting
    reduces: tuple[str, ...] = ()

    def cells(self) -> list[tuple[str, float, int]]:
        """(method, target ε, seed) of every trained model of Table 1 and Figure 3, seed by seed
        (an interrupted run leaves whole replicates)."""
        methods: list[str] = []
        if "table1" in self.experiments:
            methods += TABLE_METHODS
        if "figure3" in self.experiments:
            methods += [m for m in FIGURE_METHODS if m not in methods]
        return [(m, e, s) for s in self.seeds for m in methods for e in EPSILONS]

    def describe(self) -> dict:
        return {"scale": self.scale, "dataset": self.dataset, "seeds": list(self.seeds),
                "experiments": list(self.experiments), "epsilons": list(EPSILONS), "delta": self.recipe.delta,
                "recipe": asdict(self.recipe), "l2": self.recipe.l2, "audit": asdict(self.audit),
                "reduces": list(self.reduces), "models_needed": len(self.cells()) + (
                    2 * len(self.audit.methods) * self.audit.models + self.audit.models
                    if "audit" in self.experiments else 0)}


def _words(value: Sequence[str] | None, option: str, allowed: Sequence[str]) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(value or allowed))
    bad = [w for w in items if w not in allowed]
    if bad:
        raise ConfigError(f"unknown {option} {bad[0]!r}; expected some of {', '.join(allowed)}")
    return items


def hidden_state_protocol(scale: str = "reduced", dataset: str = "cifar10", *, seeds: Sequence[int] | None = None,
                          experiments: Sequence[str] | None = None) -> HiddenStateProtocol:
    """The protocol of ``scale`` on ``dataset`` (docs/methods/b-hidden-state.md B.4)."""
    if scale not in SCALES:
        raise ConfigError(f"unknown `scale` {scale!r}; expected one of {', '.join(SCALES)}")
    if dataset not in DATASETS:
        raise ConfigError(f"unknown `dataset` {dataset!r} for hidden-state; expected one of {', '.join(DATASETS)}")
    chosen = _words(experiments, "`experiments`", EXPERIMENTS)
    seed_list = tuple(dict.fromkeys(int(s) for s in (seeds if seeds is not None else range(5 if scale == "full"
                                                                                          else 3))))
    if not seed_list:
        raise ConfigError("reproduce needs at least one seed")
    # The step: η = 3.6/P keeps η·β ≤ 1.8 < 2 − ηλ on unit-norm inputs (β ≤ P/2), so the
    # contraction c = 1 − ηλ of the hidden-state bound holds; ηλ = 5.4e-5 as in the paper's
    # accounting figure (docs/methods/b-hidden-state.md B.4).
    full = Recipe(epochs=400, batch=1000, gates=100, width=512, features=4096, lr_convex=3.6 / 100,
                  eta_lambda=5.4e-5, lr_relu=0.5, lr_logistic=0.5)
    audit = AuditSetting(population=10_000, models=16, epochs=400, batch=1000)
    reduces: list[str] = []
    if scale == "reduced":
        full = replace(full, epochs=40, gates=20, width=256, features=2048, lr_convex=3.6 / 20)
        audit = AuditSetting(population=2_000, models=16, epochs=40, batch=100)
        reduces += ["40 epochs instead of 400 (Figure 3: a point every 10 epochs to 40)",
                    "P = 20 gate vectors instead of 100 (step η = 3.6/P, the largest that keeps the contraction)",
                    "a ReLU network of 256 hidden units, SSP features of dimension 2,048",
                    "the audit: pools of 16 models on halves of 2,000 training images, 40 epochs, batch 100"]
    if dataset == "digits":
        full = replace(full, batch=64, eval_every=max(full.epochs // 10, 1))
        audit = replace(audit, population=1_000, batch=50)
        reduces.insert(0, "the bundled 8x8 digits (1,400 training and 397 test images, batch 64) instead of "
                          "CIFAR-10 or MNIST")
    return HiddenStateProtocol(scale, dataset, seed_list, chosen, full, audit, tuple(reduces))


# -- the data -----------------------------------------------------------------------------------

@dataclass
class Split:
    x: torch.Tensor   # (n, d), prepared
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    raw_train: np.ndarray  # the raw training images (for the smoothness check on raw pixels)


def load_split(dataset: str, data_dir: str | Path | None, download: bool = False) -> Split:
    """The official train/test split of ``dataset``, prepared (:func:`prepare`)."""
    import torch

    from privaudit.data.loaders import load_dataset
    from privaudit.reproduction.hidden_state_methods import prepare

    data = load_dataset(dataset, data_dir, download)
    k = len(data.y) - TEST_SIZE[dataset]
    x, xt = prepare(data.x[:k], data.x[k:])
    return Split(x, torch.from_numpy(np.asarray(data.y[:k], np.int64)), xt,
                 torch.from_numpy(np.asarray(data.y[k:], np.int64)), data.num_classes, data.x[:k])


# -- the cells ----------------------------------------------------------------------------------

def recipe_hash(protocol: HiddenStateProtocol) -> str:
    return hashlib.sha256(json.dumps([protocol.dataset, asdict(protocol.recipe)], sort_keys=True).encode()
                          ).hexdigest()[:10]


def cell_path(root: Path, protocol: HiddenStateProtocol, method: str, epsilon: float, seed: int) -> Path:
    return root.joinpath(*CACHE) / protocol.dataset / f"{method}-eps{epsilon:g}-seed{seed}-{recipe_hash(protocol)}.json"


def read_cell(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, or damaged: trained again
    return doc if isinstance(doc, dict) and "test_accuracy" in doc else None


_SPLITS: dict[tuple, Split] = {}  # per process (a Ray worker too): each dataset loaded once


def cell_doc(protocol: HiddenStateProtocol, split: Split, method: str, eps: float, seed: int) -> dict:
    """Train one cell on ``split``; its result as saved."""
    from privaudit.reproduction.hidden_state_methods import train_method

    t = train_method(method, split.x, split.y, split.x_test, split.y_test, protocol.recipe, eps, seed,
                     num_classes=split.num_classes, curve=method in FIGURE_METHODS)
    return {"method": method, "target_epsilon": eps, "seed": seed, "dataset": protocol.dataset,
            "test_accuracy": t.test_accuracy, "train_accuracy": t.train_accuracy, "sigma": t.sigma,
            "epsilon": t.epsilon, "epsilon_exact": t.epsilon_exact, "accountant": t.accountant,
            "n_train": int(len(split.y)), "n_test": int(len(split.y_test)), "seconds": t.seconds, "curve": t.curve}


def worker_split(dataset: str, data_dir: str | None, download: bool, threads: int) -> Split:
    """A Ray task's data: loaded once per worker process, its torch threads set."""
    import torch

    torch.set_num_threads(max(int(threads), 1))
    key = (dataset, data_dir, download)
    if key not in _SPLITS:
        _SPLITS[key] = load_split(dataset, data_dir, download)
    return _SPLITS[key]


def _remote_cell(protocol: HiddenStateProtocol, data_dir: str | None, download: bool, threads: int, method: str,
                 eps: float, seed: int) -> dict:
    return cell_doc(protocol, worker_split(protocol.dataset, data_dir, download, threads), method, eps, seed)


def cell_line(i: int, n: int, cell: tuple, doc: dict) -> str:
    """The progress line of a trained cell: its method, ε, seed, test accuracy, the noise
    multiplier σ of a noisy method (SSP, which perturbs sufficient statistics, has none) and
    its time."""
    sigma = doc.get("sigma")
    noise = f"σ {sigma:.3g}, " if isinstance(sigma, (int, float)) and math.isfinite(sigma) else ""
    return (f"[{i}/{n}] {cell[0]} at ε {cell[1]:g}, seed {cell[2]}: test accuracy {doc['test_accuracy']:.4f} "
            f"({noise}{doc['seconds']:.0f} s)")


def run_cells(protocol: HiddenStateProtocol, models_root: Path, split_loader: Callable[[], Split], *,
              log: Callable[[str], None] | None = None, executor=None, data_dir: str | Path | None = None,
              download: bool = False) -> pd.DataFrame:
    """Train (or read back) every cell of ``protocol``; one row per cell. With a Ray executor
    (one that has ``map``) the missing cells train as Ray tasks, each worker reading the data
    from ``data_dir``; the driver writes every result."""
    found = cached_cells(protocol, models_root)
    todo = [c for c, doc in found.items() if doc is None]

    def save(i: int, cell: tuple, doc: dict) -> None:
        path = cell_path(models_root, protocol, *cell)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, doc)
        found[cell] = doc
        if log:
            log(cell_line(i, len(todo), cell, doc))

    if todo and hasattr(executor, "map"):
        calls = [(protocol, None if data_dir is None else str(data_dir), download, executor.cpus_per_job, *c)
                 for c in todo]
        for k, (i, doc) in enumerate(executor.map(_remote_cell, calls, lambda i: f"{todo[i][0]} at ε {todo[i][1]:g}, "
                                                                               f"seed {todo[i][2]}"), 1):
            save(k, todo[i], doc)
    else:
        for k, cell in enumerate(todo, 1):
            save(k, cell, cell_doc(protocol, split_loader(), *cell))
    return pd.DataFrame(list(found.values()), columns=["method", "target_epsilon", "seed", "dataset", "test_accuracy",
                                       "train_accuracy", "sigma", "epsilon", "epsilon_exact", "accountant",
                                       "n_train", "n_test", "seconds", "curve"])


def curves(cells: pd.DataFrame) -> pd.DataFrame:
    """Figure 3's points: one row per (method, ε target, seed, epoch)."""
    rows = [{"method": r.method, "target_epsilon": r.target_epsilon, "seed": r.seed, **p}
            for r in cells.itertuples() for p in (r.curve or [])]
    return pd.DataFrame(rows, columns=["method", "target_epsilon", "seed", "epoch", "epsilon", "test_accuracy"])


def cached_cells(protocol: HiddenStateProtocol, models_root: Path) -> dict[tuple[str, float, int], dict | None]:
    """Every cell of ``protocol`` (in its order) with its saved result, None where there is none."""
    return {c: read_cell(cell_path(models_root, protocol, *c)) for c in protocol.cells()}


def missing_cells(protocol: HiddenStateProtocol, models_root: Path) -> list[str]:
    return [f"{m} at ε {e:g}, seed {s}" for (m, e, s), doc in cached_cells(protocol, models_root).items()
            if doc is None]


def flops_per_epoch(method: str, recipe: Recipe, n: int, d: int, classes: int = 10) -> float:
    """Multiply-adds × 2 of one epoch of ``method`` on n samples of dimension d: the cost
    model of ``--dry-run`` (SSP: its one pass, ΦᵀΦ and the feature map, counted once)."""
    if method in ("noisycgd-convex", "dpsgd-convex"):
        return 2.0 * n * d * recipe.gates * (2 * classes + 1)      # gates, logits, gradient
    if method == "dpsgd-relu":
        return 2.0 * n * 3 * (d * recipe.width + recipe.width * classes)
    if method == "dpsgd-logistic":
        return 2.0 * n * 3 * d * classes
    return 2.0 * n * (recipe.features * d + recipe.features ** 2) + 10.0 * recipe.features ** 3
