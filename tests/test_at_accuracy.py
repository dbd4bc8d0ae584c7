"""Equal accuracy by construction (``audit --target-accuracies``): the knob search for any
defence, its "cannot reach" answers, and the report's "Which defence at your accuracy"
section with its CSV and JSON."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import privaudit
from privaudit.analysis.matching import match_strength
from privaudit.core.config import make_config
from privaudit.defences import get
from privaudit.executor.auditing import TargetMatch, defended


def _falling(s: float) -> float:
    """A defence whose accuracy falls from 0.95 (s = 0) as 0.95 − 0.1·log2(1 + s)."""
    return 0.95 - 0.1 * math.log2(1 + s)


def test_search_finds_a_defended_setting_never_the_baseline():
    calls = []

    def acc(s):
        calls.append(s)
        return _falling(s)

    m = match_strength(0.945, acc, {0.0: 0.95}, tolerance=0.01, max_strength=64, first=2.0, defended_only=True)
    assert m.within and m.kappa > 0 and abs(_falling(m.kappa) - 0.945) <= 0.01
    assert calls  # the baseline alone (within tolerance) is not an answer
    # a target above what the defence can give: not within, and the search stays in budget
    m = match_strength(0.99, acc, {0.0: 0.95}, tolerance=0.01, max_strength=64, first=2.0, defended_only=True,
                       max_steps=5)
    assert not m.within and len(m.steps) <= 5


def test_search_on_an_integer_knob_tries_whole_numbers():
    seen = []
    m = match_strength(0.7, lambda s: seen.append(s) or _falling(s), {0.0: 0.95}, tolerance=0.02, max_strength=59,
                       first=55, rounder=lambda s: float(min(max(0, round(s)), 59)), defended_only=True)
    assert all(s == int(s) for s in seen) and m.within


def test_early_stopping_strength_maps_to_epochs():
    base = make_config(dataset="digits", epochs=40)
    first, top, to_value, rounder = get("early-stopping").search_space(base)
    assert (first, top) == (35.0, 39.0) and to_value(35.0) == 5.0 and to_value(0.0) == 40.0
    cfg = defended(base, "early-stopping", 12)
    assert cfg.train.epochs == 12 and cfg.with_epochs(3).defence.knob == 3.0


@pytest.mark.parametrize("target,rng,status", [(0.9, (0.85, 0.95), "not reached"),
                                               (0.99, (0.85, 0.95), "cannot reach: above"),
                                               (0.5, (0.85, 0.95), "cannot reach: below")])
def test_status_says_why_a_target_was_missed(target, rng, status):
    assert TargetMatch("mixup", target, None, 0.9, False, 0.01, rng).status == status


def test_a_defence_above_the_target_at_its_strongest_setting_is_audited_there():
    assert TargetMatch("top-k", 0.5, 1.0, 0.9, False, 0.01, (0.9, 0.9)).status == "above the target"


@pytest.mark.slow
def test_target_accuracies_end_to_end(tmp_path):
    """Two defences searched to one accuracy on digits: additive noise reaches it, top-k (which
    keeps the model's accuracy) stays above it, so it is audited at its strongest setting and
    reported "above the target", not compared; the page, the CSV and the JSON say so."""
    base_acc = privaudit.train(dataset="digits", epochs=20, part_size=200, workdir=tmp_path).metrics["test_accuracy"]
    goal = round(base_acc - 0.05, 3)
    plan = privaudit.audit(dataset="digits", defences="input-noise,top-k", target_accuracies=str(goal), epochs=20,
                           part_size=200, attacks="shadow", workdir=tmp_path, match_tolerance=0.02, dry_run=True)
    to_train = sum(m["models"] - m["reused"] for m in plan.models)
    assert any("counted at its budget" in n for n in plan.notes)
    report = privaudit.audit(dataset="digits", defences="input-noise,top-k", target_accuracies=str(goal), epochs=20,
                             part_size=200, attacks="shadow", workdir=tmp_path, match_tolerance=0.02)
    found = {m.defence: m for m in report.target_matches}
    assert found["input-noise"].within and abs(found["input-noise"].accuracy - goal) <= 0.02
    assert found["top-k"].status == "above the target" and found["top-k"].knob == 1.0
    assert found["top-k"].accuracy == pytest.approx(base_acc)
    at = pd.read_csv(tmp_path / "reports" / "defences_at_accuracy.csv")
    row = at[at["defence"] == "additive input noise"].iloc[0]
    assert row["status"] == "reached" and row["test_accuracy_lo"] <= row["test_accuracy"] <= row["test_accuracy_hi"]
    assert math.isfinite(row["weak_tpr_at_0p1pct_fpr"])
    top = at[at["status"] == "above the target"].iloc[0]  # audited at k = 1, never dropped
    assert math.isfinite(top["weak_tpr_at_0p1pct_fpr"]) and top["test_accuracy"] > goal + 0.02
    assert top["verdict"].startswith("not compared: above the target")
    page = (tmp_path / "reports" / "index.html").read_text()
    assert "Which defence at your accuracy" in page and "above the target" in page
    doc = report.to_dict()
    assert {e["defence"] for e in doc["target_accuracies"]} == {"input-noise", "top-k"}
    assert len(doc["summary"]["at_accuracy"]) == 2
    saved = json.loads((tmp_path / "reports" / "accuracy_targets.json").read_text())
    assert {e["defence"] for e in saved} == {"input-noise", "top-k"}
    # the dry run priced the search at its budget: the run trained no more than it counted
    trained = len([p for p in (tmp_path / "models").iterdir() if p.is_dir() and not p.name.startswith(".")]) - 1
    steps = len(found["input-noise"].steps)
    assert 1 <= steps <= to_train and trained <= to_train


def test_dry_run_stand_ins_cover_the_search_range_within_the_knob_range():
    """The settings a dry run prices a search by: distinct, inside the knob's range, at most
    the budget; whole epochs for early stopping; the one audited setting for top-k."""
    from privaudit.executor.auditing import search_standins

    base = make_config(dataset="digits", epochs=30)
    for name in ("input-noise", "weight-decay", "mg", "dpsgd", "early-stopping", "mixup"):
        vals = search_standins(base, name, 16)
        d = get(name)
        assert 3 <= len(vals) <= 16 and len(set(vals)) == len(vals), name
        assert all(d.check_knob(v) == v for v in vals), name
        cfgs = {defended(base, name, v).validated().run_name for v in vals}
        assert len(cfgs) == len(vals), name
    epochs = search_standins(base, "early-stopping", 16)
    assert all(v == int(v) and 1 <= v < 30 for v in epochs)
    assert search_standins(base, "top-k", 16) == [1.0] and search_standins(base, "label-only", 4) == [0.0]


def _targets_frame():
    """Two targets, three defences each, one seed: at 0.85 every defence has μ over 16 pool
    models (the verdicts compare μ), at 0.8 the first has none (they compare TPR)."""
    from privaudit.reporting.at_accuracy import COLUMNS, _verdicts

    rows = []
    for target, names, mus, tprs in ((0.85, ("adversarial regularisation", "additive input noise", "dropout"),
                                      (0.3187, 1.2345, 0.4), (0.123, 0.223, 0.053)),
                                     (0.8, ("DP-SGD", "early stopping", "weight decay"), (math.nan, 0.5, 0.6),
                                      (0.153, 0.183, 0.203))):
        for name, mu, tpr in zip(names, mus, tprs):
            row = {c: math.nan for c in COLUMNS}
            row.update(model="mlp", dataset="digits", target_accuracy=target, defence=name, setting="λ=0.123",
                       status="reached", verdict="", correction="", measure="", comparisons=0, n_seeds=1,
                       test_accuracy=0.851, strong_tpr_at_0p1pct_fpr=tpr, strong_tpr_at_0p1pct_fpr_lo=tpr - 0.01,
                       strong_tpr_at_0p1pct_fpr_hi=tpr + 0.012, weak_tpr_at_0p1pct_fpr=0.004, strong_mu=mu,
                       strong_mu_lo=mu - 0.0612, strong_mu_hi=mu + 0.0712, n_models=16)
            rows.append(row)
    return _verdicts(pd.DataFrame(rows, columns=COLUMNS))


def _printed(at) -> list[str]:
    from types import SimpleNamespace

    from rich.console import Console

    from privaudit.cli.summary import at_accuracy_table

    console = Console(width=80, record=True, file=open(__import__("os").devnull, "w"))
    console.print(at_accuracy_table(SimpleNamespace(at_accuracy=at)))
    return console.export_text().splitlines()


def test_terminal_table_shows_the_measure_the_verdicts_compare_within_80_columns():
    """Where the verdicts compare μ the row shows μ over the pool models with its interval
    (mean and lower end rounded down, upper end up) and the strong TPR alone; where they
    compare TPR, the TPR with its interval; every line within 80 columns, the caption whole."""
    at = _targets_frame()
    assert list(at.groupby("target_accuracy", sort=False)["measure"].first()) == ["μ over pool models",
                                                                                  "TPR at 0.1 % FPR"]
    lines = _printed(at)
    text = "\n".join(lines)
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "μ [models]" in lines[1] + lines[2] and "strong" in lines[1] + lines[2]
    row = next(line for line in lines if "0.31 [" in line)             # adversarial regularisation's
    assert "0.31 [0.25, 0.39]" in row and row.split()[-3] == "12.3" and "(11.3" not in text  # μ's interval only
    assert "1.23 [1.17, 1.31]" in text and "(14.3–16.5)" in text and "(4.3–6.5)" not in text
    assert "0.50 [" not in text                                    # 0.8 compares TPR: no μ shown there
    caption = " ".join(line.strip() for line in lines if line.strip()).split("Gaussian-DP μ, the mean over ")[1]
    assert caption.startswith("the setting's 16 pool models") and "elsewhere the verdict compares strong TPR" in caption
    assert caption.endswith("missed: inside that range, not reached")

    tpr_only = _printed(at[at["target_accuracy"] == 0.8])          # no μ compared: the table as it was
    assert "μ" not in "\n".join(tpr_only) and any("15.3 (14.3–16.5)" in line for line in tpr_only)
    assert max(len(line.rstrip()) for line in tpr_only) <= 80


def test_page_shows_mu_over_models_where_the_verdicts_compare_it():
    from types import SimpleNamespace

    from privaudit.reporting.page_at_accuracy import at_accuracy_section

    at = _targets_frame()
    overview = pd.DataFrame({"model": ["mlp"], "dataset": ["digits"], "family": ["dropout"], "setting_id": ["s"],
                             "strongest": ["lira"], "test_accuracy": [0.85]})
    html = at_accuracy_section(SimpleNamespace(at_accuracy=at, overview=overview,
                                               settings=pd.DataFrame({"setting_id": [], "attack": []})))
    first, second = html.split("<h4>Test accuracy ")[1:]
    assert first.startswith("0.850") and "Verdicts compare the strong attack's μ over pool models" in first
    assert first.count("over 16 models") == 3 and "[0.25, 0.39]" in first and ">0.31<" in first
    assert "strong μ over pool models" in first and "estimate under the Gaussian assumption" in first
    assert "Verdicts compare the strong attack's TPR at 0.1 % FPR" in second and "over 16 models" not in second
