"""The audit of the hidden-state paper's released models (docs/methods/b-hidden-state.md B.5).

Hidden-state accounting bounds only what the *last iterate* reveals. This audit measures how
much that iterate leaks, beside the same measurement for DP-SGD at the same ε, as privaudit
audits any target:

* a population of training images, a seeded 5 % of them planted canaries (their label
  replaced by another class, the samples a model can only fit by memorising them);
* per method and ε, a pool of models, models 2j and 2j+1 trained on complementary random
  halves of the population (:attr:`AuditSetting.models` in all), with the recipe of the
  reproduction at the audit's size; a non-private control (NoisyCGD's recipe without noise)
  shows what the attacks find when nothing hides the members;
* every model in turn the target, the others its references (leave-one-out,
  :func:`privaudit.attacks.pool_attacks.leave_one_out`): LiRA online (per-sample and with
  shrunk variances), RMIA and the loss attack, thresholds chosen on another model; the
  Clopper–Pearson and Gaussian-DP ε lower bounds at δ of each target, TPR at 0.1 % FPR, AUC,
  over every population sample and over the canaries alone.

Each pool's logits are saved (``audit-*.npz`` beside the reproduction's cells, written
atomically), so a rerun attacks again without training.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.files.atomic import write_bytes
from privaudit.files.npfiles import npz_bytes
from privaudit.reproduction.hidden_state import CACHE, EPSILONS, HiddenStateProtocol, Split, recipe_hash

AUDIT_ATTACKS = ("lira-online", "lira-shrunk-online", "rmia", "loss")
CANARY_SHARE = 0.05
CONTROL = ("noisycgd-convex", math.inf)   # the non-private control


def settings(protocol: HiddenStateProtocol) -> list[tuple[str, float]]:
    """(method, target ε) of every audited pool, the control first."""
    return [CONTROL] + [(m, e) for m in protocol.audit.methods for e in EPSILONS]


def population(protocol: HiddenStateProtocol, split: Split) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices into the training set, labels with the canaries planted, canary mask)."""
    rng = np.random.default_rng([protocol.seeds[0], 44])
    n = min(protocol.audit.population, len(split.y))
    idx = np.sort(rng.choice(len(split.y), size=n, replace=False))
    labels = split.y.numpy()[idx].copy()
    canary = np.zeros(n, bool)
    canary[rng.choice(n, size=max(int(round(CANARY_SHARE * n)), 2), replace=False)] = True
    shift = rng.integers(1, split.num_classes, size=int(canary.sum()))
    labels[canary] = (labels[canary] + shift) % split.num_classes
    return idx, labels, canary


def memberships(protocol: HiddenStateProtocol, n: int) -> np.ndarray:
    """(M, n) bool: models 2j and 2j+1 on complementary seeded halves."""
    rng = np.random.default_rng([protocol.seeds[0], 45])
    keep = np.zeros((protocol.audit.models, n), bool)
    for j in range(protocol.audit.models // 2):
        half = rng.permutation(n) < n // 2
        keep[2 * j], keep[2 * j + 1] = half, ~half
    return keep


def pool_path(root: Path, protocol: HiddenStateProtocol, method: str, epsilon: float) -> Path:
    tag = "inf" if not math.isfinite(epsilon) else f"{epsilon:g}"
    return root.joinpath(*CACHE) / protocol.dataset / (
        f"audit-{method}-eps{tag}-{protocol.audit.population}x{protocol.audit.models}-{recipe_hash(protocol)}.npz")


def train_pool(protocol: HiddenStateProtocol, split: Split, method: str, epsilon: float,
               log: Callable[[str], None] | None = None) -> dict:
    """Train the pool of one (method, ε); returns its arrays (logits (M, n, C), keep, …)."""
    import torch

    from privaudit.reproduction.hidden_state_methods import train_method

    idx, labels, canary = population(protocol, split)
    keep = memberships(protocol, len(idx))
    a = protocol.audit
    recipe = replace(protocol.recipe, epochs=a.epochs, batch=a.batch)
    x_pop = split.x[idx]
    y_pop = torch.from_numpy(labels)
    logits, eps, sigma, acc = [], [], [], []
    for k in range(a.models):
        t = train_method(method, x_pop[torch.from_numpy(keep[k])], y_pop[torch.from_numpy(keep[k])], split.x_test,
                         split.y_test, recipe, epsilon, 10_000 + k, num_classes=split.num_classes, query=x_pop)
        assert t.logits is not None  # given a query
        logits.append(t.logits)
        eps.append(t.epsilon)
        sigma.append(t.sigma)
        acc.append(t.test_accuracy)
    if log:
        log(f"audit pool {method} at ε {epsilon:g}: {a.models} models, test accuracy {np.mean(acc):.3f}")
    return {"logits": np.stack(logits), "keep": keep, "labels": labels, "canary": canary,
            "epsilon": np.asarray(eps), "sigma": np.asarray(sigma), "test_accuracy": np.asarray(acc)}


def _remote_pool(protocol: HiddenStateProtocol, data_dir: str | None, download: bool, threads: int, method: str,
                 epsilon: float) -> dict:
    from privaudit.reproduction.hidden_state import worker_split

    return train_pool(protocol, worker_split(protocol.dataset, data_dir, download, threads), method, epsilon)


def _save(path: Path, pool: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, npz_bytes(pool))


def _load(path: Path) -> dict | None:
    try:
        with np.load(path) as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError, KeyError):
        return None  # absent, or damaged: trained again


def pools(protocol: HiddenStateProtocol, models_root: Path, split_loader: Callable[[], Split], *,
          log: Callable[[str], None] | None = None, executor=None, data_dir: str | Path | None = None,
          download: bool = False) -> list[tuple[str, float, dict]]:
    """Every pool of the audit, trained (as Ray tasks with a Ray executor) or read back."""
    found = {(m, e): _load(pool_path(models_root, protocol, m, e)) for m, e in settings(protocol)}
    todo = [key for key, pool in found.items() if pool is None]

    def save(key: tuple[str, float], pool: dict) -> None:
        _save(pool_path(models_root, protocol, *key), pool)
        found[key] = pool

    if todo and hasattr(executor, "map"):
        calls = [(protocol, None if data_dir is None else str(data_dir), download, executor.cpus_per_job, m, e)
                 for m, e in todo]
        for i, pool in executor.map(_remote_pool, calls, lambda i: f"audit pool {todo[i][0]} at ε {todo[i][1]:g}"):
            save(todo[i], pool)
    else:
        for m, e in todo:
            save((m, e), train_pool(protocol, split_loader(), m, e, log))
    out = []
    for (m, e), pool in found.items():
        assert pool is not None  # every pool missing was trained and saved above
        out.append((m, e, pool))
    return out


def attack_pool(pool: dict, delta: float) -> pd.DataFrame:
    """One row per (target model, attack, subset): the leave-one-out metrics."""
    from privaudit.attacks.pool_attacks import evaluate_scores, leave_one_out

    logits, keep, labels, canary = pool["logits"], pool["keep"].astype(bool), pool["labels"], pool["canary"]
    _, scores = leave_one_out(logits[:, :, None, :].astype(np.float64), None, keep, labels, None,
                              attacks=AUDIT_ATTACKS, delta=delta)
    m = len(keep)
    rows = []
    for attack in AUDIT_ATTACKS:
        for t in range(m):
            c = (t + 2) % m
            for subset, sel in (("all", slice(None)), ("canaries", canary)):
                r = evaluate_scores(keep[t][sel].astype(int), scores[attack][t][sel], keep[c][sel].astype(int),
                                    scores[attack][c][sel], delta=delta)
                rows.append({"attack": attack, "target": t, "subset": subset, "auc": r["auc"],
                             "tpr_at_0p1pct_fpr": r["tpr_at_0p1pct_fpr"], "tpr_at_1pct_fpr": r["tpr_at_1pct_fpr"],
                             "eps_lower_bound": r["eps_lower_bound"], "gdp_epsilon": r["gdp_epsilon"],
                             "gdp_mu": r["gdp_mu"]})
    return pd.DataFrame(rows)


def run_audit(protocol: HiddenStateProtocol, models_root: Path, split_loader: Callable[[], Split], *,
              log: Callable[[str], None] | None = None, executor=None, data_dir: str | Path | None = None,
              download: bool = False) -> pd.DataFrame:
    """Every pool of the audit, trained or read back, attacked: one row per (method, ε, target,
    attack, subset) with the accountant's ε and the pool's mean test accuracy."""
    frames = []
    for method, eps, pool in pools(protocol, models_root, split_loader, log=log, executor=executor,
                                   data_dir=data_dir, download=download):
        f = attack_pool(pool, protocol.recipe.delta)
        f.insert(0, "target_epsilon", eps)
        f.insert(0, "method", method)
        f["accountant_epsilon"] = float(np.mean(pool["epsilon"]))
        f["sigma"] = float(np.mean(pool["sigma"]))
        f["test_accuracy"] = float(np.mean(pool["test_accuracy"]))
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def missing_pools(protocol: HiddenStateProtocol, models_root: Path) -> list[str]:
    return [f"audit pool {m} at ε {e:g}" for m, e in settings(protocol)
            if not pool_path(models_root, protocol, m, e).is_file()]
