"""The new empirical bounds against DP-SGD models whose ε the accountant knows.

Digits MLPs trained with DP-SGD at σ = 1 and σ = 2, a pool of 16 each (the models of each pool
differ by their seed streams and their random half of the data); every model in turn is the
audited one, the other pairs its references (leave-one-out), and every pool attack's bounds
are taken with thresholds chosen on another model. No empirical bound may exceed the
accountant's ε more often than its 95 % confidence allows, and on the same counts the
Gaussian-DP bound is never looser than the Clopper–Pearson one.

Measured (16 targets × 6 attacks each): σ 1, accountant ε 9.17: Clopper–Pearson ε at most 0.29
(mean 0.029), GDP ε at most 0.94 (mean 0.118, μ ≤ 0.25); σ 2, ε 3.10: 0.18 (0.015) and 0.46
(0.041). No bound exceeded the accountant's ε.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.analysis.empirical import _epsilon_from_counts, best_threshold
from privaudit.analysis.gdp import gdp_epsilon, mu_from_counts
from privaudit.attacks.pool_attacks import leave_one_out
from privaudit.attacks.registry import REFERENCE_ATTACKS
from privaudit.pipeline.pools import ensure_pool
from privaudit.pipeline.workspace import Workspace

pytestmark = pytest.mark.slow

POOL = 16
DELTA = 1e-5


@pytest.fixture(scope="module", params=[1.0, 2.0], ids=["sigma1", "sigma2"])
def dp_pool(request, tmp_path_factory, data_cache, tiny):
    ws = Workspace(tmp_path_factory.mktemp("dp-pool")).ensure_writable()
    cfg = tiny(dp=True, noise_multiplier=request.param, part_size=440, width=256, epochs=40, batch_size=20, seed=2)
    pool = ensure_pool(cfg, POOL, ws, data_cache, torch.device("cpu"))
    eps = {ws.read_model_metrics(name)["epsilon"] for name in pool.models}
    assert len(eps) == 1  # one recipe, one accountant ε
    per_target, scores = leave_one_out(pool.logits, pool.pop_logits, pool.keep, pool.labels, pool.pop_labels,
                                       attacks=REFERENCE_ATTACKS, delta=DELTA)
    return eps.pop(), per_target, scores, pool.keep


def test_no_bound_exceeds_the_accountant_more_often_than_its_confidence_allows(dp_pool):
    eps, per_target, _, _ = dp_pool
    assert 1.0 < eps < 60.0
    bounds = {key: np.array([m[key] for rows in per_target.values() for m in rows])
              for key in ("eps_lower_bound", "gdp_epsilon")}
    for key, values in bounds.items():
        assert values.size == POOL * len(REFERENCE_ATTACKS)
        assert np.all(np.isfinite(values)) and np.all(values >= 0)
        # each bound fails with probability at most 5 %: allow that rate (measured: 0)
        assert np.mean(values > eps) <= 0.05, (key, eps, values.max())
    mus = np.array([m["gdp_mu"] for rows in per_target.values() for m in rows])
    assert np.all(mus >= 0) and mus.max() > 0.05  # the attacks do find something
    # and the curve's bound is the sharper one on these audits
    assert bounds["gdp_epsilon"].mean() > 2 * bounds["eps_lower_bound"].mean() > 0


def test_gdp_is_never_looser_than_clopper_pearson_on_the_same_counts(dp_pool):
    """At the Clopper–Pearson bound's own threshold (chosen on the calibration model), the
    GDP bound computed from the very same false-positive and false-negative counts is at
    least as large, for every target and attack."""
    _, per_target, scores, keep = dp_pool
    m = len(keep)
    checked = 0
    for attack, s in scores.items():
        for t in range(m):
            c = (t + 2) % m
            thr = best_threshold(keep[c].astype(int), s[c], delta=DELTA)
            member = keep[t]
            fp = int(np.sum(s[t][~member] >= thr))
            fn = int(np.sum(s[t][member] < thr))
            n_neg, n_pos = int((~member).sum()), int(member.sum())
            cp = float(_epsilon_from_counts(fp, n_neg, fn, n_pos, DELTA, 0.95))
            assert cp == pytest.approx(per_target[attack][t]["eps_lower_bound"])
            gdp = gdp_epsilon(float(mu_from_counts(fp, n_neg, fn, n_pos, 0.95)), DELTA)
            assert gdp >= cp - 1e-9, (attack, t, fp, fn, cp, gdp)
            checked += 1
    assert checked == m * len(scores)
