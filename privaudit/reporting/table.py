"""The trade-off table's schema: its columns (``reports/tradeoff.csv``), and how its
boolean column is read back. Every report module reads it from here (the table is built by
:mod:`privaudit.reporting.build` and drawn by :mod:`privaudit.reporting.html`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from privaudit.attacks.pool_attacks import REPLICATED

#: the measures of the pool's replicates that the table carries, the test accuracy first
POOL_MEASURES = ("test_accuracy", *REPLICATED)
POOL_COLUMNS = ["pool_n", "pool_delta", *(c for m in POOL_MEASURES for c in (f"pool_{m}", f"pool_{m}_se"))]

#: the columns of the trade-off table, in the CSV's order: a row per target and attack
COLUMNS = [
    "target_run", "shadow_run", "model", "width", "dataset", "defence", "knob", "kappa", "dp", "noise_multiplier",
    "epsilon", "delta", "accountant", "epsilon_replace_one", "epsilon_replace_one_sigma_half", "seed", "part_size",
    "epochs", "train_accuracy",
    "test_accuracy", "attack", "auc", "auc_lo", "auc_hi", "accuracy", "precision", "recall", "threshold", "advantage",
    "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "n_members", "n_nonmembers",
    # empirical privacy (issue: strongest attacks); thresholds chosen on other models
    "source", "eps_lower_bound", "tpr_at_1pct_fpr_lo", "tpr_at_1pct_fpr_hi", "tpr_at_0p1pct_fpr_lo",
    "tpr_at_0p1pct_fpr_hi", "loo_n_targets", "loo_auc_mean", "loo_auc_std", "loo_tpr_at_1pct_fpr_mean",
    "loo_tpr_at_1pct_fpr_std", "loo_tpr_at_0p1pct_fpr_mean", "loo_tpr_at_0p1pct_fpr_std",
    "loo_eps_lower_bound_mean", "loo_eps_lower_bound_std", "one_run_eps_lower_bound",
    # ε from the whole trade-off curve (docs/methods/d-attacks.md D.6) and the FPR each bound's threshold,
    # chosen on other models, reached on this target; the f-DP one-run bound of the canary audit
    "threshold_strategy", "eps_fpr", "gdp_mu", "gdp_epsilon", "gdp_fpr", "loo_gdp_mu_mean", "loo_gdp_mu_std",
    "one_run_fdp_mu", "one_run_fdp_eps_lower_bound",
    # operating points whose thresholds other models set (D.9): TPR and the FPR reached; PPV at
    # membership priors of 1 % and 10 % at the calibrated 1 % point
    "tpr_at_1pct_fpr_cal", "fpr_at_1pct_cal", "tpr_at_0p1pct_fpr_cal", "fpr_at_0p1pct_cal",
    "tpr_at_0p01pct_fpr_cal", "fpr_at_0p01pct_cal", "ppv_at_1pct_prior", "ppv_at_1pct_prior_lo",
    "ppv_at_1pct_prior_hi", "ppv_at_10pct_prior", "ppv_at_10pct_prior_lo", "ppv_at_10pct_prior_hi",
    # planted canaries (--canaries): TPR on the canary members at the population's threshold
    "canaries", "n_canaries", "canary_tpr_at_1pct_fpr", "canary_tpr_at_1pct_fpr_lo", "canary_tpr_at_1pct_fpr_hi",
    "canary_tpr_at_0p1pct_fpr", "canary_tpr_at_0p1pct_fpr_lo", "canary_tpr_at_0p1pct_fpr_hi",
    # every pool model as a replicate of the setting (docs/methods/e-replicates.md E): how many, and the mean
    # over them of its test accuracy and of each measure with its jackknife standard error
    *POOL_COLUMNS,
]


def as_bool(values: Any) -> pd.Series:
    """The ``dp`` column as booleans: True/False, 1/0, "true"/"false" (any case); missing
    values count as False."""
    s = pd.Series(values)

    def one(v: Any) -> bool:
        if isinstance(v, str):
            return v.strip().lower() in ("true", "1", "yes", "y", "t")
        try:
            if pd.isna(v):
                return False
        except (TypeError, ValueError):
            pass
        return bool(v)

    return s.map(one).astype(bool)
