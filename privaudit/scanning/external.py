"""``privaudit audit-model``: audit a model trained elsewhere, from its weights file.

The user gives the architecture, the weights, the dataset and which of its samples the
model trained on (``members``). privaudit then

1. takes as many non-members from the rest of the dataset (seeded; or ``non_members``);
   the audited samples A are the members and the non-members;
2. sets aside, from the samples outside A, a *population* P (RMIA's z) and a training pool
   T for the references;
3. trains M reference models with the recipe the user states (architecture, epochs, batch,
   learning rate, weight decay, augmentation, MG noise), each on as many samples of T as the
   target had members (complementary pairs of random subsets), so that no reference ever
   sees an audited sample: the offline attacks of LiRA (Carlini et al., arXiv:2112.03570,
   Section VI-C) and RMIA (Zarifzadeh et al., arXiv:2312.03262) need nothing else;
4. computes the target's and every reference's logits on A and P, and runs every attack
   :func:`privaudit.scanning.run.scan` can on them (thresholds by cross-validation over A);
5. says how well the references match the target: their accuracy on the audited
   non-members beside the target's, and the Kolmogorov–Smirnov distance between the
   target's and the references' logit-scaled confidences on those non-members. References
   that do not match (a gap over :data:`ACCURACY_GAP_WARN` or a distance over
   :data:`KS_WARN`) make the reference attacks unreliable, and the page warns.

Inputs are normalised as a PyTorch script does: ``ToTensor`` (pixel / 255) then per-channel
``Normalize(mean, std)`` (default mean 0, std 1). The references are trained on the same
inputs.

Every reference's logits are saved under ``attacks/audit-model/<key>/`` as it finishes
(atomically), so an interrupted audit resumes; the key hashes everything they depend on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from privaudit.attacks.lira import logit_scaled_confidence
from privaudit.core.config import RunConfig
from privaudit.core.timing import phase
from privaudit.data import Normaliser
from privaudit.errors import ConfigError, DataError, brief
from privaudit.files.atomic import write_bytes, write_json
from privaudit.files.npfiles import ids_problem, load_npy, npz_bytes
from privaudit.models import build_model
from privaudit.models.weights_file import load_into, read_state_dict
from privaudit.pipeline.runs import DataCache
from privaudit.pipeline.workspace import Workspace
from privaudit.scanning.inputs import Outputs, References, ScanInput
from privaudit.scanning.run import ScanResult, scan
from privaudit.training import train_model
from privaudit.training.loop import EpochCallback
from privaudit.training.results import RoleData, predict_logits

ACCURACY_GAP_WARN = 0.05
KS_WARN = 0.2
FOLDER = "audit-model"


def parse_ids(text: str, n: int, what: str) -> np.ndarray:
    """Sample indices from a file (``.npy``, or text with integers separated by commas,
    spaces or newlines) or inline (``0:5000``, ``3,17,42``); checked against the dataset's
    ``n`` samples and for repeats."""
    p = Path(text)
    problem = ids_problem(text, what)
    if problem:
        raise DataError(problem)
    try:
        if p.suffix == ".npy" and p.is_file():
            ids = load_npy(p, f"{what} {p}")
        elif p.is_file():
            ids = np.array(p.read_text().replace(",", " ").split(), dtype=np.int64)
        elif ":" in text:
            a, b = text.split(":", 1)
            ids = np.arange(int(a), int(b))
        else:
            ids = np.array([int(t) for t in text.replace(",", " ").split()], dtype=np.int64)
    except (ValueError, OSError) as exc:
        raise DataError(f"{what}: expected a .npy or text file of sample indices, a range a:b or a list "
                        f"i,j,k ({brief(exc)})") from None
    ids = np.asarray(ids).ravel()
    if ids.dtype.kind not in "iu":
        raise DataError(f"{what}: sample indices must be integers, got {ids.dtype}")
    ids = ids.astype(np.int64)
    if ids.size == 0:
        raise DataError(f"{what}: no sample indices")
    if ids.min() < 0 or ids.max() >= n:
        raise DataError(f"{what}: indices must lie in [0, {n}) (the dataset's pooled samples), found "
                        f"{ids.min() if ids.min() < 0 else ids.max()}")
    if len(np.unique(ids)) != len(ids):
        raise DataError(f"{what}: {len(ids) - len(np.unique(ids))} indices are repeated")
    return ids


@dataclass
class Plan:
    """The samples of an external audit (indices into the pooled dataset)."""

    members: np.ndarray
    non_members: np.ndarray
    population: np.ndarray
    ref_train: list[np.ndarray]      # each reference's training samples
    ref_size: int


def plan_samples(n: int, members: np.ndarray, non_members: np.ndarray | None, references: int,
                 seed: int) -> Plan:
    """Non-members, population and the references' training sets (module docstring)."""
    if references < 2 or references % 2:
        raise ConfigError(f"`pool_size` must be an even number >= 2 (got {references})")
    rng = np.random.default_rng(seed)
    rest = np.setdiff1d(np.arange(n), members)
    if non_members is None:
        if len(rest) < len(members):
            raise DataError(f"`members`: {len(members)} members leave only {len(rest)} other samples; give "
                            "`non_members`")
        non_members = np.sort(rng.choice(rest, size=len(members), replace=False))
    elif np.intersect1d(members, non_members).size:
        raise DataError(f"`non_members`: {np.intersect1d(members, non_members).size} samples are also members")
    outside = np.setdiff1d(rest, non_members)
    outside = outside[rng.permutation(len(outside))]
    z = min(len(members) + len(non_members), len(outside) // 4)
    population, pool = np.sort(outside[:z]), outside[z:]
    size = min(len(members), len(pool) // 2)
    if size < 2 or z < 1:
        raise DataError(f"only {len(outside)} samples lie outside the audited ones: not enough to train reference "
                        "models on other data (give fewer `members` or `non_members`)")
    ref_train = []
    for _ in range(references // 2):
        perm = rng.permutation(len(pool))
        ref_train += [np.sort(pool[perm[:size]]), np.sort(pool[perm[size:2 * size]])]
    return Plan(members, non_members, population, ref_train, size)


def channel_normaliser(mean: list[float], std: list[float], shape: tuple[int, int, int]) -> Normaliser:
    """``ToTensor`` + ``Normalize(mean, std)`` as a :class:`Normaliser` on raw uint8 values:
    (x/255 − m)/s = (x − 255 m)/(255 s), per channel."""
    c = shape[0]
    mean, std = list(mean) or [0.0], list(std) or [1.0]
    if len(mean) == 1:
        mean = mean * c
    if len(std) == 1:
        std = std * c
    if len(mean) != c or len(std) != c:
        takes = "one value (the images have one channel)" if c == 1 else f"1 or {c} values (one per channel)"
        raise ConfigError(f"`mean` and `std` take {takes}, got {len(mean)} and {len(std)}")
    if any(s <= 0 for s in std):
        raise ConfigError("`std` values must be > 0")
    m = np.broadcast_to(np.asarray(mean, np.float32)[:, None, None] * 255.0, shape).astype(np.float32)
    s = np.broadcast_to(np.asarray(std, np.float32)[:, None, None] * 255.0, shape).astype(np.float32)
    return Normaliser(m, s)


def reference_config(base: RunConfig, part_size: int, references: int, index: int) -> RunConfig:
    """Reference model ``index`` of ``references``: the audited model's recipe ``base`` (the
    shared :class:`privaudit.Recipe`, resolved) on parts of ``part_size`` samples."""
    return replace(base, data=replace(base.data, part_size=part_size)).as_reference(references, index).validated()


def _logits(model: torch.nn.Module, x: np.ndarray, norm: Normaliser, device: torch.device) -> np.ndarray:
    return predict_logits(model.to(device), torch.from_numpy(norm(x)).to(device)).double().numpy()


def _cache_key(recipe_cfg: RunConfig, plan: Plan, norm: Normaliser, references: int) -> str:
    h = hashlib.sha256()
    d = recipe_cfg.recipe.to_dict()
    h.update(json.dumps(d, sort_keys=True).encode())
    for a in (plan.members, plan.non_members, plan.population, *plan.ref_train):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    h.update(norm.mean.tobytes() + norm.std.tobytes() + str(references).encode())
    return h.hexdigest()[:12]


def audit_model(weights: str | Path, base: RunConfig, members: np.ndarray, workspace: Workspace,
                data: DataCache, device: torch.device, *, non_members: np.ndarray | None = None,
                references: int = 8, mean: Sequence[float] = (), std: Sequence[float] = (),
                delta: float = 1e-5, folds: int = 5,
                on_reference: Callable[[int, int], None] | None = None,
                on_start: Callable | None = None,
                on_epoch: EpochCallback | None = None) -> tuple[ScanResult, dict]:
    """Audit the model in ``weights`` (module docstring), trained by the recipe ``base`` (its
    config, the seed the references' draws come from); returns the scan result and the
    references' match to the target (with the reference cache's folder). ``on_start(config)``
    and ``on_epoch(epoch, epochs, loss)`` report each reference model's training."""
    dataset, seed = base.data.dataset, base.seed
    images = data.get(dataset)
    plan = plan_samples(len(images.y), members, non_members, references, seed)
    norm = channel_normaliser(list(mean), list(std), images.input_shape)
    cfgs = [reference_config(base, plan.ref_size, references, i) for i in range(references)]

    target = build_model(base.model.name, images.input_shape, images.num_classes, width=cfgs[0].model.width,
                         args=cfgs[0].model.args)
    load_into(target, read_state_dict(weights), weights)
    audited = np.concatenate([plan.members, plan.non_members])
    t_logits = _logits(target, images.x[audited], norm, device)
    t_pop = _logits(target, images.x[plan.population], norm, device)

    folder = workspace.attacks / FOLDER / _cache_key(cfgs[0], plan, norm, references)
    folder.mkdir(parents=True, exist_ok=True)
    ref_logits, ref_pop = [], []
    for i, cfg in enumerate(cfgs):
        path = folder / f"ref-{i}.npz"
        if on_reference:
            on_reference(i, references)
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as npz:
                    a, p = npz["audited"], npz["population"]
                if a.shape == t_logits.shape and p.shape == t_pop.shape:
                    ref_logits.append(a)
                    ref_pop.append(p)
                    continue
            except (OSError, ValueError, KeyError, EOFError):
                pass  # unreadable: trained again and rewritten
        idx = plan.ref_train[i]
        x_in, y_in, x_out, y_out = (torch.from_numpy(v).to(device) for v in (
            norm(images.x[idx]), images.y[idx], norm(images.x[plan.population]), images.y[plan.population]))
        rd = RoleData(x_in, y_in, x_out, y_out, norm)
        if on_start:
            on_start(cfg)
        with phase("train"):
            result = train_model(cfg, images, device, on_epoch=on_epoch, role=rd)
        a, p = _logits(result.model, images.x[audited], norm, device), _logits(result.model, images.x[plan.population],
                                                                                norm, device)
        write_bytes(path, npz_bytes({"audited": a.astype(np.float32), "population": p.astype(np.float32)}))
        ref_logits.append(a.astype(np.float32).astype(np.float64))
        ref_pop.append(p.astype(np.float32).astype(np.float64))
    write_json(folder / "audit.json", {"weights": str(weights), "dataset": dataset, "references": references,
                                       "seed": seed, "reference_recipe": cfgs[0].recipe.to_dict(),
                                       "members": int(len(plan.members)), "non_members": int(len(plan.non_members)),
                                       "population": int(len(plan.population)), "reference_size": plan.ref_size})

    n_in = len(plan.members)
    y = images.y[audited]
    refs = References(np.stack(ref_logits)[:, :, None, :], np.zeros((references, len(audited)), bool),
                      np.stack(ref_pop)[:, :, None, :], t_pop[:, None, :], images.y[plan.population])
    inp = ScanInput(f"{Path(weights).name} on {dataset}", Outputs(t_logits[:n_in, None, :], None, y[:n_in]),
                    Outputs(t_logits[n_in:, None, :], None, y[n_in:]), references=refs)
    with phase("attack"):
        scanned = scan(inp, delta=delta, folds=folds, seed=seed)
    match = reference_match(t_logits[n_in:], np.stack(ref_logits)[:, n_in:], y[n_in:], t_logits[:n_in], y[:n_in])
    match.update(folder=str(folder), reference_size=plan.ref_size, population=int(len(plan.population)))
    return scanned, match


def reference_match(target_out: np.ndarray, refs_out: np.ndarray, y_out: np.ndarray, target_in: np.ndarray,
                    y_in: np.ndarray) -> dict:
    """How alike the references and the target are on the audited non-members (which none
    of them trained on): accuracies, their gap, and the two-sample Kolmogorov–Smirnov
    distance between the target's logit-scaled confidences and the references' (pooled).
    Shapes: target_out (n, C), refs_out (M, n, C), y_out (n,)."""
    from scipy.stats import ks_2samp

    t_acc = float((target_out.argmax(1) == y_out).mean())
    r_acc = [float((r.argmax(1) == y_out).mean()) for r in refs_out]
    phi_t = logit_scaled_confidence(target_out, y_out)
    phi_r = np.concatenate([logit_scaled_confidence(r, y_out) for r in refs_out])
    ks = float(ks_2samp(phi_t, phi_r).statistic)
    gap = t_acc - float(np.mean(r_acc))
    warnings = []
    if abs(gap) > ACCURACY_GAP_WARN:
        warnings.append(f"the references' accuracy on the non-members ({np.mean(r_acc):.3f}) differs from the "
                        f"target's ({t_acc:.3f}) by more than {ACCURACY_GAP_WARN}: state the target's recipe more "
                        "closely (--epochs, --lr, --batch-size, --augment)")
    if ks > KS_WARN:
        warnings.append(f"the target's confidences on non-members differ from the references' (Kolmogorov–Smirnov "
                        f"distance {ks:.2f} > {KS_WARN}): the reference attacks may misjudge membership")
    return {"target_train_accuracy": float((target_in.argmax(1) == y_in).mean()),
            "target_test_accuracy": t_acc, "reference_test_accuracy": float(np.mean(r_acc)),
            "reference_test_accuracy_sd": float(np.std(r_acc, ddof=1)) if len(r_acc) > 1 else 0.0,
            "accuracy_gap": gap, "ks_distance": ks, "warnings": warnings}
