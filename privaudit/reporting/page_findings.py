"""The sentences of the report page, worked out once per (model, dataset) group: the verdict
at equal test accuracy, the undefended baseline, the strongest attack and the empirical ε
(templates/sentences.html.j2), read from the summary layer (:mod:`privaudit.reporting.summary`).
The key findings list them; each group's section opens with them."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from privaudit.analysis.familywise import p_text
from privaudit.core.formatting import slug
from privaudit.reporting.page_data import (
    FAMILY_CSS,
    attack_rows,
    dp_family,
    has_empirical,
    name_dp,
    primary_attack,
    setting_name,
)
from privaudit.reporting.page_numbers import f3, finite, lb, lb3, pct, upper_sig3
from privaudit.reporting.summary import ABOVE, NO_TEST, VERDICT_DP, VERDICT_MG, Summary, reference_setting

# "DP-SGD" with a non-breaking hyphen: looks the same, and name_dp leaves it alone where a
# NoisyCGD group's text means DP-SGD itself.
_DPSGD_KEPT = "DP\u2011SGD"


def _of(frame: pd.DataFrame, model: str, dataset: str) -> pd.DataFrame:
    """The rows of one (model, dataset) group of a summary frame."""
    if frame.empty:
        return frame
    return frame[(frame["model"] == model) & (frame["dataset"] == dataset)]


def _verdict(g: pd.DataFrame, comps: pd.DataFrame, verdicts: pd.DataFrame | None = None) -> dict:
    """The group's verdict sentence (templates/sentences.html.j2), from the summary's
    comparison of its primary attack by AUC: its row of the verdicts (family-wise over the
    group's comparisons) where it is one of them, else the comparison itself."""
    if dp_family(g) == "NoisyCGD":
        return {"kind": "noisycgd", "dpsgd": _DPSGD_KEPT}
    attack = primary_attack(g)
    if attack is None:
        return {"kind": "text", "text": "No attack results."}
    hit = comps[(comps["attack"] == attack) & (comps["metric"] == "auc")] if len(comps) else comps
    if verdicts is not None and len(verdicts):
        vhit = verdicts[(verdicts["attack"] == attack) & (verdicts["metric"] == "auc")]
        hit = vhit if len(vhit) else hit
    if hit.empty:  # every row of the attack is MG + DP-SGD
        return {"kind": "text", "text": "No iso-accuracy comparison: the attack ran on combined MG + DP-SGD "
                                        "targets only."}
    c = hit.iloc[0]
    if not finite(c["gap"]):
        return {"kind": "text", "text": f"No iso-accuracy comparison: {c['reason']}."}
    ci = (f"95% interval {c['gap_lo']:+.3f} to {c['gap_hi']:+.3f}, {c['interval']}" if finite(c["gap_lo"])
          else "no interval")
    adj, k = c.get("p_adjusted", math.nan), c.get("comparisons", 0)
    if finite(adj) and k and k > 1:
        ci += f"; Holm over {int(k)} comparisons: {p_text(adj, 'adjusted p')}"
    return {"kind": "gap", "acc": f"{c['acc_low']:.3f}–{c['acc_high']:.3f}", "attack": attack,
            "gap": f"{c['gap']:+.3f}", "ci": ci, "verdict": c["verdict"],
            "named": c["verdict"] in (VERDICT_MG, VERDICT_DP)}


def _baseline_sentence(g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame) -> str:
    attack = primary_attack(g)
    base = ov[ov["family"] == "baseline"] if len(ov) else ov
    if base.empty:
        return "No undefended baseline (κ = 0, no DP-SGD) has been audited."
    acc = base.iloc[0]["test_accuracy"]
    rows = st[(st["setting_id"] == base.iloc[0]["setting_id"]) & (st["attack"] == attack)]
    auc = rows.iloc[0]["auc"] if len(rows) else math.nan
    return f"Undefended baseline: test accuracy {f3(acc)}, {attack or 'attack'}-attack AUC {f3(auc)}."


def _claim(claims: pd.DataFrame) -> str:
    """Whether the strongest attack's AUC lies above 0.5 family-wise, in words (the summary's
    :func:`privaudit.reporting.summary.strongest_claims` row of the group), or ""."""
    if claims.empty:
        return ""
    c = claims.iloc[0]
    if c["verdict"] == NO_TEST:
        return "No interval to test whether its AUC lies above 0.5."
    level = f"{100 * c['level']:g} %"
    how = (f"{c['correction']}, the attacks it is picked from: {p_text(c['p_adjusted'], 'adjusted p')}"
           if c["comparisons"] > 1 else p_text(c["p_adjusted"]))
    if c["verdict"] == ABOVE:
        return f"Its AUC lies above 0.5 family-wise at {level} ({how})."
    return f"Its AUC is not above 0.5 family-wise at {level} ({how})."


def _trained_sentence(g: pd.DataFrame) -> str:
    """How many models the group's audit trained, by role: its targets, their shadow models,
    the reference pools (one per target, their size from the leave-one-out count) and the
    canary models of the one-run audit."""
    targets = g["target_run"].dropna().unique()
    shadows = g["shadow_run"].dropna().unique()
    pools = (g.groupby("target_run")["loo_n_targets"].max().dropna() if "loo_n_targets" in g else pd.Series([]))
    pool_models = int(pools.sum()) if len(pools) else 0
    canaries = int(g.groupby("target_run")["one_run_eps_lower_bound"].max().notna().sum())
    parts = [f"{len(targets)} target{'s' if len(targets) != 1 else ''}"]
    if len(shadows):
        parts.append(f"{len(shadows)} shadow model{'s' if len(shadows) != 1 else ''}")
    if pool_models:
        sizes = sorted({int(v) for v in pools})
        parts.append(f"{pool_models} reference models (pools of {', '.join(map(str, sizes))})")
    if canaries:
        parts.append(f"{canaries} canary model{'s' if canaries != 1 else ''}")
    total = len(targets) + len(shadows) + pool_models + canaries
    return f"The audit trained {total} models: {', '.join(parts)}."


def _empirical_sentence(g: pd.DataFrame, st: pd.DataFrame, ov: pd.DataFrame, extras: Any,
                        claims: pd.DataFrame | None = None) -> dict | None:
    """The sentence about the strongest attack and the empirical ε (templates/sentences.html.j2),
    or None when the group has no such results. ``claims``: the group's row of the summary's
    family-wise test of the strongest attack's AUC."""
    if not has_empirical(g, extras) or ov.empty:
        return None
    out: dict = {"strongest": None, "bounds": "", "claim": "", "trained": _trained_sentence(g)}
    ref = reference_setting(ov)
    assert ref is not None  # ov is not empty
    if ref["strongest"]:
        r = attack_rows(st, ref).loc[ref["strongest"]]
        out.update(strongest=ref["strongest"], auc=f3(r["auc"]),
                   where="the baseline" if ref["family"] == "baseline" else setting_name(ref),
                   tpr=pct(r["tpr_at_0p1pct_fpr"]) if finite(r["tpr_at_0p1pct_fpr"]) else "",
                   claim=_claim(claims if claims is not None else pd.DataFrame()))
    with_one_run = ov["one_run_eps_lower_bound"].notna().any()
    clauses = []
    for family in FAMILY_CSS:
        fam = ov[ov["family"] == family]
        have = fam[fam["eps_strongest"].notna()]
        if have.empty:
            continue
        o = have.loc[have["eps_strongest"].idxmax()]
        notes = []
        if o["dp"] and finite(o["epsilon"]):
            notes.append(f"accountant ε = {upper_sig3(o['epsilon'])}")
        if len(fam) > 1:
            notes.append(f"the largest ε bound of its {len(fam)} settings")
        note = f" ({'; '.join(notes)})" if notes else ""
        one = (f" (one-run canary bound: {lb(o['one_run_eps_lower_bound'])})"
               if with_one_run and finite(o["one_run_eps_lower_bound"]) else "")
        bound = f"ε ≥ {lb(o['eps_strongest'])}"
        if finite(o.get("gdp_mu_strongest")):
            bound += (f", μ ≥ {lb3(o['gdp_mu_strongest'])} (Gaussian DP; its ε ≈ {lb(o['gdp_eps_strongest'])}, an "
                      "estimate if the trade-off curve is Gaussian)")
        clauses.append(f"{bound} for the baseline{one}" if family == "baseline"
                       else f"{setting_name(o)}{note}: {bound}{one}")
    if clauses:
        attack = next((o["eps_attack"] for _, o in ov.iterrows() if o["eps_attack"]), None)
        one_run = "; the one-run canary bound is the rigorous one, from a single training run" if with_one_run else ""
        lead = (f"Empirical ε lower bounds of {attack} (the strongest attack; a heuristic that treats the samples of "
                f"the model as independent trials{one_run}): ")
        out["bounds"] = lead + "; ".join(clauses) + "."
    return out if out["strongest"] or out["bounds"] else None


def group_view(model: str, dataset: str, g: pd.DataFrame, summary: Summary, extras: Any) -> dict:
    """One (model, dataset) group as both its key finding and its section read it: its rows of
    the table (``g``) and of the summary (``st``, ``ov``, ``comps``), and its sentences (the
    verdict, the baseline, the strongest attack and empirical ε), each worked out once."""
    st, ov, comps, claims, vd = (_of(f, model, dataset) for f in (summary.settings, summary.overview,
                                                                  summary.comparisons, summary.strongest_claim,
                                                                  summary.verdicts))
    return {"model": model, "dataset": dataset, "g": g, "st": st, "ov": ov, "comps": comps,
            "verdict": _verdict(g, comps, vd), "baseline": _baseline_sentence(g, st, ov),
            "empirical": _empirical_sentence(g, st, ov, extras, claims)}


def key_findings(views: list[dict]) -> str:
    """The "Key findings" list: one item per group, its DP rows named by their mechanism."""
    from markupsafe import Markup

    from privaudit.reporting.templates import macro, render

    items = [Markup(name_dp(macro("sentences.html.j2", "finding", {
        "slug": slug("g", v["model"], v["dataset"]), "emp_slug": slug("e", v["model"], v["dataset"]),
        **{k: v[k] for k in ("model", "dataset", "verdict", "baseline", "empirical")}}), v["g"]))
        for v in views]
    return render("findings.html.j2", items=items)
