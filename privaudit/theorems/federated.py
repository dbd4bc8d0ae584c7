"""Distributed training with Gaussian input masks (docs/methods/a-mg-noise.md A.2, Figure 3(b)).

FedAvg on the two-layer network of :mod:`privaudit.theorems.twolayer`: the n samples are
split into K disjoint shards of near-equal size (a seeded permutation); each round, every
worker starts from the server's W, runs τ local full-batch GD steps on its own masked
inputs, and the server replaces W by the plain average of the workers' weights.

The papers do not publish the worker count or the averaging details; the choices here:

* worker s minimises K · ½‖f(W, X_s ⊙ C_s) − y_s‖², its shard's loss scaled by K, so that
  with τ = 1 a round is exactly one step of centralised masked GD (the average of the K
  gradients K∇L_s is ∇L): the learning rate means the same thing as in Figure 3(a);
* at each local step one mask C for the whole data set is drawn and each worker uses its
  rows, so τ = 1 consumes the random stream exactly as :func:`convergence.masked_gd` does;
* the curve is the clean global training loss ½‖f(W, X) − y‖² after each round.
"""

from __future__ import annotations

import numpy as np

from privaudit.theorems.twolayer import Problem, clean_loss, gradient, mask_inputs


def shards(n: int, workers: int, rng: np.random.Generator) -> list[np.ndarray]:
    """K disjoint index sets covering 0…n−1, sizes differing by at most one."""
    if not 1 <= workers <= n:
        raise ValueError(f"workers must be between 1 and the number of samples {n} (got {workers})")
    return [np.sort(s) for s in np.array_split(rng.permutation(n), workers)]


def federated_gd(problem: Problem, *, kappa: float, local_steps: int, workers: int, rounds: int,
                 lr: float, rng: np.random.Generator) -> np.ndarray:
    """Clean loss after rounds 0…``rounds`` of masked FedAvg, shape (rounds + 1,)."""
    if local_steps < 1 or rounds < 1:
        raise ValueError("local steps and rounds must be at least 1")
    X, y, a = problem.X, problem.y, problem.a
    parts = shards(len(y), workers, rng)
    W = problem.W0.copy()
    losses = np.empty(rounds + 1)
    losses[0] = clean_loss(W, a, X, y)
    for k in range(rounds):
        local = [W.copy() for _ in parts]
        for _ in range(local_steps):
            masked = mask_inputs(X, kappa, rng)
            for Ws, idx in zip(local, parts):
                Ws -= lr * workers * gradient(Ws, a, masked[idx], y[idx])
        W = np.mean(local, axis=0)
        losses[k + 1] = clean_loss(W, a, X, y)
    return losses
