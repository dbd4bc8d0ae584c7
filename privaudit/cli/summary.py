"""The rich summary table printed at the end of ``attack`` and ``audit``."""

from __future__ import annotations

from rich.table import Table

from privaudit.cli.common import fmt
from privaudit.errors import ArtifactError
from privaudit.workspace import Workspace


def attack_summary_table(ws: Workspace, results: list[tuple[str, dict]], title: str = "Membership inference") -> Table:
    table = Table(title=title)
    for col, just in (("target", "left"), ("defence", "left"), ("ε", "right"), ("test acc", "right"),
                      ("attack", "left"), ("AUC", "right"), ("precision", "right"), ("recall", "right"),
                      ("TPR@1%FPR", "right")):
        table.add_column(col, justify=just)
    for target, metrics in results:
        try:
            cfg = ws.read_model_config(target)
            tm = ws.read_model_metrics(target)
        except ArtifactError:
            continue
        label = cfg.defence.label if cfg.defence.dp or cfg.defence.kappa else "none"
        if cfg.defence.dp:
            label = f"{label} (σ={tm.get('noise_multiplier', float('nan')):.3g})"
        for i, (attack, m) in enumerate(sorted(metrics.items())):
            table.add_row(f"{cfg.model.name}/{cfg.data.dataset}" if i == 0 else "",
                          label if i == 0 else "",
                          fmt(tm.get("epsilon"), 2) if i == 0 and cfg.defence.dp else "",
                          fmt(tm.get("test_accuracy")) if i == 0 else "",
                          attack, fmt(m.get("auc")), fmt(m.get("precision")), fmt(m.get("recall")),
                          fmt(m.get("tpr_at_1pct_fpr"))),
        table.add_section()
    return table
