"""NoisyCGD beside DP-SGD at equal ε and MG noise at equal accuracy."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from privaudit.reporting.defences import noisycgd_comparison
from privaudit.reporting.html import render_report


def _row(model, defence, dp, sigma, eps, acc, auc, tpr, kappa=0.0, attack="shadow"):
    """``eps`` is the replace-one ε; DP-SGD rows report a smaller add/remove ε as ``epsilon``."""
    reported = eps / 3 if defence == "dpsgd" else eps
    return dict(target_run=f"target-{model}-{defence}-{sigma}-{kappa}", model=model, dataset="cifar10", width=100,
                defence=defence, dp=dp, kappa=kappa, noise_multiplier=sigma, epsilon=reported,
                epsilon_replace_one=eps, test_accuracy=acc, attack=attack, auc=auc, tpr_at_0p1pct_fpr=tpr)


TABLE = pd.DataFrame([
    _row("mlp", "dpsgd", True, 2.0, 1.0, 0.35, 0.52, 0.001),
    _row("mlp", "dpsgd", True, 0.5, 10.0, 0.45, 0.60, 0.011),
    _row("mlp", "none", False, None, None, 0.50, 0.70, 0.05),
    _row("mlp", "mg", False, None, None, 0.45, 0.65, 0.03, kappa=1.0),
    _row("convex-relu", "noisycgd", True, 5.0, math.sqrt(10.0), 0.475, 0.55, 0.004),
    _row("convex-relu", "noisycgd", True, 15.0, 0.5, 0.30, 0.51, 0.002),
    _row("convex-relu", "none", False, None, None, 0.48, 0.60, 0.01),
])


def test_interpolates_dpsgd_in_log_epsilon_and_mg_in_accuracy():
    comp = noisycgd_comparison(TABLE).set_index("noise_multiplier")
    at5 = comp.loc[5.0]
    assert at5["dpsgd_auc"] == pytest.approx(0.56)                 # log-ε midpoint of 0.52 and 0.60
    assert at5["dpsgd_test_accuracy"] == pytest.approx(0.40)
    assert at5["mg_auc"] == pytest.approx(0.675)                    # accuracy 0.475 between 0.45 and 0.5
    assert at5["ncgd_auc"] == 0.55 and at5["epsilon"] == pytest.approx(math.sqrt(10))
    at15 = comp.loc[15.0]                                           # ε 0.5 and accuracy 0.30: outside both
    assert math.isnan(at15["dpsgd_auc"]) and math.isnan(at15["mg_auc"])
    assert len(comp) == 2                                           # the plain convex-relu row is no setting


def test_mlp_of_matching_width_is_preferred():
    other = pd.DataFrame([dict(r, width=512, auc=0.9, target_run=r["target_run"] + "-w512")
                          for r in TABLE[TABLE["model"] == "mlp"].to_dict("records")])
    comp = noisycgd_comparison(pd.concat([TABLE, other])).set_index("noise_multiplier")
    assert comp.loc[5.0, "dpsgd_auc"] == pytest.approx(0.56) and comp.loc[5.0, "mlp_width"] == "100"
    only_wide = pd.concat([TABLE[TABLE["model"] != "mlp"], other])
    assert noisycgd_comparison(only_wide).set_index("noise_multiplier").loc[5.0, "mlp_width"] == "512"


def test_epsilons_of_different_adjacency_are_not_mixed():
    comp = noisycgd_comparison(TABLE.drop(columns="epsilon_replace_one"))
    assert comp["dpsgd_auc"].isna().all() and comp["mg_auc"].notna().any()


def test_replace_one_epsilon_of_dpsgd_exact_and_the_papers_half_sigma_comparator():
    from privaudit.analysis.accounting import replace_one_epsilon
    from privaudit.core.config import make_config
    from privaudit.reporting.build import _replace_one_epsilon

    d = make_config(dp=True, noise_multiplier=1.8425).defence
    saved = {"noise_multiplier": 1.8425, "sample_rate": 1 / 106, "steps": 5300}
    assert _replace_one_epsilon(d, saved, sigma_half=True) == pytest.approx(4.797, abs=2e-3)
    exact = _replace_one_epsilon(d, saved)
    assert exact == replace_one_epsilon(1.8425, 1 / 106, 5300, 1e-5)[0]
    assert exact < 4.797 / 1.5                       # the σ/2 comparator is far looser
    assert math.isnan(_replace_one_epsilon(d, {"epsilon": 1.6}))


@pytest.mark.slow
def test_report_has_the_section_only_with_noisycgd_rows():
    html = render_report(TABLE)
    assert 'id="defences"' in html and "NoisyCGD vs DP-SGD" in html
    assert 'id="defences"' not in render_report(TABLE[TABLE["model"] == "mlp"])
    assert noisycgd_comparison(TABLE.iloc[0:0]).empty


def test_a_single_setting_within_two_percent_counts_as_the_same_epsilon():
    table = pd.DataFrame([_row("mlp", "dpsgd", True, 1.84, 4.797, 0.36, 0.53, 0.001),
                          _row("convex-relu", "noisycgd", True, 11.8, 4.8, 0.33, 0.51, 0.001),
                          _row("convex-relu", "noisycgd", True, 5.0, 13.6, 0.33, 0.51, 0.001)])
    comp = noisycgd_comparison(table).set_index("noise_multiplier")
    assert comp.loc[11.8, "dpsgd_auc"] == 0.53 and math.isnan(comp.loc[5.0, "dpsgd_auc"])
