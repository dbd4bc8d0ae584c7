"""The report layer: inline-SVG plots, the iso-accuracy comparison and the HTML page.

Synthetic tables and ROC arrays only: no training, no network, no data set.
"""

from __future__ import annotations

import html
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from reference_iso import iso_accuracy, iso_summary

from privaudit.reporting.html import TABLE_COLUMNS, render_report, setting_label
from privaudit.reporting.plots import line_plot

PLOTS_PER_GROUP = 7  # acc-vs-kappa, auc-vs-kappa, precision/recall/auc-vs-acc, 2 ROC
ATTACKS = ("shadow", "loss", "confidence")


# ---------------------------------------------------------------------------------------
# synthetic data


def _row(run, model, dataset, *, kappa=0.0, sigma=float("nan"), eps=float("nan"),
         test_acc=0.7, attack="shadow", auc=0.7, precision=0.65, recall=0.6, **extra):
    dp = math.isfinite(sigma)
    defence = ("mg+dpsgd" if kappa > 0 else "dpsgd") if dp else ("mg" if kappa > 0 else "none")
    row = dict(
        target_run=run, shadow_run=f"{run}-shadow" if attack == "shadow" else np.nan,
        model=model, dataset=dataset, defence=defence, kappa=kappa, dp=dp,
        noise_multiplier=sigma, epsilon=eps, delta=1e-5 if dp else np.nan,
        accountant="prv" if dp else np.nan, seed=0, part_size=10520, epochs=50,
        train_accuracy=min(1.0, test_acc + 0.2), test_accuracy=test_acc, attack=attack,
        auc=auc, auc_lo=auc - 0.006, auc_hi=auc + 0.006, accuracy=0.5 + (auc - 0.5) * 0.8, precision=precision,
        recall=recall,
        threshold=0.5, advantage=2 * (auc - 0.5), tpr_at_1pct_fpr=0.02 + (auc - 0.5) * 0.1,
        tpr_at_0p1pct_fpr=0.002, n_members=10520, n_nonmembers=10520)
    row.update(extra)
    return row


def _settings_table(model="cnn", dataset="cifar10", with_dp=True, with_mg=True):
    """Baseline + 3 kappa rows + 2 DP rows, three attacks each."""
    settings = [("base", dict(kappa=0.0, test_acc=0.70, auc=0.80))]
    if with_mg:
        settings += [("k0.2", dict(kappa=0.2, test_acc=0.68, auc=0.74)),
                     ("k0.5", dict(kappa=0.5, test_acc=0.62, auc=0.64)),
                     ("k1.0", dict(kappa=1.0, test_acc=0.50, auc=0.55))]
    if with_dp:
        settings += [("s0.5", dict(sigma=0.5, eps=28.31, test_acc=0.60, auc=0.70)),
                     ("s1.0", dict(sigma=1.0, eps=4.104, test_acc=0.52, auc=0.62))]
    rows = []
    for name, kw in settings:
        for i, attack in enumerate(ATTACKS):
            kw2 = dict(kw)
            kw2["auc"] = kw["auc"] - 0.03 * i
            kw2["precision"] = 0.5 + (kw2["auc"] - 0.5) * 0.9
            kw2["recall"] = 0.5 + (kw2["auc"] - 0.5) * 1.2
            rows.append(_row(f"{model}-{dataset}-{name}", model, dataset, attack=attack, **kw2))
    return rows


def make_table():
    rows = _settings_table("cnn", "cifar10") + _settings_table("mlp", "cifar10", with_dp=False)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def synthetic_roc(auc_strength: float, n: int = 20_000, seed: int = 0):
    rng = np.random.default_rng(seed)
    fpr = np.concatenate([[0.0], np.sort(rng.uniform(0, 1, n - 2)), [1.0]])
    tpr = fpr ** (1.0 / (1.0 + auc_strength))
    return fpr, tpr


def make_rocs(table):
    rocs = {}
    for run, g in table.groupby("target_run"):
        auc = float(g["auc"].iloc[0])
        rocs[run] = {a: synthetic_roc(4 * (auc - 0.5), seed=i) for i, a in enumerate(ATTACKS)}
    return rocs


def svgs_of(doc: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", doc, flags=re.S)


# ---------------------------------------------------------------------------------------
# iso-accuracy


def _iso_fixture():
    """MG: acc 0.5/0.6/0.7 (0.6 twice, averaged), DP: 0.4/0.55 + the baseline at 0.7."""
    rows = [
        _row("base", "cnn", "cifar10", kappa=0.0, test_acc=0.7, auc=0.70),
        _row("k1", "cnn", "cifar10", kappa=1.0, test_acc=0.5, auc=0.55),
        _row("k05a", "cnn", "cifar10", kappa=0.5, test_acc=0.6, auc=0.58),
        _row("k05b", "cnn", "cifar10", kappa=0.5, test_acc=0.6, auc=0.62, seed=1),
        _row("s2", "cnn", "cifar10", sigma=2.0, eps=1.4, test_acc=0.4, auc=0.60),
        _row("s1", "cnn", "cifar10", sigma=1.0, eps=4.1, test_acc=0.55, auc=0.65),
    ]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def test_iso_accuracy_exact_interpolation_and_sign():
    iso = iso_accuracy(_iso_fixture(), "auc", grid_points=5)
    assert list(iso.columns) == ["model", "dataset", "attack", "metric", "test_accuracy",
                                 "mg", "dp", "dp_minus_mg"]
    # overlap of MG [0.5, 0.7] and DP [0.4, 0.7]
    np.testing.assert_allclose(iso["test_accuracy"], [0.5, 0.55, 0.6, 0.65, 0.7])
    # MG: (0.5, .55), (0.6, mean(.58, .62) = .6), (0.7, .7)
    np.testing.assert_allclose(iso["mg"], [0.55, 0.575, 0.6, 0.65, 0.7])
    # DP: (0.4, .6), (0.55, .65), (0.7, .7)
    np.testing.assert_allclose(iso["dp"], [0.6 + 0.05 * (0.1 / 0.15), 0.65,
                                           0.65 + 0.05 * (0.05 / 0.15),
                                           0.65 + 0.05 * (0.1 / 0.15), 0.7])
    np.testing.assert_allclose(iso["dp_minus_mg"], iso["dp"] - iso["mg"])
    assert (iso["dp_minus_mg"].iloc[:-1] > 0).all()
    assert iso["dp_minus_mg"].iloc[-1] == pytest.approx(0.0)  # shared baseline point
    assert set(iso["metric"]) == {"auc"} and set(iso["attack"]) == {"shadow"}

    summ = iso_summary(iso)
    assert len(summ) == 1
    s = summ.iloc[0]
    assert s["acc_low"] == pytest.approx(0.5) and s["acc_high"] == pytest.approx(0.7)
    assert s["mean_dp_minus_mg"] == pytest.approx(iso["dp_minus_mg"].mean())
    assert s["leaks_less"] == "MG noise"


def test_iso_accuracy_negative_gap_means_dp_leaks_less():
    t = _iso_fixture()
    t.loc[t["dp"], "auc"] = [0.45, 0.5]  # DP well below MG everywhere but the baseline
    summ = iso_summary(iso_accuracy(t, "auc"))
    assert summ.iloc[0]["mean_dp_minus_mg"] < 0
    assert summ.iloc[0]["leaks_less"] == "DP-SGD"


def test_iso_accuracy_groups_and_default_grid():
    iso = iso_accuracy(make_table(), "precision")
    # mlp has no DP rows: only cnn x 3 attacks
    assert set(iso["model"]) == {"cnn"}
    assert set(iso["attack"]) == set(ATTACKS)
    assert len(iso) == 3 * 25
    summ = iso_summary(pd.concat([iso, iso_accuracy(make_table(), "auc")]))
    assert len(summ) == 6


def test_iso_accuracy_no_overlap_or_too_few_points_gives_no_rows():
    rows = [
        _row("k1", "cnn", "cifar10", kappa=0.5, test_acc=0.8, auc=0.6),
        _row("k2", "cnn", "cifar10", kappa=0.2, test_acc=0.9, auc=0.7),
        _row("s1", "cnn", "cifar10", sigma=1.0, eps=4.0, test_acc=0.3, auc=0.55),
        _row("s2", "cnn", "cifar10", sigma=0.5, eps=20.0, test_acc=0.4, auc=0.6),
    ]
    t = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    iso = iso_accuracy(t, "auc")
    assert iso.empty and list(iso.columns)[-1] == "dp_minus_mg"
    assert iso_summary(iso).empty
    # one DP point + baseline = 2 distinct accuracies, but only one on the MG side
    rows2 = [_row("base", "cnn", "cifar10", test_acc=0.7),
             _row("s1", "cnn", "cifar10", sigma=1.0, test_acc=0.5)]
    assert iso_accuracy(pd.DataFrame(rows2, columns=TABLE_COLUMNS), "auc").empty
    assert iso_accuracy(pd.DataFrame(columns=TABLE_COLUMNS), "auc").empty


# ---------------------------------------------------------------------------------------
# svg


def _colours(root) -> set[str]:
    return {m.group(1).lower() for e in root.iter() for m in re.finditer(r"stroke: ?(#[0-9a-fA-F]{6})",
                                                                          e.get("style", ""))}


def test_line_plot_is_valid_svg_with_accessibility_and_escaping():
    svg = line_plot([{"label": "a<b & c", "x": [0, 1, 2], "y": [0.1, 0.5, 0.3]},
                     {"label": "second", "x": [0, 1, np.nan, np.inf], "y": [1, 0.2, 3, 4]}],
                    title='<script>x</script> & "t"', xlabel="x <unit>", ylabel="y")
    root = ET.fromstring(svg)                                  # one well-formed element, no namespace needed
    assert root.tag == "svg" and root.get("role") == "img"
    assert root.get("aria-label") == '<script>x</script> & "t"'
    assert root[0].tag == "title" and root[0].text == '<script>x</script> & "t"'
    assert "<script" not in svg and "http" not in svg          # no metadata links, no xlink namespace
    texts = "".join(t.text or "" for t in root.iter("text"))
    assert "a<b & c" in texts and "x <unit>" in texts          # text kept as text
    assert {"#0072b2", "#d55e00"} <= _colours(root)            # two series, two palette colours


def test_line_plot_drops_nonpositive_points_on_log_axes_and_draws_error_bars():
    def markers(svg):  # data and legend markers are <use> of one marker definition each
        return len(ET.fromstring(svg).findall(".//use"))

    axes = dict(title="log", xlabel="x", ylabel="y", log_x=True, log_y=True, x_range=(1e-3, 1), y_range=(1e-3, 1))
    kept = line_plot([{"label": "s", "x": [-1, 0, 0.001, 0.01, 0.1, 1.0], "y": [0.5, 0.5, 0.002, 0.02, 0.2, 0.9]}],
                     **axes)
    every = line_plot([{"label": "s", "x": [0.002, 0.005, 0.001, 0.01, 0.1, 1.0],
                        "y": [0.5, 0.5, 0.002, 0.02, 0.2, 0.9]}], **axes)
    assert markers(every) - markers(kept) == 2                 # the two points at x <= 0 are dropped (same ticks)
    plain = line_plot([{"label": "s", "x": [1, 2, 3], "y": [0.5, 0.6, 0.7]}], title="e", xlabel="x", ylabel="y")
    bars = line_plot([{"label": "s", "x": [1, 2, 3], "y": [0.5, 0.6, 0.7], "y_lo": [0.4, 0.55, np.nan],
                       "y_hi": [0.6, 0.65, np.nan]}], title="e", xlabel="x", ylabel="y")
    assert markers(bars) > markers(plain)                      # the error bars' caps
    assert len(bars) > len(plain)


def test_empty_input_gives_a_no_data_note():
    for series in ([], [{"label": "empty", "x": [], "y": []}], [{"label": "nan", "x": [np.nan], "y": [1.0]}]):
        root = ET.fromstring(line_plot(series, title="t", xlabel="x", ylabel="y", log_x=True))
        assert any(t.text == "no data" for t in root.iter("text"))


def test_long_roc_curves_stay_small_and_plots_are_reproducible():
    fpr, tpr = synthetic_roc(0.8, n=20_000)
    args = dict(title="ROC", xlabel="fpr", ylabel="tpr", x_range=(0, 1), y_range=(0, 1), diagonal=True)
    svg = line_plot([{"label": "roc", "x": fpr, "y": tpr, "markers": False}], **args)
    assert len(svg) < 40_000                                   # 20,000 points simplified to the visible bends
    assert svg == line_plot([{"label": "roc", "x": fpr, "y": tpr, "markers": False}], **args)
    other = line_plot([{"label": "roc", "x": fpr, "y": tpr, "markers": False}], **{**args, "title": "ROC 2"})
    ids = set(re.findall(r'id="([^"]+)"', svg)) & set(re.findall(r'id="([^"]+)"', other))
    assert not ids                                             # two plots on one page share no element id


# ---------------------------------------------------------------------------------------
# html


def _assert_self_contained(doc: str):
    assert doc.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://", doc)
    assert "<script" not in doc.lower() and "<link" not in doc.lower()
    assert "@import" not in doc
    tags = re.findall(r"<[a-zA-Z][^>]*>", doc)
    assert tags
    for tag in tags:
        attrs = r"\s(?:src|href|xlink:href|action|srcset|poster)\s*=\s*[\"']?([^\"'\s>]*)"
        for m in re.finditer(attrs, tag, flags=re.I):
            assert m.group(1).startswith("#"), tag
        assert not re.search(r"\son\w+\s*=", tag, flags=re.I), tag  # no event handlers
    for m in re.finditer(r"url\(([^)]*)\)", doc):
        assert m.group(1).startswith("#"), m.group(0)
    for svg in svgs_of(doc):
        ET.fromstring(svg)


@pytest.mark.slow
def test_report_has_all_sections_and_plots():
    table = make_table()
    doc = render_report(table, make_rocs(table), title="Audit <1>", generated="2024-05-01 12:00")
    _assert_self_contained(doc)
    for heading in ("Key findings", "Trade-off table", "Trade-off plots",
                    "Iso-accuracy comparison", "ROC curves", "How to read this"):
        assert heading in doc
    order = [doc.index(h) for h in ("Key findings", 'id="table"', 'id="g-cnn-cifar10"',
                                    'id="howto"')]
    assert order == sorted(order)
    assert "Audit &lt;1&gt;" in doc and "2024-05-01 12:00" in doc
    svgs = svgs_of(doc)
    assert len(svgs) == 2 * PLOTS_PER_GROUP
    assert doc.count('<svg ') == len(svgs)
    titles = [ET.fromstring(s).find("title").text for s in svgs]
    for t in ("Accuracy vs MG noise κ", "Attack AUC vs MG noise κ",
              "Attack precision vs test accuracy", "Attack recall vs test accuracy",
              "Attack AUC vs test accuracy", "ROC, shadow attack",
              "ROC, shadow attack (log-log)"):
        assert titles.count(t) == 2
    # one table row per table row (plus one group-head row per model/dataset)
    table_html = doc[doc.index('id="table"'):doc.index('id="g-')]
    assert table_html.count("<tr") == len(table) + 2 + 1
    # formatting: 3 decimals, the accountant's epsilon, an upper bound, with 3 significant digits rounded up
    # (28.31 -> 28.4), dash for NaN
    assert ">28.4<" in table_html and ">4.11<" in table_html
    assert ">0.700<" in table_html and ">—<" in table_html
    # findings: DP-SGD's AUC is higher at equal accuracy in the synthetic cnn data
    kf = doc[doc.index("Key findings"):doc.index('id="table"')]
    # one seed: the interval is the bootstrap over each point's sampling (DeLong ±0.006, binomial accuracy)
    assert "<strong>MG noise leaks less</strong>" in kf and "sampling (1 seed)" in kf
    assert "no DP-SGD runs" in kf
    assert "test accuracy 0.700, shadow-attack AUC 0.800" in kf
    # ROC legends name the settings
    cnn_roc = [s for s in svgs if "ROC, shadow attack</title>" in s][0]
    labels = [t.text for t in ET.fromstring(cnn_roc).iter("text")]
    for lab in ("baseline", "κ=0.5", "σ=1 (ε=4.11)", "σ=0.5 (ε=28.4)"):
        assert lab in labels
    # ROC curves are thinned
    for p in ET.fromstring(cnn_roc).iter("polyline"):
        assert len(p.get("points").split()) <= 400


@pytest.mark.slow
def test_report_escapes_user_strings():
    table = make_table()
    bad = "<script>alert(1)</script>"
    table.loc[table["target_run"] == "cnn-cifar10-k0.5", "target_run"] = bad
    table.loc[table["model"] == "mlp", "model"] = '<img src=x onerror="y">'
    table.loc[0, "accountant"] = "<b>prv</b>"
    rocs = make_rocs(table)
    doc = render_report(table, rocs, title=bad, generated=bad)
    assert bad not in doc
    assert "<img" not in doc and "<b>prv" not in doc
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    _assert_self_contained(doc)


@pytest.mark.parametrize("table", [
    pd.DataFrame(),
    pd.DataFrame(columns=TABLE_COLUMNS),
    None,
])
def test_empty_table_renders_placeholder_page(table):
    doc = render_report(table, {}, generated="now")
    _assert_self_contained(doc)
    assert "Nothing has been audited yet" in doc
    assert "How to read this" in doc
    assert "<svg" not in doc


@pytest.mark.slow
def test_robust_to_partial_tables():
    full = make_table()
    cnn = full[full["model"] == "cnn"]
    variants = {
        "only_mg": cnn[~cnn["dp"]],
        "only_dp": cnn[cnn["dp"]],
        "single_row": cnn.iloc[[0]],
        "nan_values": cnn.assign(auc=np.nan, epsilon=np.nan, test_accuracy=np.nan),
        "missing_columns": cnn.drop(columns=["epsilon", "threshold", "shadow_run", "seed"]),
        "dp_as_strings": cnn.assign(dp=cnn["dp"].map({True: "True", False: "False"})),
    }
    for name, t in variants.items():
        doc = render_report(t.reset_index(drop=True), make_rocs(cnn))
        _assert_self_contained(doc)
        assert len(svgs_of(doc)) == PLOTS_PER_GROUP, name
        assert "Key findings" in doc, name
    only_dp = render_report(variants["only_dp"], {})
    assert "no MG-noise runs" in only_dp
    assert "No undefended baseline" in only_dp
    only_mg = render_report(variants["only_mg"], {})
    assert "no DP-SGD runs" in only_mg
    single = render_report(variants["single_row"], {})
    assert "only the undefended baseline" in single


def test_setting_labels():
    assert setting_label(False, 0.0, np.nan) == "baseline"
    assert setting_label(False, 0.5, np.nan) == "κ=0.5"
    assert setting_label(True, 0.0, 1.0, 21.04) == "σ=1 (ε=21.1)"  # an accountant ε: rounded up
    assert setting_label(True, 0.0, 1.5, np.nan) == "σ=1.5"
    assert setting_label(True, 0.2, 1.0) == "κ=0.2, σ=1"
    assert setting_label(True, 0.2, 1.0, 3.0) == "κ=0.2, σ=1 (ε=3.00)"


# ---------------------------------------------------------------------------------------
# strongest attacks and empirical epsilon

POOL = ("shadow-pool", "lira-online", "rmia")
EMP_HEADING = "Strongest attacks and empirical ε"
# per setting: rmia's empirical eps (the strongest attack's; the others' are half of it); one-run bound
_EPS = {"base": 2.345, "k0.2": 1.2, "k0.5": 0.51, "k1.0": 0.0, "s0.5": 0.8, "s1.0": 0.3}
_ONE_RUN = {"base": 0.5, "k0.2": 0.2, "k0.5": 0.0, "k1.0": 0.0, "s0.5": 0.1, "s1.0": 0.0}


def make_pool_table(model="cnn", dataset="cifar10"):
    """The settings table plus three pool attacks per target, with empirical columns; rmia
    is the strongest attack everywhere (TPR 10% at 0.1% FPR on the baseline)."""
    rows = []
    for r in _settings_table(model, dataset):
        setting = r["target_run"].rsplit("-", 1)[1]
        r.update(source=f"{r['target_run']}-shadow", eps_lower_bound=0.0,
                 tpr_at_0p1pct_fpr=0.001, tpr_at_0p1pct_fpr_lo=0.0001, tpr_at_0p1pct_fpr_hi=0.005,
                 one_run_eps_lower_bound=_ONE_RUN[setting])
        rows.append(r)
        if r["attack"] != "shadow":
            continue
        for i, attack in enumerate(POOL):
            strongest = attack == "rmia"
            rows.append({**r, "attack": attack, "source": f"pool-{setting}",
                         "shadow_run": np.nan, "auc": r["auc"] + 0.01 * (i + 1),
                         "tpr_at_0p1pct_fpr": (0.1 if setting == "base" else 0.05) if strongest
                         else 0.01 * i,
                         "tpr_at_0p1pct_fpr_lo": 0.08 if strongest else 0.0,
                         "tpr_at_0p1pct_fpr_hi": 0.12 if strongest else 0.02,
                         "eps_lower_bound": _EPS[setting] if strongest else 0.5 * _EPS[setting],
                         "loo_n_targets": 8, "loo_auc_mean": 0.71 + 0.01 * i,
                         "loo_auc_std": 0.02, "loo_eps_lower_bound_mean": 1.0,
                         "loo_eps_lower_bound_std": 0.25})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def make_extras(model="cnn", dataset="cifar10"):
    base, k05 = f"{model}-{dataset}-base", f"{model}-{dataset}-k0.5"
    return {
        base: {
            "loo": {"pool": "pool-base", "pool_size": 8, "summary": {}},
            "exposure": {"attack": "rmia",
                         "per_class_auc": {"0": 0.61, "3": 0.83, "9": 0.55},
                         "top_samples": [{"index": 4711, "class": 3, "score": 7.25},
                                         {"index": 12, "class": 0, "score": 6.5}]},
            "one_run": {"canary_run": "canary-<x>", "num_canaries": 1000, "num_included": 497,
                        "eps_lower_bound": 0.5, "num_guesses": 40, "num_correct": 36,
                        "confidence": 0.95, "delta": 1e-5, "score": "loss"},
        },
        k05: {"exposure": {"attack": "lira-online", "per_class_auc": {5: 0.7, 7: float("nan")},
                           "top_samples": [{"index": 99, "class": 7, "score": 1.0}]}},
    }


def make_pool_rocs(table):
    rocs = {}
    for run, g in table.groupby("target_run"):
        rocs[run] = {a: synthetic_roc(4 * (float(auc) - 0.5), n=2000, seed=i)
                     for i, (a, auc) in enumerate(zip(g["attack"], g["auc"]))}
    return rocs


def n_series(svg) -> int:
    return sum(bool(re.search(r"series-\d+$", g.get("id") or "")) for g in svg.iter("g"))


def series_points(svg, i: int) -> list[tuple[float, float]]:
    """The (x, y) markers of series ``i`` of a :func:`line_plot` (SVG user units, y down)."""
    (group,) = [g for g in svg.iter("g") if (g.get("id") or "").endswith(f"series-{i}")]
    return [(float(u.get("x")), float(u.get("y"))) for u in group.iter("use")]


def _svg_by_title(doc, title):
    found = [s for s in svgs_of(doc) if f"<title>{title}</title>" in s]
    assert len(found) == 1, title
    return ET.fromstring(found[0])


def _emp_part(doc, model="cnn", dataset="cifar10"):
    start = doc.index(f'id="e-{model}-{dataset}"')
    return doc[start:doc.index("<h3>Trade-off plots</h3>", start)]


def _plain(html_text):
    return re.sub(r"<[^>]+>", "", html_text).replace("\u00a0", " ")


@pytest.mark.slow
def test_empirical_section_appears_with_pool_rows():
    table = make_pool_table()
    doc = render_report(table, make_pool_rocs(table), extras=make_extras(), generated="now")
    _assert_self_contained(doc)
    assert doc.count(EMP_HEADING) == 1
    part = _emp_part(doc)
    # one row per setting, ordered baseline, MG by kappa, DP by sigma
    body = part[part.index("<tbody>"):part.index("</tbody>")]
    names = re.findall(r'<th scope="row"[^>]*>([^<]*)', body)
    assert names == ["baseline", "MG noise κ=0.2", "MG noise κ=0.5", "MG noise κ=1",
                     "DP-SGD σ=0.5", "DP-SGD σ=1"]
    rows = body.split("<tr")[1:]
    # accountant eps: value for DP rows, "no formal ε" for the others
    assert "no formal ε" in rows[1] and ">28.4<" in rows[4] and ">4.11<" in rows[5]
    # the strongest attack's empirical eps (rounded down) and its name; one-run bound; LOO of the strongest
    assert "<strong>2.34</strong>" in rows[0] and "rmia" in rows[0]
    assert ">0.50<" in rows[0]  # one-run
    assert "0.730" in rows[0] and "± 0.020" in rows[0]  # rmia's LOO AUC
    # every attack is a column, the strongest (rmia) highlighted in every row
    head = part[part.index("<thead>"):part.index("</thead>")]
    for a in ATTACKS + POOL:
        assert _plain(head).count(a) >= 1
    assert body.count('class="num att best"') == 6
    for row in rows:
        best = re.search(r'class="num att best" title="([^"]*)"', row).group(1)
        assert best.startswith("rmia:")
    assert '<span class="auc">0.83</span><span class="tpr">10.0%</span>' in rows[0]
    # plots: eps vs accuracy, accountant vs empirical, log-log ROC of every attack
    for title in ("Empirical ε lower bound vs test accuracy",
                  "DP-SGD: accountant ε vs empirical ε",
                  "ROC of every attack, baseline (log-log)"):
        assert f"<title>{title}</title>" in part
    eps_acc = _svg_by_title(doc, "Empirical ε lower bound vs test accuracy")
    legend = [t.text for t in eps_acc.iter("text")]
    assert "MG noise (κ)" in legend and "DP-SGD (σ)" in legend
    # MG: baseline + 3 kappas, DP: baseline + 2 sigmas
    assert (len(series_points(eps_acc, 0)), len(series_points(eps_acc, 1))) == (4, 3)
    roc = _svg_by_title(doc, "ROC of every attack, baseline (log-log)")
    labels = [t.text for t in roc.iter("text")]
    for a in ATTACKS + POOL:
        assert any(lab and lab.startswith(f"{a} (AUC") for lab in labels), a
    assert n_series(roc) == len(ATTACKS + POOL)
    assert "log-log axes from FPR 0.0001" in doc  # FPR from max(1e-4, 1/10520)
    # the main table: eps-lb column with tooltips for the TPR intervals
    table_html = doc[doc.index('id="table"'):doc.index('id="g-')]
    assert ">ε lb<" in table_html and ">2.34<" in table_html
    assert 'title="95% CI 0.080–0.120 (Clopper–Pearson)"' in table_html
    assert table_html.count("<tr") == len(table) + 1 + 1
    assert ">pool-base<" in table_html  # the source column
    # how to read: the new explanations
    howto = doc[doc.index('id="howto"'):]
    for words in ("LiRA", "RMIA", "shadow-pool", "Leave-one-out", "Clopper–Pearson",
                  "Steinke, Nasr &amp; Jagielski 2023", "MG noise has no formal ε"):
        assert words in howto


@pytest.mark.slow
def test_empirical_section_absent_without_pool_or_eps_values():
    table = make_table()
    for extras in (None, {}, {"cnn-cifar10-base": {}}):
        doc = render_report(table, make_rocs(table), extras=extras)
        assert EMP_HEADING not in doc
        assert "Strongest attack:" not in doc and "ε lb" in doc
        assert len(svgs_of(doc)) == 2 * PLOTS_PER_GROUP
    # only one group has pool rows: only that one gets the section
    mixed = pd.concat([make_pool_table("cnn"), make_table().query("model == 'mlp'")],
                      ignore_index=True)
    doc = render_report(mixed, make_pool_rocs(mixed))
    assert doc.count(EMP_HEADING) == 1 and 'id="e-cnn-cifar10"' in doc
    assert 'id="e-mlp-cifar10"' not in doc
    _assert_self_contained(doc)


@pytest.mark.slow
def test_key_finding_sentence():
    table = make_pool_table()
    doc = render_report(table, make_pool_rocs(table), extras=make_extras())
    kf = _plain(doc[doc.index("Key findings"):doc.index('id="table"')])
    assert ("Strongest attack: rmia (the highest mean TPR at 0.1% FPR over the group's targets, then AUC; "
            "TPR 10.0% at 0.1% FPR on the baseline, AUC 0.830).") in kf
    assert ("Empirical ε lower bounds of rmia (the strongest attack; a heuristic that treats the samples of the "
            "model as independent trials; the one-run canary bound is the rigorous one, from a single training "
            "run): ε ≥ 2.34 for the baseline (one-run canary bound: 0.50); MG noise κ=0.2 (the largest ε bound "
            "of its 3 settings): ε ≥ 1.20 (one-run canary bound: 0.20); DP-SGD σ=0.5 (accountant ε = 28.4; "
            "the largest ε bound of its 2 settings): ε ≥ 0.80 (one-run canary bound: 0.10).") in kf
    assert "MG noise leaks less" in kf  # the old verdict stays
    # the same sentence opens the group's section
    group = _plain(doc[doc.index('id="g-cnn-cifar10"'):doc.index('id="e-cnn-cifar10"')])
    assert "Strongest attack: rmia" in group
    # without a baseline: the least-defended setting, no baseline clause
    no_base = table[table["target_run"] != "cnn-cifar10-base"].reset_index(drop=True)
    kf2 = _plain(render_report(no_base, {}).split('id="table"')[0])
    assert "on MG noise κ=0.2" in kf2 and "for the baseline" not in kf2
    assert "Empirical ε lower bounds of rmia (the strongest attack;" in kf2 and "training run): MG noise κ=0.2" in kf2


@pytest.mark.slow
def test_the_eps_figure_plots_the_tables_bounds_of_the_attack_its_axis_names(monkeypatch):
    """The points of "Empirical ε lower bound vs test accuracy" are tradeoff.csv's numbers: per
    setting, the ε lower bound of the attack the y axis names. Here the strongest attack (rmia,
    by TPR at 0.1% FPR) is not the one with the largest bound (lira-online, twice rmia's)."""
    import io

    from privaudit.reporting import page_empirical

    table = make_pool_table()
    table.loc[table["attack"] == "lira-online", "eps_lower_bound"] *= 4  # 4 · ε/2: twice rmia's
    csv = pd.read_csv(io.StringIO(table.to_csv(index=False, float_format="%.6g")))  # as build_reports writes it
    drawn, draw = [], page_empirical.line_plot
    monkeypatch.setattr(page_empirical, "line_plot",
                        lambda series, **kw: drawn.append((series, kw)) or draw(series, **kw))
    doc = render_report(csv, make_pool_rocs(csv), extras=make_extras())
    ((series, kw),) = [(s, kw) for s, kw in drawn if kw["title"] == "Empirical ε lower bound vs test accuracy"]
    named = re.fullmatch(r"empirical ε ≥ \((.+)\)", kw["ylabel"])
    assert named and named.group(1) in set(csv["attack"]), kw["ylabel"]   # the axis names one attack
    bound = csv[csv["attack"] == named.group(1)].set_index("test_accuracy")["eps_lower_bound"]
    largest = csv.groupby("test_accuracy")["eps_lower_bound"].max()
    assert [len(s["x"]) for s in series] == [4, 3]                        # MG: baseline + 3 κ; DP: + 2 σ
    for s in series:
        assert np.array_equal(s["y"], bound.loc[s["x"]].to_numpy())       # that attack's bound, row by row
        assert (largest.loc[s["x"]].to_numpy() == 2 * s["y"]).all()       # not the largest of any attack
    assert f"strongest attack ({named.group(1)}) per setting" in doc      # the caption names it too


@pytest.mark.slow
def test_accountant_vs_empirical_plot_for_dp_rows():
    table = make_pool_table()
    doc = render_report(table, {}, extras=make_extras())
    svg = _svg_by_title(doc, "DP-SGD: accountant ε vs empirical ε")
    texts = [t.text for t in svg.iter("text")]
    for lab in ("accountant ε (upper bound)", "empirical ε (lower bound)",
                "one-run ε (lower bound)", "σ (noise multiplier)"):
        assert lab in texts
    accountant, empirical = ([y for _, y in series_points(svg, i)] for i in (0, 1))
    assert len(accountant) == len(empirical) == 2
    # svg y grows downwards: the lower bound sits below the accountant's epsilon
    assert all(e > a for a, e in zip(accountant, empirical))
    assert "exceeds the accountant" not in doc
    # 28.3 vs 0.3: values span decades -> log y axis
    assert any("(log scale)" in (t or "") for t in texts)
    assert "Lower bounds of 0 (nothing proven)" in doc
    # close values: a linear axis
    close = table.assign(epsilon=table["epsilon"] / 10)
    lin = _svg_by_title(render_report(close, {}), "DP-SGD: accountant ε vs empirical ε")
    assert not any("(log scale)" in (t.text or "") for t in lin.iter("text"))
    assert n_series(lin) == 3
    # no DP rows: no such plot
    mg_only = table[~table["dp"]].reset_index(drop=True)
    assert "DP-SGD: accountant ε vs empirical ε" not in render_report(mg_only, {})
    # a lower bound above the accountant's upper bound is flagged
    bad = table.copy()
    bad.loc[(bad["target_run"] == "cnn-cifar10-s1.0") & (bad["attack"] == "rmia"),
            "eps_lower_bound"] = 9.0
    bad_doc = render_report(bad, {})
    assert "exceeds the accountant" in bad_doc and "DP-SGD σ=1" in _plain(bad_doc)


@pytest.mark.slow
def test_exposure_table_has_a_row_per_setting_and_a_column_per_class():
    table = make_pool_table()
    doc = render_report(table, {}, extras=make_extras())
    part = _emp_part(doc)
    assert "Exposure: which classes and samples leak most" in part
    ex = part[part.index("Exposure: which classes"):]
    ex = ex[:ex.index("</table>")]
    head = re.findall(r"<th class=\"num\">([^<]*)</th>", ex)
    assert head == ["airplane", "cat", "dog", "horse", "truck"]  # every class any setting has, in class order
    rows = re.findall(r"<tr><th scope=\"row\" class=\"txt\">(.*?)</th>(.*?)</tr>", ex, flags=re.S)
    assert [r[0] for r in rows] == ["baseline", "MG noise κ=0.5"]  # the baseline first
    base, k05 = rows[0][1], rows[1][1]
    assert "rmia" in base and "lira-online" in k05
    cells = re.findall(r"<td class=\"num([^\"]*)\">([^<]*)</td>", base)
    # AUC 0.61 → shade 1, 0.83 (the top) → shade 3, 0.55 → none; dog and horse not measured here; 0.7 → 2
    assert cells == [(" e1", "0.610"), (" e3 top", "0.830"), (" missing", "—"), (" missing", "—"),
                     ("", "0.550")]
    k_cells = re.findall(r"<td class=\"num([^\"]*)\">([^<]*)</td>", k05)
    assert k_cells[2] == (" e2 top", "0.700") and k_cells[3] == (" missing", "—")  # NaN AUC
    assert "4711 (cat), 12 (airplane)" in _plain(base) and '<span class="nw">4711 (cat)</span>' in base
    assert 'title="4711 (cat): score 7.25; 12 (airplane): score 6.50"' in base
    assert "99 (horse)" in k05
    # digits: the digits themselves; unknown data sets: the class number
    dig = make_pool_table("mlp", "digits")
    doc2 = render_report(dig, {}, extras=make_extras("mlp", "digits"))
    part2 = _emp_part(doc2, "mlp", "digits")
    assert '<th class="num">3</th>' in part2 and "cat" not in part2
    other = make_pool_table("mlp", "svhn")
    doc3 = render_report(other, {}, extras=make_extras("mlp", "svhn"))
    assert '<th class="num">9</th>' in doc3
    _assert_self_contained(doc3)


@pytest.mark.slow
def test_exposure_table_keeps_the_most_exposed_classes_of_many():
    from privaudit.reporting.page_empirical import EXPOSURE_CLASSES

    table = make_pool_table()
    extras = make_extras()
    base = "cnn-cifar10-base"
    extras[base]["exposure"]["per_class_auc"] = {str(c): 0.501 + c / 200 for c in range(60)}  # class 59 most exposed
    part = _emp_part(render_report(table, {}, extras=extras))
    ex = part[part.index("Exposure: which classes"):]
    head = re.findall(r"<th class=\"num\">([^<]*)</th>", ex[:ex.index("</thead>")])
    # the 20 most exposed of 60 (classes 40-59; the other setting's 0.7 for class 5 lies below them)
    assert head == [str(c) for c in range(60 - EXPOSURE_CLASSES, 60)]
    assert f"{60 - EXPOSURE_CLASSES} more in each attack folder" in re.sub(r"\s+", " ", _plain(ex))


@pytest.mark.slow
def test_empirical_part_is_robust_to_nan_and_bad_extras():
    table = make_pool_table()
    nan_cols = ["eps_lower_bound", "one_run_eps_lower_bound", "tpr_at_0p1pct_fpr",
                "tpr_at_0p1pct_fpr_lo", "tpr_at_0p1pct_fpr_hi", "loo_auc_mean", "epsilon",
                "test_accuracy", "n_nonmembers"]
    bad_extras = {"cnn-cifar10-base": {"exposure": {"per_class_auc": None,
                                                    "top_samples": [1, None]},
                                       "one_run": "broken", "loo": []},
                  "cnn-cifar10-k0.5": None, 7: {"exposure": {}}}
    variants = {
        "all_nan": table.assign(**{c: np.nan for c in nan_cols}),
        "missing_columns": table.drop(columns=["eps_lower_bound", "loo_auc_mean", "source",
                                               "one_run_eps_lower_bound"]),
        "inf_eps": table.assign(eps_lower_bound=np.inf),
        "single_pool_row": table[table["attack"] == "rmia"].iloc[[0]],
    }
    for name, t in variants.items():
        for extras in (None, bad_extras, make_extras()):
            doc = render_report(t.reset_index(drop=True), make_pool_rocs(table), extras=extras)
            _assert_self_contained(doc)
            assert EMP_HEADING in doc, name
    doc = render_report(variants["all_nan"], {}, extras=bad_extras)
    part = _emp_part(doc)
    assert "No exposure details." in part
    assert 'class="num att best"' in part  # AUC still picks a strongest attack
    kf = _plain(doc[doc.index("Key findings"):doc.index('id="table"')])
    assert ("Strongest attack: rmia (the highest mean TPR at 0.1% FPR over the group's targets, then AUC; "
            "on the baseline: AUC 0.830).") in kf
    assert "Empirical ε" not in kf and "TPR —" not in kf
    # a table with only NaN empirical values and no pool attack has no section
    plain = make_table().assign(eps_lower_bound=np.nan, one_run_eps_lower_bound=np.nan)
    assert EMP_HEADING not in render_report(plain, {}, extras={})


@pytest.mark.slow
def test_render_report_without_extras_still_works():
    table = make_pool_table()
    rocs = make_pool_rocs(table)
    doc = render_report(table, rocs, title="t", generated="g")  # the old signature
    _assert_self_contained(doc)
    assert EMP_HEADING in doc and "Exposure:" not in doc
    assert doc == render_report(table, rocs, title="t", generated="g", extras=None)
    # positional (table, rocs) and table-only calls too
    assert EMP_HEADING in render_report(table)
    # one-run bound from the extras when the table lacks the column
    t2 = table.drop(columns=["one_run_eps_lower_bound"])
    doc2 = render_report(t2, {}, extras=make_extras())
    row = _emp_part(doc2).split("<tbody>")[1].split("<tr")[1]
    assert ">0.50<" in row and "36 of 40 guesses correct" in row


@pytest.mark.slow
def test_empirical_part_escapes_user_strings():
    table = make_pool_table()
    bad = '<script>alert("x")</script>'
    table.loc[table["attack"] == "lira-online", "attack"] = bad
    table.loc[table["attack"] == "rmia", "source"] = bad
    extras = make_extras()
    extras["cnn-cifar10-base"]["exposure"]["attack"] = bad
    extras["cnn-cifar10-base"]["exposure"]["per_class_auc"][bad] = 0.9
    extras["cnn-cifar10-base"]["one_run"]["canary_run"] = bad
    rocs = make_pool_rocs(table)
    doc = render_report(table, rocs, extras=extras)
    assert bad not in doc
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in doc  # markupsafe writes " as &#34;
    _assert_self_contained(doc)


@pytest.mark.slow
def test_the_page_shows_the_summary_layers_numbers():
    """Means, intervals and verdicts on the page are the summary layer's (privaudit.reporting.summary),
    not averaged again: two seeds per setting, so every interval is a t interval over seeds."""
    from privaudit.reporting.summary import summarise

    one = make_pool_table()
    two = one.copy()
    two["seed"] = 1
    two["target_run"] = two["target_run"] + "-s1"
    two["test_accuracy"] = two["test_accuracy"] - 0.01
    two["auc"] = two["auc"] + 0.004
    two["eps_lower_bound"] = two["eps_lower_bound"] * 0.5
    table = pd.concat([one, two], ignore_index=True)
    summary = summarise(table)
    doc = render_report(table, {}, summary=summary)
    ov = summary.overview.set_index("setting")
    # the strongest-attacks table: accuracy mean with its t interval, the strongest attack's mean eps bound
    rows = _emp_part(doc).split("<tbody>")[1].split("<tr")[1:]
    base = ov.loc["baseline"]
    assert f'{base["test_accuracy"]:.3f}<span class="sub">[{base["test_accuracy_lo"]:.3f}, ' \
           f'{base["test_accuracy_hi"]:.3f}]</span>' in rows[0]
    assert base["eps_strongest"] == pytest.approx((2.345 + 2.345 / 2) / 2)
    assert f"<strong>{math.floor(base['eps_strongest'] * 100) / 100:.2f}</strong>" in rows[0]
    assert "(2 runs)" in rows[0]
    # the verdict sentence and the per-attack iso table: the summary's comparisons
    comp = summary.comparisons.set_index(["attack", "metric"])
    c = comp.loc[("shadow", "auc")]
    kf = _plain(doc[doc.index("Key findings"):doc.index('id="table"')])
    from privaudit.analysis.familywise import p_text

    v = summary.verdicts.set_index(["attack", "metric"]).loc[("shadow", "auc")]   # the verdicts' row, family-wise
    # three verdicts, but this table has no μ for its strongest attack: Holm counts the two compared
    assert (summary.verdicts["status"] == "compared").sum() == 2
    assert v["gap"] == c["gap"] and v["comparisons"] == 2
    assert (f"AUC is {c['gap']:+.3f} (95% interval {c['gap_lo']:+.3f} to {c['gap_hi']:+.3f}, t over 2 seeds; "
            f"Holm over 2 comparisons: {html.escape(p_text(v['p_adjusted'], 'adjusted p'))})") in kf
    iso = doc[doc.index("<h3>Iso-accuracy comparison</h3>"):doc.index("<h3>ROC curves</h3>")]
    r = comp.loc[("rmia", "precision")]
    assert f"{r['gap']:+.3f} [{r['gap_lo']:+.3f}, {r['gap_hi']:+.3f}]" in iso
    # one seed: precision has no per-model interval, so no verdict is read from it
    single = render_report(one, {})
    iso1 = single[single.index("<h3>Iso-accuracy comparison</h3>"):single.index("<h3>ROC curves</h3>")]
    assert "no interval: cannot decide" in iso1 and "replicate with --seeds" in iso1


# ---------------------------------------------------------------------------------------
# the page's weight

DIGITS_SETTINGS = [("plain", {}), ("k0.25", dict(kappa=0.25)), ("k0.5", dict(kappa=0.5)), ("k1", dict(kappa=1.0)),
                   ("k2", dict(kappa=2.0)), ("dp-s0.5", dict(sigma=0.5, eps=52.74)),
                   ("dp-s1", dict(sigma=1.0, eps=7.318)), ("dp-s2", dict(sigma=2.0, eps=1.936))]
DIGITS_ATTACKS = ("shadow", "shadow-pool", "lira-online", "lira-online-global", "lira-offline", "lira-offline-global",
                  "rmia", "loss", "confidence", "data-free")


def digits_like(seed=0):
    """The table, ROC curves and extras of a page shaped like `privaudit audit --dataset
    digits`'s: 8 targets (the baseline, 4 MG κ, 3 DP-SGD σ), 10 attacks each (6 with a pool
    of 8), 449 members and 449 non-members, every extra."""
    from privaudit.analysis.metrics import auc_score, roc

    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(449), np.zeros(449)]
    rows, rocs, extras = [], {}, {}
    for i, (name, kw) in enumerate(DIGITS_SETTINGS):
        run, pool = f"target-mlp-digits-{name}-{i:010x}", f"pool-mlp-digits-{name}-n8-{i:010x}"
        rocs[run] = {}
        for attack in DIGITS_ATTACKS:
            scores = rng.normal(labels * rng.uniform(0.1, 0.8), 1.0)
            rocs[run][attack] = roc(labels, scores)
            auc, tpr, tpr1, in_pool = (auc_score(labels, scores), rng.uniform(0, 0.05), rng.uniform(0, 0.1),
                                       attack in POOL)
            loo = dict(loo_n_targets=8, loo_auc_mean=auc - 0.01, loo_auc_std=rng.uniform(0, 0.05),
                       loo_eps_lower_bound_mean=rng.uniform(0, 2), loo_eps_lower_bound_std=rng.uniform(0, 0.5))
            rows.append(_row(run, "mlp", "digits", attack=attack, auc=auc, test_acc=rng.uniform(0.85, 0.95),
                             precision=rng.uniform(0.5, 0.6), recall=rng.uniform(0.5, 1), part_size=449, n_members=449,
                             n_nonmembers=449, epochs=60, source=pool if in_pool else np.nan, tpr_at_0p1pct_fpr=tpr,
                             tpr_at_0p1pct_fpr_lo=tpr / 3, tpr_at_0p1pct_fpr_hi=tpr * 3 + 0.01, tpr_at_1pct_fpr=tpr1,
                             tpr_at_1pct_fpr_lo=tpr1 / 2, tpr_at_1pct_fpr_hi=tpr1 * 2 + 0.01,
                             eps_lower_bound=rng.uniform(0, 2.5), threshold=rng.normal(),
                             one_run_eps_lower_bound=rng.uniform(0, 0.1), **(loo if in_pool else {}), **kw))
        extras[run] = {
            "loo": {"pool": pool, "pool_size": 8, "summary": {}},
            "exposure": {"attack": "lira-offline-global",
                         "per_class_auc": {str(c): rng.uniform(0.55, 0.75) for c in range(10)},
                         "top_samples": [{"class": int(rng.integers(10)), "index": int(rng.integers(1797)),
                                          "score": -rng.exponential(1e-5)} for _ in range(10)]},
            "one_run": {"canary_run": f"canary-mlp-digits-{name}-{i:010x}", "confidence": 0.95, "delta": 1e-5,
                        "eps_lower_bound": 0.05, "num_canaries": 449, "num_correct": 31, "num_guesses": 44,
                        "num_included": 231, "score": "loss"}}
    return pd.DataFrame(rows, columns=TABLE_COLUMNS), rocs, extras


@pytest.mark.slow
def test_a_digits_sized_page_weighs_at_most_300_kb_with_every_figure():
    """The README's digits audit writes about 290 KB: its figures, series and tables all drawn."""
    from privaudit.reporting.figures import group_figures
    from privaudit.reporting.summary import summarise

    table, rocs, extras = digits_like()
    summary = summarise(table)
    doc = render_report(table, rocs, extras=extras, summary=summary, figures=group_figures(summary),
                        generated="2024-05-01 12:00 UTC")
    assert len(doc.encode()) <= 300_000
    _assert_self_contained(doc)
    assert len(svgs_of(doc)) == 1 + 3 + PLOTS_PER_GROUP                # verdict, empirical part, group
    for title, n in (("ROC, shadow attack", 8), ("ROC, shadow attack (log-log)", 8),
                     ("ROC of every attack, baseline (log-log)", 10), ("Attack AUC vs MG noise κ", 10)):
        assert n_series(_svg_by_title(doc, title)) == n, title
    assert doc.count("<tr") >= len(table) + 9                       # the long table, an exposure row per setting


@pytest.mark.slow
def test_a_long_table_past_its_page_limit_shows_the_rows_a_reader_compares():
    """Past PAGE_ROWS rows the page's long table keeps, per target run, the paper's attack,
    the group's strongest and the run's own strongest (exactly those rows, by the rule every
    view uses), and says how many of how many it shows; below the limit it shows every row."""
    from privaudit.analysis.metrics import STRONGEST_KEY
    from privaudit.analysis.metrics import strongest_attack as strongest_of
    from privaudit.reporting.page_tables import PAGE_ROWS
    from privaudit.reporting.summary import group_strongest

    table = pd.concat([digits_like(seed)[0].assign(target_run=lambda t, s=seed: t["target_run"] + f"-r{s}")
                       for seed in range(4)], ignore_index=True)
    assert len(table) > PAGE_ROWS
    part = render_report(table, {})
    part = part[part.index('<section id="table">'):]
    part = part[:part.index("</section>")]
    best = group_strongest(table)[("mlp", "digits")]
    head = [_plain(h) for h in re.findall(r"<th scope=\"col\"[^>]*>(.*?)</th>", part)]
    cells = [[_plain(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in re.findall(r"<tr.*?</tr>", part)]
    on_page = [(c[head.index("target run")], c[head.index("attack")]) for c in cells if c]
    expected = 0
    for run, rows in table.groupby("target_run"):
        own = strongest_of(rows.set_index("attack")[list(STRONGEST_KEY)].to_dict("index"))
        kept = {"shadow", best, own} & set(rows["attack"])
        expected += len(kept)
        assert {a for r, a in on_page if r == run} == kept, run
    assert f"{len(table)} rows" in part and f"Shown here: {expected} of them" in part
    assert expected < len(table) and part.count("<tr") == expected + 2  # the head and the group's row
    small = render_report(digits_like()[0], {})
    assert "Shown here" not in small


def _howto_items(doc):
    """``{id: plain text}`` of the "How to read this" items that have an id."""
    howto = doc[doc.index('id="howto"'):]
    return {m.group(1): html.unescape(re.sub(r"\s+", " ", _plain(m.group(2))))
            for m in re.finditer(r'<li id="howto-([a-z-]+)">(.*?)</li>', howto, flags=re.S)}


def test_how_to_read_this_explains_gdp_ppv_the_quantile_and_data_free_attacks_and_the_loss_trace():
    """Issue 54, item 5: each measure and attack the digits report shows has its explanation on
    the page, under the names the tables use (docs/methods/a-mg-noise.md A.4,
    docs/methods/d-attacks.md D.6, D.8, D.9, D.10)."""
    items = _howto_items(render_report(None, {}))
    assert set(items) == {"quantile", "data-free", "ppv", "gdp", "loss-trace", "detectable"}, items.keys()
    # the verdicts' smallest detectable difference, in one sentence
    could = items["detectable"]
    assert could.startswith("Could detect ≥ X.") and could.count(". ") == 1 and could.endswith("was seen.")
    assert "80 % probability" in could and '"no significant difference" means no difference larger than X' in could
    gdp = items["gdp"]
    assert "μ (GDP)" in gdp and "ε (GDP)" in gdp and "μ-GDP" in gdp and "N(0, 1) from N(μ, 1)" in gdp
    assert "summary of the attack's whole trade-off curve" in gdp
    # μ's ε is an estimate under the Gaussian assumption; the Clopper–Pearson ε lb is a bound
    assert re.search(r"Its ε is .* an estimate, a lower bound only if the trade-off curve is Gaussian", gdp)
    assert re.search(r"Clopper–Pearson ε lb assumes no shape of the curve and is a bound", gdp)
    ppv = items["ppv"]
    assert "PPV @ 10% prior" in ppv and "positive predictive value" in ppv and "10 %" in ppv and "1 %" in ppv
    assert "quantile" in items["quantile"] and "No reference model" in items["quantile"]
    assert "data-free" in items["data-free"] and "90th percentile" in items["data-free"]
    lt = items["loss-trace"]
    assert "LT-IQR" in lt and "interquartile range" in lt and "not a membership test" in lt


@pytest.mark.slow
def test_the_trade_off_tables_headers_are_explained_and_every_attack_is_named_in_how_to_read_this():
    table, rocs, extras = digits_like()
    doc = render_report(table, rocs, extras=extras)
    part = doc[doc.index('<section id="table">'):doc.index("</section>", doc.index('<section id="table">'))]
    howto = html.unescape(_plain(doc[doc.index('id="howto"'):]))
    for header in ("PPV @ 10% prior", "ε lb", "μ (GDP)", "ε (GDP)"):
        assert f">{header}</th>" in html.unescape(part), header
        assert header in howto, header
    for attack in {*table["attack"], "lira-shrunk-online", "lira-shrunk-offline", "quantile"}:  # --attacks all's
        assert re.search(rf"(?<![\w-]){attack}(?![\w-])", howto), attack


@pytest.mark.slow
def test_the_trade_off_table_shows_the_compared_columns_and_the_rest_on_demand():
    """Issue 54, item 4: by default the long table shows the setting and the measures a reader
    compares; the run names, knobs, threshold metrics and counts follow from the cell of class
    "more" on, which report.css hides until the "Show all columns" box is ticked (no script)."""
    from privaudit.reporting.summary import setting_label

    table, rocs, extras = digits_like()
    doc = render_report(table, rocs, extras=extras)
    part = doc[doc.index('<section id="table">'):doc.index("</section>", doc.index('<section id="table">'))]
    assert re.search(r'<input type="checkbox" id="tradeoff-all" class="allcols"><label for="tradeoff-all"', part)
    head = re.findall(r'<th scope="col" class="([^"]*)"[^>]*>(.*?)</th>', part)
    names = [html.unescape(h) for _, h in head]
    more = [i for i, (cls, _) in enumerate(head) if "more" in cls.split()]
    assert len(more) == 1
    assert names[:more[0]] == ["setting", "seed", "ε", "test acc", "attack", "AUC", "TPR @ 1% FPR", "TPR @ 0.1% FPR",
                               "PPV @ 10% prior", "ε lb", "μ (GDP)", "ε (GDP)"]
    assert names[more[0]:] == ["target run", "source", "defence", "κ", "σ", "epochs", "train acc", "attack acc",
                               "precision", "recall", "threshold", "advantage", "members", "non-members"]
    rows = re.findall(r"<tr(?: class=\"[^\"]*\")?>(<td.*?)</tr>", part, flags=re.S)
    assert len(rows) == len(table)
    for row in rows:
        cells = re.findall(r"<td([^>]*)>([^<]*)</td>", row)
        assert len(cells) == len(names)
        assert [i for i, (attrs, _) in enumerate(cells) if re.search(r'class="[^"]*\bmore\b', attrs)] == more
        run = html.unescape(cells[names.index("target run")][1])
        r = table[table["target_run"] == run].iloc[0]
        assert html.unescape(cells[0][1]) == setting_label(r["dp"], r["kappa"], r["noise_multiplier"],
                                                           defence=r["defence"], knob=r["knob"])
        assert html.unescape(cells[0][0]).startswith(f' class="txt" title="{run}: part size 449')
    css = doc[doc.index("<style>"):doc.index("</style>")]
    assert "table.data .more,table.data .more~*{display:none}" in css
    assert "input.allcols:checked~.tablewrap table.data :is(.more,.more~*){display:table-cell}" in css
