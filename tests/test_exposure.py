"""Who leaks: the most exposed members of a target (privaudit.pipeline.exposed), the report's
section of them (privaudit.reporting.page_exposure), and an audit end to end."""

from __future__ import annotations

import base64
import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from privaudit.files.npfiles import npz_bytes
from privaudit.pipeline.exposed import (
    FILE,
    exposure_attack,
    members_digest,
    most_exposed,
    read_exposed,
    top_count,
    top_order,
)
from privaudit.reporting.page_exposure import choose_settings, exposure_groups, exposure_section, grid_png, jaccard


def slow_top(scores, k):
    """The reference ranking: highest first, ties to the earlier position, NaN last."""
    keyed = [(1 if math.isnan(s) else 0, -s if not math.isnan(s) else 0.0, i) for i, s in enumerate(scores)]
    return [i for _, _, i in sorted(keyed)[:k]]


@pytest.mark.parametrize("seed", range(6))
def test_top_16_and_top_percent_match_a_slow_reference(seed):
    rng = np.random.default_rng(seed)
    n_data = 3000
    x = rng.integers(0, 17, size=(n_data, 1, 4, 4), dtype=np.uint8)
    y = rng.integers(0, 10, size=n_data)
    n = int(rng.integers(50, 900))
    sample_ids = rng.choice(n_data, size=2 * n, replace=False)
    labels = rng.permutation(np.r_[np.ones(n), np.zeros(n)]).astype(np.int8)
    # ties (integers) on some seeds, NaN on others
    s = rng.integers(0, 40, size=2 * n).astype(float) if seed % 2 else rng.normal(size=2 * n)
    if seed % 3 == 0:
        s[rng.choice(2 * n, size=5, replace=False)] = np.nan
    scores = {"rmia": rng.normal(size=2 * n), "lira-online": s, "lira-offline": rng.normal(size=2 * n)}
    top = most_exposed(scores, "rmia", labels, sample_ids, x, y)
    members = [i for i in range(2 * n) if labels[i] == 1]
    member_scores = [float(s[i]) for i in members]
    ref16 = [sample_ids[members[j]] for j in slow_top(member_scores, 16)]
    k = max(1, n // 100)
    assert k == top_count(n)
    ref_pct = [sample_ids[members[j]] for j in slow_top(member_scores, k)]
    assert top.attack == "lira-online"
    assert top.indices.tolist() == ref16 and top.top_percent.tolist() == ref_pct
    assert np.array_equal(top.images, x[ref16]) and top.images.dtype == np.uint8
    assert top.classes.tolist() == y[ref16].tolist()
    assert np.array_equal(top.scores, np.asarray(member_scores)[slow_top(member_scores, 16)], equal_nan=True)
    assert top.n_members == n and top.pixel_max == int(x.max())
    assert top.members == members_digest(sample_ids[labels == 1][::-1])  # the set, not its order
    summary = top.summary()
    assert [t["index"] for t in summary["top16"]] == ref16 and summary["top_percent_indices"] == ref_pct
    assert summary["lira_attack"] == "lira-online"


def test_ranking_attack_preference_and_counts():
    s = {"rmia": np.zeros(3), "lira-offline": np.zeros(3), "lira-online": np.zeros(3)}
    assert exposure_attack(s, "rmia") == "lira-online"
    assert exposure_attack({k: s[k] for k in ("rmia", "lira-offline")}, "rmia") == "lira-offline"
    assert exposure_attack({"rmia": s["rmia"], "shadow-pool": s["rmia"]}, "shadow-pool") == "shadow-pool"
    assert exposure_attack({}, None) is None
    assert [top_count(n) for n in (0, 1, 99, 100, 199, 200, 25000)] == [0, 1, 1, 1, 1, 2, 250]
    assert top_order(np.array([1.0, 3.0, 3.0, np.nan, 2.0]), 5).tolist() == [1, 2, 4, 0, 3]
    assert most_exposed({"lira-online": np.ones(4)}, None, np.zeros(4), np.arange(4),
                        np.zeros((4, 1, 2, 2), np.uint8), np.zeros(4)) is None  # no members


def test_read_exposed_round_trip_and_refusals(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(100, 3, 4, 4), dtype=np.uint8)
    top = most_exposed({"lira-online": rng.normal(size=100)}, None, np.r_[np.ones(50), np.zeros(50)],
                       np.arange(100), x, np.arange(100) % 10)
    (tmp_path / FILE).write_bytes(npz_bytes(top.arrays()))
    back = read_exposed(tmp_path)
    assert np.array_equal(back["images"], top.images) and int(back["pixel_max"]) == 255
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / FILE).write_bytes(npz_bytes({**top.arrays(), "images": top.images.astype(np.float32)}))
    assert read_exposed(bad) == {}
    (bad / FILE).write_bytes(npz_bytes({"images": np.array([object()], dtype=object)}))  # a pickle
    assert read_exposed(bad) == {} and read_exposed(tmp_path / "none") == {}
    (bad / FILE).write_bytes(b"not a zip")
    assert read_exposed(bad) == {}


def test_jaccard_on_hand_made_sets():
    assert jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert jaccard([1, 2], [3, 4]) == 0.0
    assert jaccard({5, 6}, [6, 5]) == 1.0
    assert jaccard({1}, {1, 2, 3, 4}) == 0.25
    assert math.isnan(jaccard(set(), set()))


def _ov_row(family, setting, runs, **kw):
    row = {"model": "mlp", "dataset": "digits", "family": family, "setting": setting, "runs": runs,
           "kappa": 0.0, "noise_multiplier": math.nan, "knob": math.nan, "defence": "", "other_defence": False}
    row.update(kw)
    return row


def _ranking(top_set, members="m1"):
    top16 = [{"index": i, "class": 0, "score": 1.0} for i in top_set]
    return {"exposure": {"lira_attack": "lira-online", "top16": top16, "top_percent_indices": list(top_set),
                         "n_members": 200, "members": members}}


def test_one_setting_per_family_and_the_jaccard_matrix():
    ov = pd.DataFrame([
        _ov_row("baseline", "baseline", ["b0"]),
        _ov_row("MG noise", "κ=0.5", ["k05-s1", "k05-s0"], kappa=0.5, defence="mg"),
        _ov_row("MG noise", "κ=2", ["k2-s0"], kappa=2.0, defence="mg"),
        _ov_row("DP-SGD", "σ=1", ["d1"], noise_multiplier=1.0, defence="dpsgd"),
        _ov_row("DP-SGD", "σ=4", ["d4"], noise_multiplier=4.0, defence="dpsgd"),
        _ov_row("early stopping", "epochs=5", ["e5"], knob=5.0, defence="early-stopping", other_defence=True),
        _ov_row("early stopping", "epochs=2", ["e2"], knob=2.0, defence="early-stopping", other_defence=True),
        _ov_row("MixUp", "α=0.5", ["mx"], knob=0.5, defence="mixup", other_defence=True),  # no ranking saved
    ])
    extras = {"b0": _ranking([1, 2]), "k05-s0": _ranking([1, 3]), "k05-s1": _ranking([9, 9]),
              "k2-s0": _ranking([2, 3]), "d1": _ranking([7, 8]), "d4": _ranking([4, 5], members="m2"),
              "e5": _ranking([1]), "e2": _ranking([2]), "mx": {"exposure": {"attack": "rmia"}}}
    seeds = {"k05-s0": 0, "k05-s1": 1}
    at = pd.DataFrame([{"model": "mlp", "dataset": "digits", "target_accuracy": 0.95, "defence": "MG noise",
                        "knob": 0.5, "test_accuracy": 0.94},
                       {"model": "mlp", "dataset": "digits", "target_accuracy": 0.9, "defence": "MG noise",
                        "knob": 2.0, "test_accuracy": 0.9},
                       {"model": "mlp", "dataset": "digits", "target_accuracy": 0.95, "defence": "DP-SGD",
                        "knob": 1.0, "test_accuracy": math.nan}])  # DP-SGD did not reach it: rule 2
    chosen = {o["family"]: (o["setting"], run, rule) for o, run, rule in choose_settings(ov, at, extras, seeds)}
    assert list(chosen) == ["baseline", "MG noise", "DP-SGD", "early stopping"]
    assert chosen["MG noise"][:2] == ("κ=0.5", "k05-s0") and "0.950" in chosen["MG noise"][2]  # first seed
    assert chosen["DP-SGD"][:2] == ("σ=4", "d4") and chosen["DP-SGD"][2] == "its most protective setting audited"
    assert chosen["early stopping"][1] == "e2"  # fewer epochs protect more
    assert chosen["baseline"][2] == "the undefended model"
    # without accuracy targets: MG noise's largest κ
    plain = {o["family"]: run for o, run, _ in choose_settings(ov, pd.DataFrame(), extras, seeds)}
    assert plain["MG noise"] == "k2-s0"

    summary = SimpleNamespace(overview=ov, at_accuracy=at)
    table = pd.DataFrame({"target_run": ["k05-s0", "k05-s1"], "seed": [0, 1]})
    (group,) = exposure_groups(summary, table, extras, {})
    assert [p.family for p in group.panels] == ["baseline", "MG noise", "DP-SGD", "early stopping"]
    m = np.array(group.jaccard)
    assert m[0, 0] == 1 and m[0, 1] == pytest.approx(1 / 3) and m[0, 3] == 0.5 and m[1, 3] == 0.0
    others = [0, 1, 3]
    assert np.isnan(m[2, others]).all() and np.isnan(m[others, 2]).all()  # DP-SGD σ=4 trained on other members
    assert m[2, 2] == 1
    html = exposure_section([group])
    assert 'id="exposed"' in html and "<img" not in html and "No images saved" in html
    assert html.count("—") >= 7 and "0.33" in html and "1.00" in html


def test_grid_png_is_a_small_png():
    rng = np.random.default_rng(1)
    gray = grid_png(rng.integers(0, 17, (16, 1, 8, 8), dtype=np.uint8), list(range(16)), rng.normal(size=16), 16,
                    "digits")
    colour = grid_png(rng.integers(0, 256, (5, 3, 32, 32), dtype=np.uint8), [1] * 5, [1e6] * 5, 255, "cifar10")
    for png in (gray, colour):
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(gray) < 12_000 and len(colour) < 40_000


@pytest.mark.slow
def test_digits_audit_shows_who_leaks(tmp_path):
    import privaudit

    kw = dict(dataset="digits", defences="input-noise", knobs=["input-noise=1"], kappas="none", sigmas="none",
              epochs=10, part_size=200, pool_size=4, workdir=tmp_path)
    privaudit.audit(attacks="shadow,lira", **kw)
    page = (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")
    section = re.search(r'<section id="exposed"><h2>Who leaks</h2>.*?</section>', page, re.S)
    assert section and '<a href="#exposed">Who leaks</a>' in page
    pngs = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', section.group())
    assert len(pngs) == 2  # the baseline and additive input noise
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert not re.search(r'(src|href)="(?!#|data:)', section.group())  # nothing loaded from outside the page
    figures = sorted(p.name for p in (tmp_path / "reports" / "figures").glob("exposed-*.png"))
    assert figures == ["exposed-mlp-digits-additive-input-noise.png", "exposed-mlp-digits-baseline.png"]
    assert base64.b64decode(pngs[0]) in {(tmp_path / "reports" / "figures" / f).read_bytes() for f in figures}
    rows = re.findall(r'<tr><th scope="row" class="txt">([^<]+)</th>(.*?)</tr>', section.group())
    assert [r[0] for r in rows] == ["baseline", "additive input noise"]
    for i, (_, cells) in enumerate(rows):
        values = re.findall(r'<td class="num">([^<]+)</td>', cells)
        assert values[i] == "1.00" and len(values) == 2  # a family with itself
    # a later attack that skips the pool keeps the saved images (and the folder's manifest holds)
    attack = next(p for p in (tmp_path / "attacks").glob("target-*plain*") if (p / FILE).is_file())
    before = (attack / FILE).read_bytes()
    privaudit.audit(attacks="shadow,lira,label-only", **kw)
    assert "gap" in (attack / "metrics.json").read_text()  # the folder was written again, the pool skipped
    assert (attack / FILE).read_bytes() == before
    again = (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")
    assert again.count('src="data:image/png;base64,') == 2
