"""The rich summary table printed at the end of ``attack`` and ``audit``."""

from __future__ import annotations

import math

from rich import box
from rich.table import Table

from privaudit.cli.common import fmt
from privaudit.errors import ArtifactError
from privaudit.workspace import Workspace


def setting_text(cfg, metrics: dict) -> str:
    """``baseline``, ``κ=0.5``, ``σ=1`` or ``κ=0.5 σ=1``."""
    bits = []
    if cfg.defence.kappa > 0:
        bits.append(f"κ={cfg.defence.kappa:g}")
    if cfg.defence.dp:
        bits.append(f"σ={metrics.get('noise_multiplier', float('nan')):.3g}")
    return " ".join(bits) or "baseline"


def _max_eps(metrics: dict) -> tuple[float | None, str]:
    best, name = None, ""
    for attack, m in metrics.items():
        eps = m.get("eps_lower_bound")
        if eps is not None and math.isfinite(eps) and (best is None or eps > best):
            best, name = eps, attack
    return best, name


def attack_summary_table(ws: Workspace, results: list[tuple[str, dict, dict]],
                         title: str = "Membership inference") -> Table:
    """One row per target (the model and dataset go in ``title``): setting, accountant ε, test
    accuracy, the paper's shadow attack,
    the strongest attack (highest TPR at 0.1 % FPR, then AUC, as in the HTML report) and the
    empirical ε lower bounds."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption="shadow: AUC of the paper's attack; strongest: highest TPR at 0.1 % FPR (TPR.1%); "
                          "ε lb: empirical lower bounds (95 %); member = positive class")
    for col in ("setting", "ε acct", "test acc", "shadow", "strongest", "AUC", "TPR.1%", "ε lb", "1-run ε"):
        table.add_column(col, justify="left" if col in ("setting", "strongest") else "right",
                         no_wrap=col != "strongest", overflow="fold", min_width=10 if col == "strongest" else None)
    for target, metrics, extras in results:
        try:
            cfg = ws.read_model_config(target)
            tm = ws.read_model_metrics(target)
        except ArtifactError:
            continue
        strongest = max(metrics, key=lambda a: (metrics[a].get("tpr_at_0p1pct_fpr") or 0.0,
                                                metrics[a].get("auc") or 0.0)) if metrics else ""
        s = metrics.get(strongest, {})
        eps, _ = _max_eps(metrics)
        table.add_row(setting_text(cfg, tm), fmt(tm.get("epsilon"), 2) if cfg.defence.dp else "—",
                      fmt(tm.get("test_accuracy")), fmt(metrics.get("shadow", {}).get("auc")), strongest,
                      fmt(s.get("auc")), fmt(s.get("tpr_at_0p1pct_fpr")), fmt(eps, 2),
                      fmt(extras.get("one_run", {}).get("eps_lower_bound"), 2))
    return table
