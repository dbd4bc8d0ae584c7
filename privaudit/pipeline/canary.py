"""The one-run canary audit (Steinke, Nasr & Jagielski, NeurIPS 2023) for any defence.

One extra model of the audited recipe (role ``canary``) trains on the target's members plus
each of m canaries (the target's non-members) included independently with probability ½.
The auditor scores every canary with the model's loss (score = −loss), guesses IN for the k
highest and OUT for the k lowest scores, and turns the number of correct guesses into an ε
lower bound (:func:`privaudit.analysis.empirical.one_run_epsilon_lower_bound`) and, from the same
guesses, the f-DP one-run bound of Mahloujifar, Melis, Chaudhuri (ICML 2025) on the Gaussian-DP μ
and its ε (:func:`privaudit.analysis.gdp.fdp_one_run_mu_lower_bound`, docs/methods/d-attacks.md D.6). k is
tried on a small grid of fractions of m; the confidence is split evenly over the grid
(Bonferroni), so the maximum over the grid still holds at the stated confidence, for each bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from privaudit.analysis.empirical import one_run_epsilon_lower_bound, one_run_guesses
from privaudit.analysis.gdp import fdp_one_run_mu_lower_bound, gdp_epsilon
from privaudit.attacks.scores import loss_scores
from privaudit.core.config import RunConfig
from privaudit.data import split_parts
from privaudit.data.splits import canary_inclusion, canary_seed
from privaudit.pipeline.pools import model_logits
from privaudit.pipeline.runs import DataCache, ensure_model
from privaudit.pipeline.workspace import Workspace
from privaudit.training.loop import EpochCallback

GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2)


def one_run_audit(recipe: RunConfig, workspace: Workspace, data: DataCache, device: torch.device, *,
                  confidence: float = 0.95, on_start: Callable[[RunConfig], None] | None = None,
                  on_epoch: EpochCallback | None = None) -> dict:
    """Train (or reuse) the canary model of ``recipe`` and return the audit's ε lower bound
    at the recipe's δ, with the guesses behind it."""
    cfg = recipe.recipe.as_canary().validated()
    run = ensure_model(cfg, workspace, data, device, on_start=on_start, on_epoch=on_epoch)
    images = data.images(cfg)
    split = split_parts(len(images.y), cfg.data.part_size, cfg.data.seed)
    canaries = split.target_out
    included = canary_inclusion(len(canaries), canary_seed(cfg.data.seed))
    logits = model_logits(workspace, run.name, images, canaries, ("plain",), device)[:, 0].astype(np.float64)
    scores = loss_scores(logits, images.y[canaries])
    m = len(canaries)
    per_k_confidence = 1 - (1 - confidence) / len(GUESS_FRACTIONS)
    best = {"eps_lower_bound": 0.0, "num_guesses": 0, "num_correct": 0}
    fdp = {"fdp_mu": 0.0, "fdp_num_guesses": 0, "fdp_num_correct": 0}
    for frac in GUESS_FRACTIONS:
        k = max(1, int(round(frac * m)))
        if 2 * k > m:
            continue
        r, v = one_run_guesses(scores, included, k, k)
        eps = one_run_epsilon_lower_bound(r, v, m, delta=cfg.defence.delta, confidence=per_k_confidence)
        if eps > best["eps_lower_bound"] or best["num_guesses"] == 0:
            best = {"eps_lower_bound": float(eps), "num_guesses": int(r), "num_correct": int(v)}
        mu = fdp_one_run_mu_lower_bound(r, v, m, confidence=per_k_confidence)
        if mu > fdp["fdp_mu"] or fdp["fdp_num_guesses"] == 0:
            fdp = {"fdp_mu": float(mu), "fdp_num_guesses": int(r), "fdp_num_correct": int(v)}
    fdp["fdp_eps_lower_bound"] = float(gdp_epsilon(fdp["fdp_mu"], cfg.defence.delta))
    return {"canary_run": run.name, "num_canaries": m, "num_included": int(included.sum()), "score": "loss",
            "delta": cfg.defence.delta, "confidence": confidence, "guess_fractions": list(GUESS_FRACTIONS),
            **best, **fdp}
