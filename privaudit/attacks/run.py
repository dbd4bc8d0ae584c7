"""Attacking a trained target: shadow model, attack scores, metrics, saved artifacts."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from privaudit.atomic import read_json, write_bytes, write_json
from privaudit.attacks.scores import confidence_scores, loss_scores
from privaudit.attacks.shadow import ShadowAttack
from privaudit.config import RunConfig
from privaudit.errors import ArtifactError
from privaudit.metrics import attack_metrics
from privaudit.provenance import provenance
from privaudit.runs import DataCache, ensure_model
from privaudit.training.trainer import EpochCallback, predict_logits, role_data
from privaudit.workspace import Workspace

ATTACK_SCHEMA = 1


@dataclass
class AttackResult:
    target: str
    shadow: str
    path: Path
    metrics: dict[str, dict[str, float]]
    reused: bool


def model_outputs(workspace: Workspace, name: str, data: DataCache,
                  device: torch.device) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Logits of a saved model on its own members and non-members (clean inputs), with labels.

    The weights are loaded safely (``allow_pickle=False``) and the model's own saved
    normalisation is used. Returns (logits_in, y_in, logits_out, y_out), float64 / int64.
    """
    cfg = workspace.read_model_config(name)
    images = data.get(cfg.data.dataset)
    loaded = workspace.load_model(name, images.input_shape, images.num_classes)
    rd = role_data(cfg, images, device, normaliser=loaded.normaliser)
    model = loaded.model.to(device)
    return (predict_logits(model, rd.x_in).double().numpy(), rd.y_in.cpu().numpy(),
            predict_logits(model, rd.x_out).double().numpy(), rd.y_out.cpu().numpy())


def run_attacks(target_out: tuple, shadow_out: tuple) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """The three attacks on a target, from its outputs and its shadow's outputs.

    shadow: ML-Leaks logistic regression on top-3 posteriors, threshold 0.5.
    loss: score −loss, threshold −(mean loss over the target's members) (Yeom et al.).
    confidence: score top-1 posterior, threshold = mean top-1 posterior over its members.
    Returns (metrics per attack, arrays: labels and one score vector per attack).
    """
    t_in, ty_in, t_out, ty_out = target_out
    s_in, _, s_out, _ = shadow_out
    labels = np.concatenate([np.ones(len(t_in), dtype=np.int8), np.zeros(len(t_out), dtype=np.int8)])
    logits = np.concatenate([t_in, t_out])
    y = np.concatenate([ty_in, ty_out])
    shadow = ShadowAttack().fit(s_in, s_out)
    scores = {
        "shadow": (shadow.scores(logits), shadow.threshold),
        "loss": (loss_scores(logits, y), float(loss_scores(t_in, ty_in).mean())),
        "confidence": (confidence_scores(logits), float(confidence_scores(t_in).mean())),
    }
    metrics = {name: attack_metrics(labels, s, thr) for name, (s, thr) in scores.items()}
    arrays = {"labels": labels, **{f"score_{name}": s for name, (s, _) in scores.items()}}
    return metrics, arrays


def attack_target(workspace: Workspace, target: str, data: DataCache, device: torch.device,
                  on_start: Callable[[RunConfig], None] | None = None,
                  on_epoch: EpochCallback | None = None) -> AttackResult:
    """Attack the target run ``target``: train (or reuse) its shadow with the identical recipe,
    compute every attack and save ``attacks/<target>/``. Reused when already done for the
    same target and shadow."""
    cfg = workspace.read_model_config(target)
    shadow_cfg = cfg.as_shadow()
    attack_config = {"schema": ATTACK_SCHEMA, "target": target, "shadow": shadow_cfg.run_name,
                     "attacks": ["shadow", "loss", "confidence"], "shadow_features": "top-3 sorted posteriors"}
    folder = workspace.attacks / target
    existing = _read_existing(folder, attack_config)
    if existing is not None:
        return AttackResult(target, shadow_cfg.run_name, folder, existing, True)
    shadow_run = ensure_model(shadow_cfg, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
    metrics, arrays = run_attacks(model_outputs(workspace, target, data, device),
                                  model_outputs(workspace, shadow_run.name, data, device))

    def write(tmp: Path) -> None:
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        write_bytes(tmp / "scores.npz", buf.getvalue())
        write_json(tmp / "metrics.json", metrics)
        write_json(tmp / "config.json", {**attack_config, "provenance": provenance(device)})

    path = workspace.commit_folder(workspace.attacks, target, write)
    return AttackResult(target, shadow_run.name, path, metrics, False)


def _read_existing(folder: Path, attack_config: dict) -> dict | None:
    try:
        saved = read_json(folder / "config.json")
        if not (folder / "scores.npz").is_file():
            return None
        if {k: saved.get(k) for k in attack_config} != attack_config:
            return None
        return read_json(folder / "metrics.json")
    except ArtifactError:
        return None
