"""The rich summary table printed at the end of ``attack`` and ``audit``.

Numbers are written by :mod:`privaudit.core.formatting`, the rules of the HTML report: a
lower bound (an empirical ε, a Gaussian-DP μ) is rounded down, an accountant's ε (an upper
bound) up, to 3 significant digits.
"""

from __future__ import annotations

import math

import pandas as pd
from rich import box
from rich.console import Group
from rich.table import Table

from privaudit.analysis.metrics import rank_attacks, strongest_attack
from privaudit.core.formatting import (
    bounds,
    detectable,
    difference,
    fixed,
    lower_bound,
    number,
    upper_bound,
    upper_sig3,
)
from privaudit.reporting.at_accuracy import MEASURES, MU, TPR
from privaudit.reporting.summary import setting_label


def setting_order(cfg, metrics: dict) -> tuple:
    """Where a target's row goes (``metrics``: its model's): by model and dataset, the baseline
    and MG noise by κ, the other defences by name and knob, DP last by σ as trained (given, or
    calibrated to a target ε), then seed; numbers compared as numbers (σ=0.5 before σ=1.15)."""
    d = cfg.defence
    sigma = metrics.get("noise_multiplier")
    sigma = float(sigma) if isinstance(sigma, (int, float)) and math.isfinite(sigma) else math.inf
    return (cfg.model.name, cfg.data.dataset, d.dp, d.method, d.kappa, sigma if d.dp else 0.0, d.knob, cfg.seed)


def setting_text(cfg, metrics: dict) -> str:
    """``baseline``, ``κ=0.5``, ``σ=1`` or ``κ=0.5, σ=1`` (σ as trained: calibrated to a target ε
    when the run asked for one)."""
    return setting_label(cfg.defence.dp, cfg.defence.kappa, metrics.get("noise_multiplier", float("nan")),
                         defence=cfg.defence.name, knob=cfg.defence.knob)


#: the header of the audit's μ over each setting's pool models (rich markup: the bracket escaped)
MU_MODELS = "μ \\[models]"


def summary_table(rows: list[tuple], title: str = "Membership inference", summary=None) -> Table:
    """One row per target of ``rows`` ((config, model metrics, attack metrics, extras) each):
    setting (and model, dataset and seed, when the targets span more than one),
    accountant ε, test accuracy, the paper's shadow attack, the strongest attack and the
    empirical ε lower bounds. With the audit's ``summary`` (:mod:`privaudit.reporting.summary`)
    the strongest attack is its group's, the one the HTML report and ``--json`` name (the
    highest mean TPR at 0.1 % FPR over the group's targets, then AUC), and the ε lower bound
    that attack's; without it (one target: ``privaudit attack``), the target's own strongest.
    Only the attacks in each result's metrics are considered (the CLI passes those asked).
    The rows are in :func:`setting_order`."""
    groups, pools = {}, {}
    if summary is not None and not summary.overview.empty:
        groups = {(str(r["model"]), str(r["dataset"])): r["strongest"] for _, r in summary.overview.iterrows()}
        pools = {(str(r["model"]), str(r["dataset"]), str(r["setting"])): r for _, r in summary.overview.iterrows()
                 if math.isfinite(number(r.get("pool_mu_strongest")))}
    rows = sorted(rows, key=lambda row: setting_order(row[0], row[1]))
    datasets = {cfg.data.dataset for cfg, *_ in rows}
    models = {cfg.model.name for cfg, *_ in rows}
    seeds = {cfg.seed for cfg, *_ in rows}
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, padding=(0, 0),
                  caption="acc: test accuracy; shadow: AUC of the paper's attack; strongest: "
                          + ("the strongest attack of the audit (highest mean TPR at 0.1 % FPR over its targets, then "
                             "AUC), as in the report" if groups else "highest TPR at 0.1 % FPR (TPR.1%), then AUC")
                          + "; ε lb: its empirical ε lower bound, which treats the model's samples as "
                          "independent trials (a heuristic, not a proof; rounded down); μ: its Gaussian-DP μ lower "
                          "bound (95 %), the one privacy scale of every defence"
                          + (", as the mean over the setting's reference-pool models, each attacked with the others "
                             "as references, with the 95 % interval of that mean (on a setting's first row)"
                             if pools else "")
                          + "; 1-run: the rigorous one-run canary bound; member = positive class")
    def strongest_of(cfg, metrics: dict) -> str:
        key = (cfg.model.name, cfg.data.dataset)
        best = groups[key] if key in groups else strongest_attack(metrics)
        return best if isinstance(best, str) and best in metrics else ""

    # one strongest attack for every row (an audit's): named in the title, not repeated per row
    named = {strongest_of(cfg, m) for cfg, _, m, _ in rows}
    one = next(iter(named)) if len(named) == 1 and groups and "" not in named else None
    if one:
        table.title = f"{title} · strongest attack: {one}"
    columns = (["model"] if len(models) > 1 else []) + (["dataset"] if len(datasets) > 1 else []) + [
        "setting"] + (["seed"] if len(seeds) > 1 else []) + ["ε acct", "acc", "shadow"] + (
        [] if one else ["strongest"]) + ["AUC", "TPR.1%", "ε lb", MU_MODELS if pools else "μ", "1-run"]

    names = max((len(strongest_of(cfg, m)) for cfg, _, m, _ in rows), default=0)
    for col in columns:  # a name is never split: the numbers' headers wrap instead
        table.add_column(col, justify="left" if col in ("model", "dataset", "setting", "strongest") else "right",
                         no_wrap=col in ("setting", "strongest", MU_MODELS), overflow="fold",
                         min_width=names if col == "strongest" else len(col) if len(col) <= 6 else None)
    shown: set = set()
    for cfg, tm, metrics, extras in rows:
        strongest = strongest_of(cfg, metrics)
        s = metrics.get(strongest, {})
        eps = s.get("eps_lower_bound")
        key = (cfg.model.name, cfg.data.dataset, setting_text(cfg, tm))
        mu = lower_bound(s.get("gdp_mu")) if not pools else "" if key in shown else _pool_mu(pools.get(key))
        shown.add(key)
        lead = ([cfg.model.name] if len(models) > 1 else []) + ([cfg.data.dataset] if len(datasets) > 1 else [])
        table.add_row(*lead, setting_text(cfg, tm), *([str(cfg.seed)] if len(seeds) > 1 else []),
                      upper_sig3(tm.get("epsilon")) if cfg.defence.dp else "—",
                      fixed(tm.get("test_accuracy")), fixed(metrics.get("shadow", {}).get("auc")),
                      *([] if one else [strongest or "—"]), fixed(s.get("auc")), fixed(s.get("tpr_at_0p1pct_fpr")),
                      lower_bound(eps), mu, lower_bound(extras.get("one_run", {}).get("eps_lower_bound")))
    return table


def _pool_mu(o) -> str:
    """A setting's μ over its pool models (its overview row ``o``): the mean rounded down and
    its 95 % interval, ``0.31 [0.25, 0.38]``; a dash without one."""
    if o is None:
        return "—"
    return _mu_text(o["pool_mu_strongest"], o["pool_mu_strongest_lo"], o["pool_mu_strongest_hi"])


def strongest_claim_lines(summary) -> list[str]:
    """The summary's family-wise test of each group's strongest attack
    (:func:`privaudit.reporting.summary.strongest_claims`), a line each: its AUC on the
    reference setting and whether it lies above 0.5 family-wise, which correction, over how
    many attacks."""
    from privaudit.analysis.familywise import p_text

    claims = getattr(summary, "strongest_claim", None)
    if claims is None or claims.empty:
        return []
    many = claims[["model", "dataset"]].drop_duplicates().shape[0] > 1
    lines = []
    for _, c in claims.iterrows():
        lead = f"{c['model']} · {c['dataset']}: " if many else ""
        lines.append(f"{lead}strongest attack {c['attack']}, AUC {fixed(c['auc'])} on {c['setting']}: {c['verdict']} "
                     f"at {100 * c['level']:g} % ({c['correction']}; {p_text(c['p_adjusted'], 'adjusted p')})")
    return lines


#: the measures as the verdicts name them
VERDICT_MEASURES = {"auc": "AUC", "tpr_at_0p1pct_fpr": "TPR@0.1%", "eps_lower_bound": "ε lb", "gdp_mu": "μ"}


def verdict_table(summary) -> Group | None:
    """The report's verdicts (:mod:`privaudit.reporting.summary`), one block per comparison so
    that each reads whole at 80 columns: the attack, the measure and the test accuracies
    compared on one line, then DP-SGD − MG noise at equal test accuracy with its 95 %
    interval and what it decides (a reason wraps under it, indented); a heading per model and
    dataset when there are several. None when nothing was compared."""
    from rich.padding import Padding
    from rich.text import Text

    v = summary.verdicts if summary is not None else None
    if v is None or v.empty:
        return None
    many = v[["model", "dataset"]].drop_duplicates().shape[0] > 1
    parts: list = [Text("At equal test accuracy, which defence leaks less?", style="bold")]
    group = None
    for _, r in v.iterrows():
        if many and (r["model"], r["dataset"]) != group:
            group = (r["model"], r["dataset"])
            parts.append(Text(f"{r['model']} · {r['dataset']}", style="bold underline"))
        acc = f"{r['acc_low']:.3f}–{r['acc_high']:.3f}" if math.isfinite(r["acc_low"]) else "—"
        measure = VERDICT_MEASURES.get(r["metric"], r["metric"])
        parts.append(Text(f"{r['attack']} ({r['comparison']}) · {measure} · test acc {acc}"))
        parts.append(Padding(Text(_verdict_line(r)), (0, 0, 0, 2)))
    parts.append(Text("DP − MG > 0: DP-SGD leaks more (TPR in percentage points, pp), with the row's own 95 % "
                      "interval; a defence is named only when the difference is significant at 5 % family-wise "
                      "(Holm–Bonferroni over the comparisons of the model and dataset); per defence: its "
                      "replicates (pool models × seeds); could detect ≥ X: the smallest difference found "
                      "significant with 80 % power, so no significant difference means none larger than X",
                      style="dim"))
    return Group(*parts)


def _verdict_line(r) -> str:
    """``DP − MG +2.419 pp [+0.528, +4.469]: MG noise leaks less (t over 3 seeds, adjusted p
    = 0.012; 3 per defence, could detect ≥ 1.204 pp)``, or the verdict and its reason where
    nothing was measured: the replicates per defence (pool models × seeds) and the smallest
    difference the comparison detects with 80 % power (rounded up)."""
    from privaudit.analysis.familywise import p_text

    gap, interval = difference(r["metric"], r["gap"], r["gap_lo"], r["gap_hi"])
    adj = r.get("p_adjusted", math.nan)
    held = f", {p_text(adj, 'adjusted p')}" if isinstance(adj, float) and math.isfinite(adj) else ""
    n = number(r.get("n_models"))
    could = detectable(r["metric"], r.get("detectable"))
    power = "; ".join(t for t in (f"{int(n)} per defence" if math.isfinite(n) and n > 0 else "",
                                  f"could detect {could}" if could else "") if t)
    verdict = r["verdict"] + (f" ({r['interval']}{held}{'; ' + power if power else ''})" if r["interval"] else "") + (
        f": {r['reason']}" if r["reason"] else "")
    measured = f"DP − MG {gap}" + (f" {interval}" if interval else "") if gap != "—" else ""
    return f"{measured}: {verdict}" if measured else verdict


def at_accuracy_table(summary) -> Table | None:
    """Which defence at each target accuracy (``audit --target-accuracies``; the report's
    section of the same name): per target a row per defence, its setting, test accuracy, the
    measure its verdict compares with its 95 % interval (the strong attack's μ over the
    setting's pool models, ``μ [models]``, where every defence at that accuracy has it, else
    its TPR at 0.1 % FPR in %), the strong attack's TPR (beside μ, without interval), the weak
    attack's TPR, and the verdict; None without targets."""
    at = getattr(summary, "at_accuracy", None)
    if at is None or at.empty:
        return None
    by_mu = at["measure"].astype(str) == MEASURES[MU] if "measure" in at else pd.Series(False, index=at.index)
    table = Table(title="Which defence at your accuracy?", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  padding=(0, 0), show_edge=False, caption=_at_accuracy_caption(at, by_mu))
    columns = ["target", "defence", "setting", "acc", *([MU_MODELS] if by_mu.any() else []), "strong TPR.1%", "weak",
               "verdict"]
    rows = [_at_accuracy_cells(r, bool(m), bool(by_mu.any())) for (_, r), m in zip(at.iterrows(), by_mu)]
    for k, col in enumerate(columns):  # names, intervals and verdicts wrap at their spaces, never inside a word
        words = max(len(w) for text in (col, *(row[k] for row in rows)) for w in text.split())
        wraps = col in ("defence", "verdict") or (col == "strong TPR.1%" and by_mu.any())
        table.add_column(col, justify="left" if col in ("target", "defence", "setting", "verdict") else "right",
                         overflow="fold", no_wrap=not wraps, min_width=words if wraps else None,
                         max_width=words if wraps and col != "defence" else None)
    for k, row in enumerate(rows):  # a target written once, on its first row
        table.add_row("" if k and rows[k - 1][0] == row[0] else row[0], *row[1:])
    return table


def _at_accuracy_cells(r, by_mu: bool, mu_column: bool) -> list[str]:
    """One at-accuracy row's cells (:func:`at_accuracy_table`): the interval goes with the
    measure the row's verdict compares, μ (``by_mu``) or the strong attack's TPR."""
    status = {"cannot reach: above": "above", "cannot reach: below": "below", "not reached": "missed"}
    reached = math.isfinite(r["test_accuracy"])
    mu = [_mu_text(r["strong_mu"], r["strong_mu_lo"], r["strong_mu_hi"]) if by_mu else "—"] if mu_column else []
    tpr = (r["strong_tpr_at_0p1pct_fpr"], *((math.nan, math.nan) if by_mu else (
        r["strong_tpr_at_0p1pct_fpr_lo"], r["strong_tpr_at_0p1pct_fpr_hi"])))
    return [f"{r['target_accuracy']:.3f}", _short_defence(r["defence"]),
            str(r["setting"]) if reached else status.get(r["status"], r["status"]),
            f"{r['test_accuracy']:.3f}" if reached else "—", *mu, _percent(*tpr), _percent(r["weak_tpr_at_0p1pct_fpr"]),
            _verdict_word(str(r["verdict"] or ""))]


def _at_accuracy_caption(at, by_mu) -> str:
    """The at-accuracy table's caption; with rows whose verdicts compare μ (``by_mu``) its first
    clause says what ``μ [models]`` is (over how many models, where the rows share one count)."""
    n = {int(v) for v in at.loc[by_mu, "n_models"] if math.isfinite(number(v))} if by_mu.any() else set()
    over = f"the setting's {n.pop()} pool models" if len(n) == 1 else "the setting's pool models"
    by_tpr = (at["measure"].astype(str) == MEASURES[TPR]).any() if "measure" in at else True
    mu = (f"{MU_MODELS}: what the verdict compares, the strong attack's Gaussian-DP μ, the mean over {over}, with "
          "its 95 % interval over them (an estimate; mean and lower end rounded down, upper end up)"
          + ("; elsewhere the verdict compares strong TPR, shown with its 95 % interval; " if by_tpr else "; ")
          if by_mu.any() else "")
    return (mu + "TPR at 0.1 % FPR in %" + ("" if by_mu.any() else " with its 95 % interval")
            + ": strong = the audit's strongest attack (reference models trained with the defence), weak = the "
            "one-shadow attack; least: leaks least; more: it leaks more than the least one, family-wise at 5 % "
            "(Holm–Bonferroni over every pair of the defences at that accuracy); tied: cannot be told apart from it; "
            "stays above: the defence stays more accurate than the target even at its strongest setting, audited "
            "there and not compared; above / below: the target lies above or below every accuracy the defence gave; "
            "missed: inside that range, not reached")


def _short_defence(name) -> str:
    return str(name).replace("adversarial regularisation", "adv. regularisation")


def _mu_text(mu, lo, hi) -> str:
    """A μ over pool models: the mean rounded down and its 95 % interval, ``0.31 [0.25, 0.38]``;
    a dash without the mean."""
    if not math.isfinite(number(mu)):
        return "—"
    return f"{lower_bound(mu)} {bounds(lo, hi)}".strip()


def _percent(v, lo=math.nan, hi=math.nan) -> str:
    """A rate in % with one decimal, and its interval when both ends are numbers: ``12.3 (11.3–13.5)``."""
    if not math.isfinite(v):
        return "—"
    return f"{100 * v:.1f}" + (f" ({100 * lo:.1f}–{100 * hi:.1f})" if math.isfinite(lo) and math.isfinite(hi) else "")


def _verdict_word(verdict: str) -> str:
    """An at-accuracy verdict in one word, as the table's caption explains them."""
    return ("least" if verdict.startswith("leaks least") else "more" if verdict.startswith("leaks more")
            else "tied" if verdict.startswith("cannot be told") else "stays above"
            if verdict.startswith("not compared: above") else "—")


def scan_table(result) -> Table:
    """One row per attack of a :class:`~privaudit.scanning.run.ScanResult`, strongest first:
    AUC with its 95 % interval (rounded outwards), TPR at 1 % and 0.1 % FPR, the ε and μ lower
    bounds (rounded down) and how the thresholds were chosen. It fits 80 columns with every
    number whole; precision and recall are in attacks.csv and on the page."""
    short = {"cv": "cv", "shadow": "shdw", "references": "refs"}
    table = Table(title="Membership inference from the model's outputs", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True,
                  caption="AUC with its 95 % DeLong interval (each row on its own; the verdict below is "
                          "family-wise over all the attacks); TPR at 1 % / 0.1 % FPR; ε lb: empirical ε lower bound "
                          "treating the samples as independent trials (a heuristic, not a proof); μ lb: Gaussian-DP μ "
                          "lower bound (95 %) of the same decisions; bounds rounded down, intervals outwards; thr: "
                          "thresholds chosen by cross-validation (cv), the shadow model (shdw) or leave-one-out over "
                          "the references (refs); precision and recall: attacks.csv and the page")
    names = max((len(name) for name in result.metrics), default=6)
    for col in ("attack", "AUC", "95 % CI", "TPR1%", "TPR.1%", "ε lb", "μ lb", "thr"):
        table.add_column(col, justify="left" if col in ("attack", "thr") else "right",
                         no_wrap=True, min_width=names if col == "attack" else None)
    for name in rank_attacks(result.metrics):
        m = result.metrics[name]
        interval = (f"{lower_bound(m.get('auc_lo'))}–{upper_bound(m.get('auc_hi'))}"
                    if math.isfinite(number(m.get("auc_lo"))) and math.isfinite(number(m.get("auc_hi"))) else "—")
        table.add_row(name, fixed(m.get("auc")), interval, fixed(m.get("tpr_at_1pct_fpr")),
                      fixed(m.get("tpr_at_0p1pct_fpr")), lower_bound(m.get("eps_lower_bound")),
                      lower_bound(m.get("gdp_mu")), short.get(m.get("calibration"), str(m.get("calibration", ""))[:4]))
    return table


#: the plan table's short headers (80 columns)
PLAN_HEADERS = {"reference": "refs"}


def plan_table(plan) -> Table:
    """``--dry-run``: the models a run trains, a row per architecture and defence setting with
    a column per role (trained + reused), and the estimated training time
    (:class:`privaudit.executor.preview.RunPlan`)."""
    from privaudit.executor.preview import duration

    roles = list(dict.fromkeys(m["role"] for m in plan.models))
    rows: dict[tuple, dict] = {}
    for m in plan.models:
        row = rows.setdefault((m["model"], m["defence"], m["dataset"]), {"seconds": 0.0, "reused": 0})
        row[m["role"]] = row.get(m["role"], 0) + m["models"]
        row["reused"] += m["reused"]
        row["seconds"] += m["seconds"]
    datasets = list(dict.fromkeys(key[2] for key in rows))
    one = len(datasets) == 1  # the dataset goes in the title: the table fits 80 columns
    table = Table(title=f"privaudit {plan.command} --dry-run: the models" + (f" on {datasets[0]}" if one else ""),
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, padding=(0, 1),
                  caption="refs: reference models (the pools)" if "reference" in roles else None)
    for col in ("model", "defence") if one else ("model", "defence", "dataset"):
        table.add_column(col, no_wrap=True)
    for col in (*roles, "reused", "training"):
        table.add_column(PLAN_HEADERS.get(col, col), justify="right", no_wrap=True)
    for (model, defence, dataset), row in rows.items():
        trained = sum(row.get(r, 0) for r in roles)
        table.add_row(model, defence, *(() if one else (dataset,)), *(str(row.get(r, 0)) for r in roles),
                      str(row["reused"]), duration(row["seconds"]) if trained > row["reused"] else "—")
    return table
