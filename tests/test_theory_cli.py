"""``privaudit theory convergence | federated | masked-neurons | all``: files, page, JSON, errors."""

from __future__ import annotations

import functools
import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.theorems import experiments

runner = CliRunner()


def _run(tmp_path, *args):
    result = runner.invoke(app, ["theory", *args, "--workdir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _svg_ok(path):
    root = ET.parse(path).getroot()                      # well-formed standalone SVG
    assert root.tag.endswith("svg")
    return path.read_text()


def test_convergence_command(tmp_path):
    doc = _run(tmp_path, "convergence", "--kappas", "0,0.5,1", "--iterations", "80", "--n", "60", "--m", "30")
    assert doc["experiment"] == "convergence" and doc["lambda0"] > 0
    kappas = [row["kappa"] for row in doc["per_kappa"]]
    assert kappas == [0.0, 0.5, 1.0]
    folder = tmp_path / "reports" / "theory"
    assert (folder / "convergence.csv").read_text().startswith("kappa,iteration,clean_loss")
    curves = _svg_ok(folder / "convergence.svg")
    assert "iteration" in curves and "clean training loss" in curves
    assert "κ" in _svg_ok(folder / "convergence-2.svg")
    assert 'id="convergence"' in (folder / "index.html").read_text()


def test_federated_command(tmp_path):
    doc = _run(tmp_path, "federated", "--kappas", "0,1", "--local-steps", "1,3", "--workers", "4", "--rounds", "12")
    assert len(doc["final_loss"]) == 4 and doc["workers"] == 4
    folder = tmp_path / "reports" / "theory"
    assert len(doc["figures"]) == 3                        # one per τ and the heatmap
    assert "communication round" in _svg_ok(folder / "federated.svg")
    assert "local steps τ" in _svg_ok(folder / "federated-3.svg")
    assert (folder / "federated-final.csv").read_text().startswith("local_steps,kappa,final_loss")


def test_masked_neurons_command(tmp_path):
    doc = _run(tmp_path, "masked-neurons", "--p", "1,2", "--xi", "0.5", "--local-steps", "1,2", "--rounds", "10",
               "--n", "12", "--d", "8", "--m", "40")
    assert {(r["p"], r["xi"]) for r in doc["bernoulli"]} == {(1, 0.5), (2, 0.5)}
    assert {(r["p"], r["local_steps"]) for r in doc["categorical"]} == {(2, 1), (2, 2)}
    folder = tmp_path / "reports" / "theory"
    assert "keep probability ξ" in _svg_ok(folder / "masked-neurons-2.svg")
    assert "local steps τ" in _svg_ok(folder / "masked-neurons-3.svg")
    grid = (folder / "masked-neurons-grid.csv").read_text().splitlines()
    assert grid[0] == "masks,p,local_steps,xi,final_error" and len(grid) == 5


@pytest.mark.slow
def test_all_runs_every_experiment_and_builds_one_page(tmp_path, monkeypatch):
    small = {
        "smoothing": functools.partial(experiments.run_smoothing, kappas=(0.5,), draws=500),
        "convergence": functools.partial(experiments.run_convergence, kappas=(0.0, 1.0), iterations=60, n=40, m=20),
        "federated": functools.partial(experiments.run_federated, kappas=(0.0,), local_steps=(2,), rounds=10,
                                       n=40, m=20),
        "masked-neurons": functools.partial(experiments.run_masked_neurons, n=10, d=6, m=20, rounds=10,
                                            bernoulli_ps=(1, 2), xis=(0.5,), categorical_ps=(2,), steps=(1,)),
    }
    monkeypatch.setattr(experiments, "RUNNERS", small)
    doc = _run(tmp_path, "all")
    assert set(doc["experiments"]) == set(small) and set(doc["seconds"]) == set(small)
    page = (tmp_path / "reports" / "theory" / "index.html").read_text()
    positions = [page.index(f'id="{name}"') for name in small]
    assert positions == sorted(positions)                  # the page's order
    assert page.count('src="data:image/svg+xml;base64,') == 1 + 2 + 2 + 3


@pytest.mark.parametrize("args", [
    ["convergence", "--labels", "cats"],
    ["convergence", "--kappas", "-0.1"],
    ["convergence", "--iterations", "5"],
    ["federated", "--workers", "0"],
    ["federated", "--local-steps", "1.5"],
    ["masked-neurons", "--xi", "1.5"],
    ["masked-neurons", "--p", "1"],
    ["masked-neurons", "--lr", "0"],
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args):
    result = runner.invoke(app, ["theory", *args, "--workdir", str(tmp_path)])
    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "reports" / "theory" / "index.html").exists()


def test_page_does_not_trust_what_is_on_disk(tmp_path):
    """A summary edited on disk cannot inject markup, read files outside the folder, or run a script."""
    from privaudit.reporting.papers import build_page, papers_section

    folder = tmp_path / "theory"
    folder.mkdir()
    (tmp_path / "secret.svg").write_text("<svg>TOP-SECRET</svg>")
    (folder / "evil.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    (folder / "smoothing.json").write_text(json.dumps({
        "title": "<b>t</b>", "caption": "<img src=x onerror=alert(1)>",
        "figures": ["../secret.svg", "/etc/passwd", "evil.svg"], "tables": ["<i>x</i>.csv"]}))
    for page in ((build_page(folder)).read_text(), papers_section(folder)):
        assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
        assert "<b>t</b>" not in page and "<i>x</i>" not in page
        assert "TOP-SECRET" not in page and "root:" not in page
        assert "<script>" not in page                      # the SVG travels base64-encoded, as an image
        assert page.count('src="data:image/svg+xml;base64,') == 1
