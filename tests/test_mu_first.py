"""μ first (issue 55): each setting's μ over its pool models with its interval on the report's
first screen and in the terminal, the verdicts' replicates and smallest detectable difference,
and the fields ``--json`` carries for them; on a simulated world with pools of 16 models
(tests/test_replicates.py) whose numbers are known."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from cli_helpers import one_dp_target
from rich.console import Console
from test_replicates import MODELS, _world

from privaudit.core.formatting import bounds, detectable, lower_bound
from privaudit.reporting.summary import OVERVIEW_POOL, VERDICT_TIE, summarise


def render(renderable, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text().splitlines()


@pytest.fixture(scope="module")
def world():
    """The simulated world's one attack, with the TPR and AUC that make it the strongest."""
    rows = _world(np.random.default_rng(3), 0.0)
    return summarise(rows.assign(tpr_at_0p1pct_fpr=0.01, auc=0.6))


def test_directed_interval_and_detectable_difference_round_outwards():
    assert bounds(0.2549, 0.3701) == "[0.25, 0.38]" and bounds(0.25, 0.37) == "[0.25, 0.37]"
    assert bounds(float("nan"), 0.3) == ""
    assert detectable("gdp_mu", 0.04101) == "≥ 0.042" and detectable("tpr_at_0p1pct_fpr", 0.012041) == "≥ 1.205 pp"
    assert detectable("auc", None) == ""


def test_json_carries_mu_over_models_and_the_verdicts_power(world):
    doc = world.to_dict()
    row = next(r for r in doc["settings"] if r["setting"] == "baseline")
    assert row["pool_n"] == MODELS
    assert row["pool_gdp_mu_lo"] < row["pool_gdp_mu"] < row["pool_gdp_mu_hi"]
    assert row["pool_mu_epsilon_lo"] <= row["pool_mu_epsilon"] <= row["pool_mu_epsilon_hi"]
    over = next(r for r in doc["overview"] if r["setting"] == "baseline")
    assert set(OVERVIEW_POOL) <= set(over) and over["pool_n_strongest"] == MODELS
    assert over["pool_mu_strongest"] == pytest.approx(row["pool_gdp_mu"])
    mu = next(v for v in doc["verdicts"] if v["metric"] == "gdp_mu")
    assert mu["n_models"] == MODELS and 0 < mu["detectable"] < 1


def test_the_first_screen_gives_mu_over_models_before_auc(world):
    from privaudit.reporting.page_first_screen import first_screen

    page = first_screen(world, [])
    o = world.overview.set_index("setting").loc["baseline"]
    mu = (f"{lower_bound(o['pool_mu_strongest'])}<span class=\"sub\">"
          f"{bounds(o['pool_mu_strongest_lo'], o['pool_mu_strongest_hi'])} over {MODELS} models</span>")
    assert mu in page, page
    eps = f"{lower_bound(o['pool_mu_epsilon_strongest'])}<span class=\"sub\">"
    assert eps in page.split(mu)[1][:200]
    head = page.split('class="data compact settings"')[1].split("</thead>")[0]
    assert head.index(">μ<") < head.index("ε of μ") < head.index("test accuracy</th>") < head.index("paper's attack<")
    assert "estimate (Gaussian curve)" in page and "ε lb<span class=\"sub\">lira-shrunk-online, bound" in page
    v = world.verdicts[world.verdicts["metric"] == "gdp_mu"].iloc[0]
    assert f"(could detect {detectable('gdp_mu', v['detectable'])})" in page
    assert f"{MODELS} replicates per defence" in page


def test_the_terminal_verdicts_give_replicates_and_power_at_80_columns(world):
    from privaudit.cli.summary import verdict_table

    lines = render(verdict_table(world))
    assert max(map(len, lines)) <= 80
    text = " ".join(line.strip() for line in lines)
    v = world.verdicts[world.verdicts["metric"] == "gdp_mu"].iloc[0]
    assert f"{MODELS} per defence; could detect {detectable('gdp_mu', v['detectable'])})" in text
    assert v["verdict"] in (VERDICT_TIE, *world.verdicts["verdict"])


def test_the_audit_table_gives_mu_over_models_per_setting(tmp_path):
    from types import SimpleNamespace

    from privaudit.api.attack import summary_rows
    from privaudit.cli.summary import summary_table

    ws, run_name, metrics = one_dp_target(tmp_path)
    overview = pd.DataFrame([{"model": "mlp", "dataset": "digits", "setting": "σ=1", "strongest": "lira",
                              "pool_mu_strongest": 0.3149, "pool_mu_strongest_lo": 0.2551,
                              "pool_mu_strongest_hi": 0.3701, "pool_n_strongest": 16}])
    lines = render(summary_table(summary_rows(ws, [(run_name, metrics, {})]),
                                 summary=SimpleNamespace(overview=overview)))
    assert max(map(len, lines)) <= 80
    row = next((line for line in lines if line.strip().startswith("σ=1")), "\n".join(lines))
    assert "0.31 [0.25, 0.38]" in row and "1.05" not in row     # the setting's μ over models, not the target's
    header = ["setting", "ε", "acct", "acc", "shadow", "AUC", "TPR.1%", "ε", "lb", "μ", "[models]", "1-run"]
    assert any(line.split() == header for line in lines), lines
