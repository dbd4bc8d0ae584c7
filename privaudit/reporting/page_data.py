"""What every part of the report page reads its inputs through: the trade-off table typed and
in the page's order, the attacks' order, the per-target extras, a setting's name and rows in
the summary, and how a group names its DP mechanism."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privaudit.attacks.registry import POOL_ATTACKS, REPORT_ORDER
from privaudit.defences import DEFENCES
from privaudit.reporting.page_numbers import num, plain
from privaudit.reporting.summary import other_defence
from privaudit.reporting.table import COLUMNS, as_bool

_TEXT_COLUMNS = ["target_run", "shadow_run", "model", "dataset", "defence", "canaries", "accountant", "attack",
                 "source"]
_NUMERIC_COLUMNS = [c for c in COLUMNS if c not in _TEXT_COLUMNS and c != "dp"]
#: the rank of an attack without a report order (privaudit.attacks.registry: data-free,
#: shadow-transfer) in the table's rows: beside lira-bayes-offline's, then by name
UNRANKED = 9
VERDICT_CSS = {"MG noise leaks less": "mg", "DP-SGD leaks less": "dp", "no significant difference at 95 %": "tie"}
FAMILY_CSS = {"baseline": "fam0", "MG noise": "fam1", "DP-SGD": "fam2", "MG + DP-SGD": "fam3"}
OTHER_CSS = "fam4"  # every other defence of privaudit.defenses


def attack_key(a: str) -> tuple[int, str]:
    """The report's sort key of an attack (one without a report order beside the quantile attack, by name)."""
    return REPORT_ORDER.get(a, REPORT_ORDER["quantile"]), a


def prepare(table: pd.DataFrame | None) -> pd.DataFrame:
    """A copy of the table with every expected column, typed, plus helper columns."""
    df = pd.DataFrame(columns=COLUMNS) if table is None else table.copy()
    df = df.reset_index(drop=True)
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    for c in _NUMERIC_COLUMNS:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["dp"] = as_bool(df["dp"]).to_numpy() if len(df) else pd.Series([], dtype=bool)
    for c in ("model", "dataset", "attack"):
        df[c] = df[c].astype(object).where(df[c].notna(), "?").astype(str)
    kappa = df["kappa"].fillna(0.0)
    # defence rank: 0 baseline, 1 MG, 2 DP-SGD, 3 both, then every other defence in the registry's order
    df["_rank"] = np.where(df["dp"], np.where(kappa > 0, 3, 2), np.where(kappa > 0, 1, 0))
    order = {name: 4 + i for i, name in enumerate(DEFENCES)}
    other = df["defence"].map(lambda n: order.get(n) if other_defence(n) is not None else None)
    df["_rank"] = other.where(other.notna(), df["_rank"]).astype(float)
    df["_attack_rank"] = df["attack"].map(REPORT_ORDER).fillna(UNRANKED)
    df["_run"] = df["target_run"].map(plain)
    src = df["source"].where(df["source"].notna(), df["shadow_run"])
    df["_source"] = src.map(plain)
    df = df.sort_values(["model", "dataset", "_rank", "kappa", "knob", "noise_multiplier", "_run",
                         "_attack_rank", "attack"], kind="stable", na_position="first")
    return df.reset_index(drop=True)


def dp_family(g: pd.DataFrame) -> str:
    """The DP mechanism of a (model, dataset) group: NoisyCGD for ``convex-relu`` (its only
    DP training), DP-SGD otherwise."""
    return "NoisyCGD" if (g["defence"].astype(str) == "noisycgd").any() else "DP-SGD"


def name_dp(fragment: str, g: pd.DataFrame) -> str:
    """A group's HTML with its DP rows named by their mechanism (the sections are written
    for DP-SGD, the mechanism of every group but ``convex-relu``'s)."""
    family = dp_family(g)
    return fragment if family == "DP-SGD" else fragment.replace("DP-SGD", family)


def extras_of(extras: Any, run: Any, key: str) -> Mapping:
    """``extras[run][key]`` when it is a mapping, else an empty one."""
    if not isinstance(extras, Mapping) or not isinstance(run, str):
        return {}
    per_run = extras.get(run)
    if not isinstance(per_run, Mapping):
        return {}
    value = per_run.get(key)
    return value if isinstance(value, Mapping) else {}


def has_empirical(g: pd.DataFrame, extras: Any) -> bool:
    """Whether a group has anything for the "strongest attacks and empirical ε" part."""
    if g["attack"].isin(POOL_ATTACKS).any():
        return True
    if g["eps_lower_bound"].notna().any() or g["one_run_eps_lower_bound"].notna().any():
        return True
    return any(extras_of(extras, run, k) for run in g["target_run"].unique()
               for k in ("loo", "exposure", "one_run"))


def with_one_run(table: pd.DataFrame | None, extras: Mapping) -> pd.DataFrame | None:
    """The table with ``one_run_eps_lower_bound`` (and the f-DP ``one_run_fdp_eps_lower_bound``)
    taken from the extras where the table has none (tables written before the column existed)."""
    if table is None or not len(table) or not extras:
        return table
    out = table.copy()
    runs = out["target_run"] if "target_run" in out.columns else pd.Series(None, out.index)
    for col, key in (("one_run_eps_lower_bound", "eps_lower_bound"),
                     ("one_run_fdp_eps_lower_bound", "fdp_eps_lower_bound")):
        have = out[col] if col in out.columns else pd.Series(np.nan, out.index)
        found = runs.map(lambda r, key=key: num(extras_of(extras, r, "one_run").get(key)))
        out[col] = pd.to_numeric(have, errors="coerce").fillna(found)
    return out


def primary_attack(g: pd.DataFrame) -> str | None:
    """The attack a group's sentences and trade-off plots are about: the paper's (shadow)
    when it ran, else the first in the report's attack order."""
    attacks = list(dict.fromkeys(g.sort_values("_attack_rank", kind="stable")["attack"]))
    if not attacks:
        return None
    return "shadow" if "shadow" in attacks else attacks[0]


def setting_name(o: Mapping[str, Any]) -> str:
    """``baseline``, ``MG noise κ=0.5``, ``DP-SGD σ=1``, ``MG + DP-SGD κ=0.5, σ=1``, ``label
    smoothing α=0.1`` (another defence's setting names its family)."""
    if o["family"] == "baseline" or o.get("other_defence", False):
        return "baseline" if o["family"] == "baseline" else str(o["setting"])
    return f"{o['family']} {o['setting']}"


def attack_rows(st: pd.DataFrame, o: Mapping[str, Any]) -> pd.DataFrame:
    """A setting's per-attack rows of the summary, indexed by attack, in the report's order."""
    rows = st[st["setting_id"] == o["setting_id"]].set_index("attack")
    return rows.loc[sorted(rows.index, key=attack_key)]


def figure(svg: str, caption: str) -> dict:
    """A figure of a section's ``plots`` grid: its inline SVG and its caption."""
    from markupsafe import Markup

    return {"svg": Markup(svg), "caption": caption}  # matplotlib's own SVG: no script, no link


def fpr_floor(n_nonmembers: pd.Series) -> float:
    """The lowest FPR a log-log ROC shows: 1 / non-members, within [1e-4, 0.1]."""
    n = n_nonmembers.dropna()
    low = max(1e-4, 1.0 / float(n.min())) if len(n) and n.min() > 0 else 1e-4
    return min(low, 0.1)
