"""Benchmark: strong attacks from few reference models (leave-one-out over one pool).

One pool per architecture, as LiRA's authors evaluate: the audited target and its 64
reference models (privaudit's pool: complementary pairs of random halves of the pool samples,
the target's members and non-members), 65 models in all, each trained once with loss traces
recorded. Each model in turn is the attacked one; its references are a random subset of k
of the others, seeded by (attacked model, k) (never its own complement, which would leak its membership through the
reference set), so no model is trained for the comparison. Per attack and k ∈ {0, 1, 2, 4, 8, 16, 32},
TPR at 0.1 % FPR and AUC (ROC on the attacked model's own labels, as the LiRA paper reports),
with 95 % t-intervals over the attacked models. Every reference-based attack also runs with
the whole pool (every other model: 63 references for a pool model, its complement left out,
64 for the target), and the yardstick is the best of them by mean TPR (:func:`yardstick`):
the strongest whole-pool attack, not one chosen in advance.

Beside privaudit's pool attacks (LiRA per-sample, global, shrunk-variance; RMIA) it runs the
few-reference candidates, each kept in the audit only where it helps (docs/performance.md):
LiRA with shrunk means under a difficulty prior (``lira-bayes-*``,
:func:`privaudit.attacks.lira.lira_bayes_scores`); the same with a learned prior on each
sample's OUT mean (``+prior``: :class:`privaudit.attacks.difficulty_prior.DifficultyPrior`, its
embedding trained once on the population); the same and shrunk LiRA on six views of each
image (``+views``: the image, its mirror, shifts by two pixels), and, where the pool queries
more than the plain image (``--augment flip``: the mirror too), shrunk-mean LiRA on the plain
image alone (``@plain``); RMIA with the paper's count, ties at the top of its score included
(``rmia-tied``; the audit's ``rmia`` counts without them) and with its published soft-margin
Taylor signal (``rmia-taylor``); and the mean of label-free normal scores of two attacks'
ranks (``combined``: :func:`combined_scores`). The loss-trace ranking (LT-IQR) is scored as
the share of an attacked model's top 1 % members by trace IQR that are among its top 1 %
members by LiRA online with the whole pool.

Two phases, resumable (the workspace keeps every trained model and the pool's outputs):

    python -m benchmarks.bench_few_refs train --data-dir DIR --workspace W --arch mlp
    python -m benchmarks.bench_few_refs evaluate --data-dir DIR --workspace W --arch mlp --out F.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from privaudit.core.config import RunConfig, make_config
from privaudit.pipeline.pools import ensure_pool, model_logits
from privaudit.pipeline.runs import DataCache, ensure_model
from privaudit.pipeline.workspace import Workspace

POOL = 64
REFERENCES = (0, 1, 2, 4, 8, 16, 32)
FPR = 0.001
FEW_REFERENCE_ATTACKS = ("lira-online", "lira-online-global", "lira-offline-global", "lira-shrunk-online",
                         "lira-shrunk-offline", "lira-bayes-online", "lira-bayes-offline", "rmia")


def recipe(arch: str, part: int, epochs: int | None, augment: str = "none") -> RunConfig:
    return make_config(model=arch, dataset="cifar10", part_size=part, epochs=epochs, augment=augment)


def train(args) -> None:
    ws = Workspace(args.workspace)
    data = DataCache(args.data_dir)
    cfg = recipe(args.arch, args.part, args.epochs, args.augment)
    device = torch.device("cpu")
    t0 = time.perf_counter()
    done = [0]

    def started(c) -> None:
        done[0] += 1
        print(f"[{time.perf_counter() - t0:7.0f} s] training {done[0]}: {getattr(c, 'run_name', c)}", flush=True)

    if args.from_end:  # a second trainer beside the first: references from the last one back (each model is locked)
        for c in reversed([cfg.recipe.as_reference(args.pool, i) for i in range(args.pool)]):
            ensure_model(c, ws, data, device, on_start=started)
        return
    ensure_model(cfg, ws, data, device, on_start=started)
    ensure_pool(cfg, args.pool, ws, data, device, on_start=started)
    print(f"trained in {time.perf_counter() - t0:.0f} s", flush=True)


def _interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval over the attacked models."""
    from scipy.stats import t as student

    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return float(v.mean()), float("nan"), float("nan")
    half = student.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half)


def reference_candidates(t: int, m: int) -> np.ndarray:
    """The models that may serve as references when model ``t`` of ``m`` is attacked: every
    other one, except a pool model's complement (pool models 2j and 2j + 1 trained on
    complementary halves, so the complement's membership is the attacked model's, negated);
    the target, model m − 1, has no complement among them."""
    return np.array([i for i in range(m) if i != t and (t == m - 1 or i != (t ^ 1))])


#: what each view of an image is: the plain image, its mirror, and shifts by SHIFT pixels
#: (reflect-padded), the views LiRA's authors query
SHIFT = 2
VIEWS = ("plain", "mirror", "up", "down", "left", "right")
#: the attacks combined by :func:`combined_scores` (their within-target ranks)
COMBINED = ("lira-bayes-online", "rmia")


def view_logits(model, normaliser, images: np.ndarray) -> np.ndarray:
    """Logits (n, len(VIEWS), C) of one model on each view of ``images`` (n, c, h, w)."""
    import torch.nn.functional as F

    from privaudit.training.results import predict_logits

    x = torch.from_numpy(normaliser(images))
    padded = F.pad(x, (SHIFT, SHIFT, SHIFT, SHIFT), mode="reflect")
    h, w = x.shape[-2:]
    crops = {"up": (0, SHIFT), "down": (2 * SHIFT, SHIFT), "left": (SHIFT, 0), "right": (SHIFT, 2 * SHIFT)}
    out = []
    for v in VIEWS:
        if v == "plain":
            xv = x
        elif v == "mirror":
            xv = x.flip(-1)
        else:
            dy, dx = crops[v]
            xv = padded[..., dy:dy + h, dx:dx + w]
        out.append(predict_logits(model, xv.contiguous()).numpy())
    return np.stack(out, axis=1).astype(np.float32)


def all_view_logits(ws: Workspace, names: list[str], images, indices: np.ndarray, pop: np.ndarray,
                    cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every model's logits on every view of the pool samples and of the population, (M, n, V, C)
    and (M, z, V, C), cached in ``cache`` (computed once: inference only)."""
    if cache.exists():
        with np.load(cache) as npz:
            if list(npz["names"]) == names:
                return npz["logits"], npz["pop_logits"]
    logits, pop_logits = [], []
    for name in names:
        loaded = ws.load_model(name, images.input_shape, images.num_classes)
        logits.append(view_logits(loaded.model, loaded.normaliser, images.x[indices]))
        pop_logits.append(view_logits(loaded.model, loaded.normaliser, images.x[pop]))
    arrays = {"names": np.array(names), "logits": np.stack(logits), "pop_logits": np.stack(pop_logits)}
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(cache)
    return arrays["logits"], arrays["pop_logits"]


def within_target_ranks(scores: np.ndarray) -> np.ndarray:
    """Φ⁻¹ of each score's mid-rank among the audited samples' scores, (r − ½)/n: a scale with
    no label in it (the auditor knows which samples are audited, not which are members)."""
    from scipy.stats import norm, rankdata

    return norm.ppf((rankdata(scores) - 0.5) / len(scores))


def combined_scores(scores: dict[str, np.ndarray], names: tuple[str, ...] = COMBINED) -> np.ndarray:
    """The mean of the attacks' :func:`within_target_ranks`: each attack weighs the same,
    whatever its own scale."""
    return np.mean([within_target_ranks(scores[a]) for a in names], axis=0)


class Signals:
    """What the attacks read, for every model of the pool (the target last)."""

    def __init__(self, logits, pop_logits, views, labels, pop_labels, keep, prior=None):
        from privaudit.attacks.features import compute_features
        from privaudit.attacks.rmia import taylor_soft_margin

        self.logits, self.labels, self.keep = logits, labels, keep
        self.prior = prior  # None, or (DifficultyPrior fitted on the population, the pool samples' features)
        self.feats = compute_features(logits, labels)
        self.pop_feats = compute_features(pop_logits, pop_labels)
        self.view_phi = None if views is None else compute_features(views, labels).phi  # (M, n, V)
        self.taylor = taylor_soft_margin(logits[:, :, 0], labels[None, :])  # (M, n)
        self.pop_taylor = taylor_soft_margin(pop_logits[:, :, 0], pop_labels[None, :])


def few_reference_scores(t: int, refs: np.ndarray, sig: Signals) -> dict[str, np.ndarray]:
    """Every reference-based attack's scores (n,) against model ``t`` with references ``refs``."""
    from privaudit.attacks.lira import lira_bayes_scores, lira_shrunk_scores
    from privaudit.attacks.pool_attacks import _calibrate_rmia_a, scores_from_features
    from privaudit.attacks.rmia import rmia_scores

    feats, pop_feats, keep = sig.feats, sig.pop_feats, sig.keep
    ref_keep = keep[refs]
    a = _calibrate_rmia_a(feats.p_y[refs], ref_keep, pop_feats.p_y[refs], 1.0)  # RMIA's, tied or not
    # with one reference a sample is IN or OUT of it: online LiRA falls back to offline
    out = scores_from_features(feats[t], pop_feats[t], sig.logits[t][:, 0], sig.labels, feats[refs], pop_feats[refs],
                               ref_keep, attacks=FEW_REFERENCE_ATTACKS, rmia_a=a)
    if feats.phi.shape[-1] > 1:  # the pool's queries beyond the plain image (--augment flip: the mirror)
        out["lira-bayes-online@plain"] = lira_bayes_scores(feats.phi[t][:, :1], feats.phi[refs][:, :, :1], ref_keep)
    if sig.prior is not None:
        learned, features = sig.prior
        out_prior = learned.out_mean(pop_feats.phi[refs], features)
        for mode in ("online", "offline"):
            out[f"lira-bayes-{mode}+prior"] = lira_bayes_scores(feats.phi[t], feats.phi[refs], ref_keep,
                                                                 online=mode == "online", out_prior=out_prior)
    if sig.view_phi is not None:
        out["lira-bayes-online+views"] = lira_bayes_scores(sig.view_phi[t], sig.view_phi[refs], ref_keep)
        out["lira-shrunk-online+views"] = lira_shrunk_scores(sig.view_phi[t], sig.view_phi[refs], ref_keep)
    out["rmia-tied"] = rmia_scores(feats.p_y[t], feats.p_y[refs], pop_feats.p_y[t], pop_feats.p_y[refs], a=a,
                                   ref_keep_x=ref_keep)  # the paper's count, as the audit ran it before
    a = _calibrate_rmia_a(sig.taylor[refs], ref_keep, sig.pop_taylor[refs], 1.0)
    out["rmia-taylor"] = rmia_scores(sig.taylor[t], sig.taylor[refs], sig.pop_taylor[t], sig.pop_taylor[refs], a=a,
                                     ref_keep_x=ref_keep, interpolate=True)
    out["combined"] = combined_scores(out)
    return out


def load_signals(args, cfg: RunConfig, ws: Workspace, data: DataCache):
    """The pool (trained if missing), its images and :class:`Signals` for every model, the
    target last; each model's six views are cached in the workspace."""
    device = torch.device("cpu")
    pool = ensure_pool(cfg, args.pool, ws, data, device)
    images = data.images(cfg)
    target = cfg.validated().run_name
    names = list(pool.models) + [target]
    t_logits = model_logits(ws, target, images, pool.indices, pool.queries, device)
    t_pop = model_logits(ws, target, images, pool.pop_indices, pool.queries, device)
    logits = np.concatenate([pool.logits, t_logits[None]]).astype(np.float64)
    pop_logits = np.concatenate([pool.pop_logits, t_pop[None]]).astype(np.float64)
    part = len(pool.indices) // 2
    keep = np.concatenate([pool.keep, (np.arange(len(pool.indices)) < part)[None]])
    views = None
    if args.views:
        t0 = time.perf_counter()
        views, _ = all_view_logits(ws, names, images, pool.indices, pool.pop_indices,
                                   Path(args.workspace) / f"views-{args.arch}.npz")
        print(f"[{time.perf_counter() - t0:6.0f} s] views of {len(names)} models", flush=True)
        views = views.astype(np.float64)
    prior = None
    if args.prior:
        from privaudit.attacks.difficulty_prior import DifficultyPrior

        t0 = time.perf_counter()
        learned = DifficultyPrior(seed=0).fit(images.x[pool.pop_indices], pool.pop_labels)
        prior = (learned, learned.features(images.x[pool.indices], pool.labels))
        print(f"[{time.perf_counter() - t0:6.0f} s] difficulty prior's embedding", flush=True)
    sig = Signals(logits, pop_logits, views, pool.labels, pool.pop_labels, keep, prior)
    return pool, images, names, sig


def attack_model(t: int, sig: Signals, pool, images, add) -> np.ndarray:
    """Every attack against model ``t``: each reference-based one with the whole pool (63
    references for a pool model, its complement left out; 64 for the target) and with k of
    them for every budget k, the loss and quantile attacks with none; each result goes to
    ``add(attack, k, scores)``. Returns LiRA online's whole-pool scores."""
    from privaudit.attacks.quantile import QuantileAttack
    from privaudit.attacks.scores import loss_scores

    others = reference_candidates(t, len(sig.keep))
    whole = few_reference_scores(t, others, sig)
    for attack, s in whole.items():
        add(attack, POOL, s)
    add("loss", 0, loss_scores(sig.logits[t][:, 0], sig.labels))
    # public non-members: the population, which no model of the pool trained on
    q = QuantileAttack(seed=t).fit(images.x[pool.pop_indices], pool.pop_labels, sig.pop_feats[t].phi[:, 0])
    add("quantile", 0, q.scores(images.x[pool.indices], sig.labels, sig.feats[t].phi[:, 0]))
    for k in (k for k in REFERENCES[1:] if k < len(others)):
        # a draw per (attacked model, budget): the same whatever other budgets run
        refs = np.sort(np.random.default_rng([t, k]).choice(others, size=k, replace=False))
        for attack, s in few_reference_scores(t, refs, sig).items():
            add(attack, k, s)
    return whole["lira-online"]


def summary_rows(arch: str, per_model: list[dict]) -> list[dict]:
    """One row per (attack, references): mean TPR at 0.1 % FPR and AUC over the attacked
    models (``per_model``: one entry per attacked model and attack) with their 95 %
    t-intervals, sorted by budget then attack."""
    rows: dict[tuple[str, int], dict[str, list[float]]] = {}
    for e in per_model:
        r = rows.setdefault((e["attack"], e["references"]), {"tpr": [], "auc": []})
        r["tpr"].append(e["tpr"])
        r["auc"].append(e["auc"])
    table = []
    for (attack, k), r in rows.items():
        tpr, auc = _interval(r["tpr"]), _interval(r["auc"])
        table.append({"arch": arch, "attack": attack, "references": k, "n_attacked": len(r["tpr"]),
                      "tpr_at_0p1pct_fpr": tpr[0], "tpr_lo": tpr[1], "tpr_hi": tpr[2],
                      "auc": auc[0], "auc_lo": auc[1], "auc_hi": auc[2]})
    return sorted(table, key=lambda r: (r["references"], r["attack"]))


def shard(attacked: list[int], spec: str | None) -> list[int]:
    """The attacked models of shard ``i/n`` (every n-th from the i-th, 0-based); all without one."""
    if not spec:
        return attacked
    i, n = (int(v) for v in spec.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"--shard {spec}: expected i/n with 0 <= i < n")
    return attacked[i::n]


def summarise(meta: dict, per_model: list[dict], lt_prec: list[float], seconds: float) -> dict:
    """The evaluation's result: ``meta`` (arch, augment, part, epochs, models), the summary rows
    against the strongest whole-pool attack, LT-IQR's precision, and every attacked model's
    figures (``per_model``), from which shards merge."""
    table = summary_rows(meta["arch"], per_model)
    best = yardstick(table)
    lt = _interval(lt_prec) if lt_prec else None
    return {**meta, "fpr": FPR, "yardstick": best["attack"], "rows": table,
            "lt_iqr_precision_top1pct": None if lt is None else {"mean": lt[0], "lo": lt[1], "hi": lt[2],
                                                                  "n": len(lt_prec), "chance": 0.01},
            "seconds": seconds, "per_model": per_model, "lt_iqr_per_model": lt_prec}


def merge(results: list[dict]) -> dict:
    """One result from the shards of one evaluation (each ran ``evaluate --shard i/n``)."""
    keys = ("arch", "augment", "part", "epochs", "models")
    meta = {k: results[0][k] for k in keys}
    if any({k: r[k] for k in keys} != meta for r in results):
        raise ValueError("the shards come from different pools")
    return summarise(meta, [e for r in results for e in r["per_model"]],
                     [v for r in results for v in r["lt_iqr_per_model"]], max(r["seconds"] for r in results))


def write_result(result: dict, out: Path) -> None:
    """Writes ``result`` as JSON (atomically) and prints its rows."""
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(out)
    for r in result["rows"]:
        print(f"{r['attack']:28s} k={r['references']:3d}  TPR@0.1% {r['tpr_at_0p1pct_fpr']:.4f} "
              f"[{r['tpr_lo']:.4f}, {r['tpr_hi']:.4f}]  AUC {r['auc']:.4f}  x{r['share_of_best'] or 0:.2f}")
    print("LT-IQR precision at top 1 %:", result["lt_iqr_precision_top1pct"])


def evaluate(args) -> None:
    from privaudit.analysis.metrics import auc_score, tpr_at_fpr
    from privaudit.attacks.loss_trace import lt_iqr, top_precision

    ws = Workspace(args.workspace)
    cfg = recipe(args.arch, args.part, args.epochs, args.augment)
    t0 = time.perf_counter()
    pool, images, names, sig = load_signals(args, cfg, ws, DataCache(args.data_dir))
    m = len(names)
    position = {int(i): j for j, i in enumerate(pool.indices)}
    attacked = shard([m - 1] + list(range(min(args.targets, m) - 1)), args.shard)  # the target first
    per_model: list[dict] = []
    lt_prec: list[float] = []
    for done, t in enumerate(attacked):
        y = sig.keep[t].astype(int)

        def add(attack: str, k: int, s: np.ndarray, y: np.ndarray = y, t: int = t) -> None:
            per_model.append({"model": t, "attack": attack, "references": k, "tpr": tpr_at_fpr(y, s, FPR),
                              "auc": auc_score(y, s)})

        yard = attack_model(t, sig, pool, images, add)
        found = ws.read_loss_trace(names[t])
        if found is not None:
            trace, idx = found
            cols = np.array([position[int(i)] for i in idx])
            lt_prec.append(top_precision(lt_iqr(trace), yard[cols], 0.01))
        print(f"[{time.perf_counter() - t0:6.0f} s] attacked {done + 1}/{len(attacked)}", flush=True)
    meta = {"arch": args.arch, "augment": args.augment, "part": args.part, "epochs": cfg.train.epochs, "models": m}
    write_result(summarise(meta, per_model, lt_prec, time.perf_counter() - t0),
                 Path(args.out or f"few-refs-{args.arch}.json"))


def yardstick(rows: list[dict]) -> dict:
    """The strongest whole-pool attack: among the rows with every other model as references
    (``references`` = :data:`POOL`), the one with the highest mean TPR at 0.1 % FPR. Sets each
    row's ``share_of_best``, its TPR as a share of that one's (None when it is 0)."""
    whole = [r for r in rows if r["references"] == POOL]
    if not whole:
        raise ValueError("no attack ran with the whole pool")
    best = max(whole, key=lambda r: r["tpr_at_0p1pct_fpr"])
    base = best["tpr_at_0p1pct_fpr"]
    for r in rows:
        r["share_of_best"] = r["tpr_at_0p1pct_fpr"] / base if base > 0 else None
    return best


def markdown_table(result: dict) -> str:
    """The evaluation as docs/performance.md shows it: one row per attack, one column per
    budget (0 references for the attacks that need none, "all" for the whole pool), TPR at
    0.1 % FPR in % with its 95 % interval, and each attack's share of the strongest whole-pool
    attack's TPR at 8 references and with the whole pool."""
    rows = result["rows"]
    yardstick(rows)
    budgets = sorted({r["references"] for r in rows})
    cell = {(r["attack"], r["references"]): r for r in rows}
    head = ["attack"] + ["all" if k == POOL else str(k) for k in budgets] + ["share at 8", "share, all"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for attack in sorted({r["attack"] for r in rows}, key=lambda a: -max(r["tpr_at_0p1pct_fpr"] for r in rows
                                                                             if r["attack"] == a)):
        out = [attack]
        for k in budgets:
            r = cell.get((attack, k))
            out.append("" if r is None else f"{100 * r['tpr_at_0p1pct_fpr']:.1f} ({100 * r['tpr_lo']:.1f}–"
                                            f"{100 * r['tpr_hi']:.1f})")
        for k in (8, POOL):
            r = cell.get((attack, k))
            out.append("" if r is None or r["share_of_best"] is None else f"{100 * r['share_of_best']:.0f} %")
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines)


def figure(results: list[dict], out: Path) -> None:
    """TPR at 0.1 % FPR against the number of reference models each attack trained (0 for
    the loss and quantile attacks), one panel per architecture, 95 % intervals over the
    attacked models; the strongest whole-pool attack (:func:`yardstick`) as the line to reach."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.4 * len(results), 4.6), squeeze=False)
    every = sorted({r["attack"] for res in results for r in res["rows"]})
    colours = dict(zip(every, plt.cm.tab20(np.arange(len(every)) % 20)))  # one colour per attack in every panel
    for ax, res in zip(axes[0], results):
        rows = res["rows"]
        for name in sorted({r["attack"] for r in rows}):
            pts = sorted((r for r in rows if r["attack"] == name), key=lambda r: r["references"])
            x = [max(r["references"], 0.5) for r in pts]  # 0 references drawn at 0.5 on the log axis
            y = [100 * r["tpr_at_0p1pct_fpr"] for r in pts]
            err = [[100 * (r["tpr_at_0p1pct_fpr"] - r["tpr_lo"]) for r in pts],
                   [100 * (r["tpr_hi"] - r["tpr_at_0p1pct_fpr"]) for r in pts]]
            style = ":" if "views" in name else "--" if "offline" in name else "-"
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=2, label=name, color=colours[name], ls=style)
        yard = yardstick(rows)
        ax.axhline(100 * yard["tpr_at_0p1pct_fpr"], color="black", ls="--", lw=1,
                   label=f"best with the whole pool: {yard['attack']}")
        ax.axhline(80 * yard["tpr_at_0p1pct_fpr"], color="grey", ls=":", lw=1, label="80 % of it")
        ax.set_xscale("log", base=2)
        ax.set_xticks([0.5, 1, 2, 4, 8, 16, 32, 64], ["0", "1", "2", "4", "8", "16", "32", "64"])
        ax.set_xlabel("reference models trained")
        ax.set_ylabel("TPR at 0.1 % FPR (%)")
        flip = ", trained with mirrors" if res.get("augment", "none") == "flip" else ""
        ax.set_title(f"CIFAR-10 {res['arch']}{flip}, parts of {res['part']}, {res['epochs']} epochs, "
                     f"{res['rows'][0]['n_attacked']} models attacked", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_few_refs", description=__doc__.splitlines()[0])
    p.add_argument("phase", choices=("train", "evaluate", "merge", "figure", "table"))
    p.add_argument("results", nargs="*", help="merge, figure, table: the evaluate phase's JSON files")
    p.add_argument("--data-dir")
    p.add_argument("--workspace")
    p.add_argument("--arch", default="mlp", choices=("mlp", "cnn"))
    p.add_argument("--part", type=int, default=5000)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--targets", type=int, default=65, help="how many of the 65 models to attack")
    p.add_argument("--augment", default="none", choices=("none", "flip"),
                   help="train the pool with random mirroring (its models then answer two queries)")
    p.add_argument("--from-end", action="store_true",
                   help="train: the reference models from the last one back (not the target), beside a trainer run "
                        "without it")
    p.add_argument("--pool", type=int, default=POOL, help="reference models in the pool (64: the benchmark's)")
    p.add_argument("--out", default=None)
    p.add_argument("--no-views", dest="views", action="store_false",
                   help="evaluate: leave out the +views attacks (their inference is six times the pool's)")
    p.add_argument("--no-prior", dest="prior", action="store_false",
                   help="evaluate: leave out the +prior attacks (a learned difficulty prior, an embedding "
                        "trained once on the population)")
    p.add_argument("--shard", default=None,
                   help="evaluate: i/n attacks every n-th model from the i-th (n processes side by side; the views "
                        "are cached by the first, so start the others once it prints them); merge joins them")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads (1: unaffected by other processes on the cores)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.phase == "figure":
        figure([json.loads(Path(f).read_text()) for f in args.results], Path(args.out or "few-refs.png"))
        return
    if args.phase == "merge":
        write_result(merge([json.loads(Path(f).read_text()) for f in args.results]),
                     Path(args.out or "few-refs.json"))
        return
    if args.phase == "table":
        for f in args.results:
            print(markdown_table(json.loads(Path(f).read_text())))
        return
    if not (args.data_dir and args.workspace):
        p.error("train and evaluate need --data-dir and --workspace")
    (train if args.phase == "train" else evaluate)(args)


if __name__ == "__main__":
    main()
