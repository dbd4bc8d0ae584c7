"""The rich summary table printed at the end of ``attack`` and ``audit``."""

from __future__ import annotations

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


def attack_summary_table(ws: Workspace, results: list[tuple[str, dict]], title: str = "Membership inference") -> Table:
    """One row per (target, attack): setting, ε, test accuracy and the attack's metrics."""
    table = Table(title=title, caption="member = positive class; precision/recall at each attack's stated threshold")
    for col in ("model", "setting", "ε", "test acc", "attack", "AUC", "prec.", "recall", "TPR@1%"):
        table.add_column(col, justify="left" if col in ("model", "setting", "attack") else "right", no_wrap=True)
    for target, metrics in results:
        try:
            cfg = ws.read_model_config(target)
            tm = ws.read_model_metrics(target)
        except ArtifactError:
            continue
        for i, (attack, m) in enumerate(sorted(metrics.items(), key=lambda kv: kv[0] != "shadow")):
            first = i == 0
            table.add_row(f"{cfg.model.name}/{cfg.data.dataset}" if first else "",
                          setting_text(cfg, tm) if first else "",
                          fmt(tm.get("epsilon"), 2) if first and cfg.defence.dp else "",
                          fmt(tm.get("test_accuracy")) if first else "",
                          attack, fmt(m.get("auc")), fmt(m.get("precision")), fmt(m.get("recall")),
                          fmt(m.get("tpr_at_1pct_fpr")))
        table.add_section()
    return table
