"""The smoothed activation under a Gaussian mask (docs/methods/a-mg-noise.md A.2, Figures 1–2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.theorems.smoothing import expected_relu, monte_carlo_relu, neuron_input, proxy_relu, smoothing_experiment


def test_closed_form_within_three_standard_errors_of_monte_carlo():
    r = smoothing_experiment(kappas=(0.2, 1.0), z_grid=np.linspace(-2.1, 2.1, 11), draws=40_000, seed=3)
    assert r.max_gap_in_se < 3.0
    degenerate = r.table[r.table["mc_standard_error"] == 0]  # every masked activation was 0
    assert (degenerate["closed_form"] < 1e-6).all() and len(degenerate) < len(r.table)


def test_kappa_to_zero_gives_relu_and_proxy_gap_is_the_density_term():
    z = np.linspace(-2, 2, 41)
    assert np.allclose(expected_relu(z, 1e-9), np.maximum(z, 0), atol=1e-9)
    assert np.array_equal(expected_relu(z, 0.0), np.maximum(z, 0))
    s = 0.7
    gap = expected_relu(z, s) - proxy_relu(z, s)
    assert np.all(gap > 0)
    assert float(gap.max()) == pytest.approx(s / math.sqrt(2 * math.pi))    # at z = 0
    assert float(expected_relu(0.0, s)) == pytest.approx(s / math.sqrt(2 * math.pi))


def test_neuron_input_has_the_requested_sum_and_norm():
    rng = np.random.default_rng(0)
    v = neuron_input(1.3, 1.0, rng)
    assert v.sum() == pytest.approx(1.3) and np.linalg.norm(v) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        neuron_input(5.0, 1.0, rng)  # z² > d‖v‖²


def test_monte_carlo_is_seeded():
    a = monte_carlo_relu(np.full(20, 0.05), 0.5, 10_000, np.random.default_rng(1))
    b = monte_carlo_relu(np.full(20, 0.05), 0.5, 10_000, np.random.default_rng(1))
    assert a == b


def test_cli_writes_csv_figures_page_and_json(tmp_path):
    result = CliRunner().invoke(app, ["theory", "smoothing", "--kappas", "0.2", "--draws", "2000",
                                      "--workdir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    folder = tmp_path / "reports" / "theory"
    assert (folder / "smoothing.csv").read_text().startswith("kappa,z,")
    svg = (folder / "smoothing.svg").read_text()
    assert "z = wᵀx" in svg and "E[ReLU" in svg                    # labelled axes
    page = (folder / "index.html").read_text()
    assert 'id="smoothing"' in page and 'src="data:image/svg+xml;base64,' in page
    assert doc["experiment"] == "smoothing" and doc["max_gap_in_se"] >= 0
    bad = CliRunner().invoke(app, ["theory", "smoothing", "--kappas", "-1", "--workdir", str(tmp_path)])
    assert bad.exit_code == 2
