"""``privaudit reproduce``: the three reproductions listed, the index page over a workspace's
reproductions, and the masked-neurons command's bad inputs at the command line (one line,
nothing written)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.reproduction.outputs import write_index
from tests.test_communities import write_communities

runner = CliRunner()


def test_reproduce_lists_the_three_papers():
    result = runner.invoke(app, ["reproduce", "--help"])
    assert result.exit_code == 0
    for paper in ("mg-noise", "hidden-state", "masked-neurons"):
        assert paper in result.output


def test_index_links_every_reproduction_with_its_counts(tmp_path):
    root = tmp_path / "reports" / "reproduce"
    for key, counts, fw in (("mg-noise", {"agrees": 3, "disagrees": 0, "other": 21}, {"row_agrees": 10}),
                            ("hidden-state", {"agrees": 16, "disagrees": 6, "other": 10}, {"row_agrees": 17})):
        (root / key).mkdir(parents=True)
        (root / key / "summary.json").write_text(json.dumps(
            {"paper": f"paper of {key}", "counts": counts, "familywise": {**fw, "row_disagrees": 1},
             "protocol": {"scale": "reduced", "seeds": [0, 1]}, "claims": [{}] * 5, "wall_seconds": 12.0}))
    (root / "broken").mkdir()
    (root / "broken" / "summary.json").write_text("{not json")            # a page being written: skipped
    page = write_index(tmp_path / "reports").read_text()
    assert 'href="mg-noise/index.html"' in page and 'href="hidden-state/index.html"' in page
    assert "16 agree" in page and "6 disagree" in page and "17 agree, 1 disagree" in page
    assert "broken" not in page and "<script" not in page


def test_masked_neurons_bad_inputs_are_one_line_and_write_nothing(tmp_path):
    data = write_communities(tmp_path / "data", rows=8, bad_row=5)
    work = tmp_path / "work"
    for args, words in ((["--data-dir", str(data)], "row 5 has 127"),
                        (["--data-dir", str(tmp_path / "nowhere")], "nowhere"),
                        (["--data-dir", str(data), "--experiments", "heatmap"], "heatmap")):
        result = runner.invoke(app, ["reproduce", "masked-neurons", *args, "--workdir", str(work)])
        assert result.exit_code != 0 and words in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (work / "reports").exists()
