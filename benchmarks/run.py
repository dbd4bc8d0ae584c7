"""Run the benchmark suite: ``python -m benchmarks [--data-dir DIR] [--device cpu|cuda] [--quick]``.

Writes ``results.json`` (every figure, the machine, the targets and whether each is met)
and ``results.md`` (the summary table) into ``--out`` (default ``benchmarks/results``),
and prints the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import tempfile
from pathlib import Path

from benchmarks import (
    bench_audit,
    bench_commands,
    bench_convex,
    bench_digits,
    bench_dpsgd,
    bench_estimate,
    bench_executor,
    bench_inference,
    bench_pool,
    bench_precision,
    bench_protocol,
    bench_scoring,
    bench_speed,
    bench_startup,
    bench_training,
)
from benchmarks.common import cifar_data, cifar_folder, machine, matmul_peak
from benchmarks.flops import annotate, columns
from privaudit.files.atomic import write_json, write_text

BENCHMARKS = ("startup", "commands", "digits", "training", "inference", "dpsgd", "convex", "pool", "audit", "scoring",
              "precision", "executor", "speed", "protocol", "estimate")


def targets(rows: list[dict]) -> list[dict]:
    """The issue's targets for a 2-core CPU, each with the measured figure."""
    out = []

    def add(name: str, value: float | None, goal: str, met: bool | None) -> None:
        out.append({"target": name, "measured": value, "goal": goal, "met": met})

    for r in rows:
        b = r["benchmark"]
        if b == "training" and r["model"] == "mlp":
            add("mlp training vs DataLoader loop", r["speedup"], "≥ 2.5×", r["speedup"] >= 2.5)
            add("mlp training, fraction of fp32 matmul peak", r["privaudit_fraction_of_peak"], "≥ 60 %",
                r["privaudit_fraction_of_peak"] >= 0.6)
        if b == "training" and r["model"] in ("cnn", "cnn-improved"):
            goal = 1.6 if r["model"] == "cnn" else 1.3
            add(f"{r['model']} training vs DataLoader loop", r["speedup"], f"≥ {goal}×", r["speedup"] >= goal)
        if b == "training" and r["model"] == "cnn":
            add("cnn training, fraction of fp32 matmul peak", r["privaudit_fraction_of_peak"], "≥ 40 %",
                r["privaudit_fraction_of_peak"] >= 0.4)
        if b == "dpsgd" and r["model"] in ("cnn", "cnn-improved"):
            m = r["model"]
            add(f"{m} DP-SGD vs non-private", r["dp_vs_non_private"], "≥ 0.5×", r["dp_vs_non_private"] >= 0.5)
            add(f"{m} DP-SGD vs Opacus ghost clipping", r["speedup_vs_opacus_ghost"], "≥ 2×",
                r["speedup_vs_opacus_ghost"] >= 2)
        if b == "dpsgd" and r["model"] == "mlp":
            add("mlp DP-SGD vs non-private", r["dp_vs_non_private"], "≥ 0.4×", r["dp_vs_non_private"] >= 0.4)
            add("mlp DP-SGD vs Opacus defaults", r["speedup_vs_opacus_default"], "≥ 20×",
                r["speedup_vs_opacus_default"] >= 20)
        if b == "pool" and r["models"] == 16 and r["stacked"]:
            add(f"pool of 16 ({r['recipe']}) vs one by one", r["speedup"], "≥ 1.5×", r["speedup"] >= 1.5)
        if b == "speed" and r["vs_in_process"] is not None and not r["side"].startswith("in process"):
            kind = "DP-SGD" if r["dp"] else "non-private"
            add(f"{r['model']} {kind} epoch in {r['side']} vs in process", r["vs_in_process"], "≥ 0.9×",
                r["vs_in_process"] >= 0.9)
        if b == "protocol" and r["scale"] == "reduced" and len(r["seeds"]) == 5 and r["dataset"] == "cifar10":
            hours = r["projected_total_s"] / 3600
            add("reproduce --scale reduced, 5 seeds (projected hours)", hours, "≤ 1 h to be the default", hours <= 1)
        if b == "estimate":
            add(f"estimate of {r['case']} (actual / estimated)", r["actual_over_estimated"], "within 1.5× either way",
                r["within_goal"])
        if b == "startup" and r["case"].startswith(("privaudit", "usage", "bad value")):
            add(f"{r['case']} (best wall)", r["best_seconds"], "< 1 s", r["best_seconds"] < 1.0)
        if b == "inference":
            add(f"{r['model']} inference vs its training step", r["inference_vs_training"], "≥ 3×",
                r["inference_vs_training"] >= 3)
        if b == "commands" and r["side"] == "privaudit":
            loop = next(x for x in rows if x["benchmark"] == "commands" and x["model"] == r["model"]
                        and x["side"] == "plain loop")
            add(f"{r['model']} train fixed cost vs plain script + 2 s", r["fixed_seconds"] - loop["fixed_seconds"],
                "≤ 2 s", r["fixed_seconds"] - loop["fixed_seconds"] <= 2.0)
        if b == "commands" and r["side"] == "privaudit DP-SGD":
            plain = next(x for x in rows if x["benchmark"] == "commands" and x["model"] == r["model"]
                         and x["side"] == "privaudit")
            ratio = plain["per_epoch_seconds"] / r["per_epoch_seconds"] if r["per_epoch_seconds"] > 0 else None
            if r["model"] == "mlp" and ratio is not None:
                add("mlp train --dp per epoch vs non-private", ratio, "≥ 0.5×", ratio >= 0.5)
        if b == "digits" and r["side"] == "current" and not r["quick"] and not r.get("options"):
            add("digits audit wall (best)", r["wall_seconds"], "≤ 20 s", r["wall_seconds"] <= 20)
        if b == "scoring":
            add(f"scoring {r['samples']:,} × {r['models']} (all attacks)", r["privaudit_seconds_all_attacks"],
                "< 5 s", r["privaudit_seconds_all_attacks"] < 5)
    return out


def _f(v, digits=2) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    """The lines of a markdown table and a blank line after it; none when ``body`` is empty."""
    if not body:
        return []
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in body), ""]


def table(result: dict) -> str:
    """Markdown tables of the headline figures."""
    rows = result["rows"]
    lines = _machine(result)
    lines += _training_tables(rows)
    lines += _kernel_tables(rows)
    for r in rows:
        lines += _sentence(r)
    lines += _startup_and_precision_tables(rows)
    lines += _targets_table(result["targets"])
    return "\n".join(lines).rstrip("\n") + "\n"


def _of(rows: list[dict], kind: str) -> list[dict]:
    """The rows of one benchmark, in their order."""
    return [r for r in rows if r["benchmark"] == kind]


def _machine(result: dict) -> list[str]:
    """The line naming the machine, its fp32 matmul peak and the data, and a blank line."""
    return [f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, torch "
            f"{result['machine']['torch']}, device {result['device']}. fp32 matmul peak "
            f"{result['peak']['peak']:.0f} GFLOP/s ({result['peak']['peak_library']}; "
            + ", ".join(f"{k} {v:.0f}" for k, v in result["peak"].items()
                        if isinstance(v, float) and k != "peak") + "). Data: " + result["data"] + ".", ""]


def _training_tables(rows: list[dict]) -> list[str]:
    """The tables of training speed: in process against a DataLoader loop, by command, one
    model's steady epoch, and the projected time of the mg-noise reproduction."""
    lines = _md_table(
        ["training (batch 128)", "privaudit samples/s", "DataLoader loop samples/s", "speedup", "privaudit GFLOP/s",
         "% of peak (peak GFLOP/s)", "loop % of peak", "GFLOP/epoch", "privaudit peak RSS MB"],
        [[r["model"], _f(r["privaudit_samples_per_s"], 0), _f(r["dataloader_loop_samples_per_s"], 0),
          f"{_f(r['speedup'])}×", _f(r["privaudit_gflops"], 0),
          f"{100 * r['privaudit_fraction_of_peak']:.0f} % ({_f(r['peak_gflops'], 0)})",
          f"{100 * r['loop_fraction_of_peak']:.0f} %", columns(r, ())[0], _f(r["privaudit_memory"]["peak_rss_mb"], 0)]
         for r in _of(rows, "training")])
    lines += _md_table(
        ["command (fresh process, wall)", "side", "per epoch s", "fixed s", "wall s (fewer / more epochs)",
         "GFLOP/epoch", "% of peak (per epoch)"],
        [[r["model"], r["side"], _f(r["per_epoch_seconds"]), _f(r["fixed_seconds"]),
          " / ".join(_f(w, 1) for w in r["wall_seconds"]), *columns(r, ("side",))] for r in _of(rows, "commands")])
    lines += _md_table(
        ["one speed (a model's steady epoch)", "side", "samples/s", "s an epoch", "vs in process", "GFLOP/epoch",
         "GFLOP/s", "% of peak (peak GFLOP/s)", "once a process: import / set-up / first epoch extra s", "wall s"],
        [[f"{r['model']}{' DP-SGD' if r['dp'] else ''} (parts of {r['part_size']:,}, {r['epochs']} epochs, "
          f"batch {r['batch']})", r["side"], _f(r["samples_per_s"], 0), _f(r["epoch_seconds"]),
          "" if r["vs_in_process"] is None else f"{_f(r['vs_in_process'])}×", _f(r["flops_per_epoch"] / 1e9, 1),
          _f(r["gflops"], 0), f"{100 * r['fraction_of_peak']:.0f} % ({_f(r['peak_gflops'], 0)})",
          "" if r.get("wall_s") is None else " / ".join(_f(r.get(k)) for k in ("import_s", "set_up_s",
                                                                                "first_epoch_extra_s")),
          _f(r.get("wall_s"), 1)]
         for r in _of(rows, "speed")])
    lines += _md_table(
        ["reproduce mg-noise (projected)", "models (attacked)", "train h", "evaluation h", "total h",
         "families: samples/s × training samples"],
        [[f"--scale {r['scale']} --seeds {','.join(map(str, r['seeds']))} "
          f"({r['dataset']}, parts of {r['part_size']:,})",
          f"{r['models']} ({r['attacked_targets']})", _f(r["projected_train_s"] / 3600),
          _f(r["projected_evaluation_s"] / 3600), _f(r["projected_total_s"] / 3600),
          "; ".join(f"{f['model']}{' DP' if f['dp'] else ''}{' MG' if f['mg_noise'] else ''} b{f['batch']}: "
                    f"{f['samples_per_s']:,.0f} × {f['train_samples'] / 1e6:.2f} M" for f in r["families"])]
         for r in _of(rows, "protocol")])
    return lines


def _kernel_tables(rows: list[dict]) -> list[str]:
    """The tables of the heavy kernels against their plain counterparts: inference, DP-SGD,
    the convex approximation's epoch and the stacked reference pool."""
    lines = _md_table(
        ["inference", "privaudit samples/s", "plain no_grad NCHW 2,048 samples/s", "speedup", "training samples/s",
         "inference / training", "max logit difference", "forward GFLOP/epoch", "% of peak (privaudit / plain)"],
        [[r["model"], _f(r["privaudit_samples_per_s"], 0), _f(r["plain_samples_per_s"], 0),
          f"{_f(r['speedup_vs_plain'])}×", _f(r["train_samples_per_s"], 0), f"{_f(r['inference_vs_training'])}×",
          f"{r['max_logit_difference']:.1e}", *columns(r, ("privaudit", "plain"))] for r in _of(rows, "inference")])
    lines += _md_table(
        ["DP-SGD (σ 1, batch 128)", "privaudit samples/s", "non-private", "Opacus defaults", "Opacus ghost",
         "DP / non-private", "vs Opacus defaults", "vs Opacus ghost", "GFLOP/epoch",
         "% of peak (privaudit DP / non-private / Opacus defaults / ghost)"],
        [[r["model"], _f(r["privaudit_dp_samples_per_s"], 0), _f(r["non_private_samples_per_s"], 0),
          _f(r["opacus_default_samples_per_s"], 0), _f(r["opacus_ghost_samples_per_s"], 0),
          f"{_f(r['dp_vs_non_private'])}×", f"{_f(r['speedup_vs_opacus_default'], 1)}×",
          f"{_f(r['speedup_vs_opacus_ghost'], 2)}×",
          *columns(r, ("privaudit_dp", "non_private", "opacus_default", "opacus_ghost"))] for r in _of(rows, "dpsgd")])
    lines += _md_table(
        ["convex approximation, one epoch (batch 1,000)", "P", "images", "s", "samples/s", "GFLOP/s",
         "% of peak"],
        [[r["algorithm"], str(r["gates"]), f"{r['images']:,}", _f(r["epoch_seconds"]), _f(r["samples_per_s"], 0),
          _f(r["gflops"], 0), f"{100 * r['fraction_of_peak']:.0f} %"] for r in _of(rows, "convex")])
    lines += _md_table(
        ["pool", "K", "privaudit s", "one by one s", "speedup", "stacked", "max weight diff",
         "peak RSS MB (privaudit / one by one)", "GFLOP/epoch (K models)", "% of peak (privaudit / one by one)"],
        [[r["recipe"], str(r["models"]), _f(r["privaudit_seconds"]), _f(r["one_by_one_seconds"]),
          f"{_f(r['speedup'])}×" + (f" (forced stacking: {_f(r['stacked_forced_speedup'])}×)"
                                   if "stacked_forced_speedup" in r else ""),
          "yes" if r["stacked"] else "no", f"{r['max_weight_difference']:.1e}",
          f"{_f(r['privaudit_memory']['peak_rss_mb'], 0)} / {_f(r['one_by_one_memory']['peak_rss_mb'], 0)}",
          *columns(r, ("privaudit", "one_by_one"))] for r in _of(rows, "pool")])
    return lines


def _sentence(r: dict) -> list[str]:
    """A sentence and a blank line for a scoring, executor, digits or end-to-end audit row;
    none for the others (they have tables)."""
    if r["benchmark"] == "scoring":
        return [f"Scoring {r['samples']:,} samples × {r['models']} models ({r['logits_mb']:.0f} MB of logits), "
                f"all {len(r['attacks'])} attacks: {r['privaudit_seconds_all_attacks']:.2f} s "
                f"(statistics {r['statistics_seconds']:.2f} s; a per-sample LiRA loop: "
                f"~{r['naive_lira_online_seconds_estimated']:.0f} s, {r['speedup_vs_naive_lira']:.0f}× slower); "
                f"peak RSS {r['privaudit_memory']['peak_rss_mb']:.0f} MB.", ""]
    if r["benchmark"] == "executor":
        return [f"Executors (CIFAR-10 {r['data']}, parts of {r['part_size']:,}, {r['epochs']} epochs, "
                f"κ 0.5, σ 1, shadow + LiRA with a pool of {r['pool_size']}, {r['jobs']} jobs): "
                f"local {r['local_seconds']:.1f} s, "
                f"Ray {r['ray_seconds']:.1f} s (start-up {r['ray_start_seconds']:.1f} s; "
                f"{r['overhead_per_job_seconds']:.2f} s per job), Ray with 1 CPU per job "
                f"{r['ray_1cpu_per_job_seconds']:.1f} s; identical tables: "
                f"{'yes' if r['identical_tables'] else 'NO'}.", ""]
    if r["benchmark"] == "digits":
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in r["phase_seconds"].items())
        diff = r.get("differences_from_baseline")
        same = ("" if diff is None else "; table against the baseline's, largest |difference|: "
                + ", ".join(f"{k} {v:.2g}" for k, v in diff.items()))
        options = f" {r['options']}" if r.get("options") else ""
        return [f"`privaudit audit --dataset digits{options}` ({r['side']}, {r['revision']}, "
                f"best of {r['rounds']}): {r['wall_seconds']:.1f} s wall — {phases}{same}.", ""]
    if r["benchmark"] == "audit":
        shares = ", ".join(f"{k} {100 * v:.0f} %" for k, v in r["phase_shares"].items())
        return [f"Audit end to end (CIFAR-10 {r['data']}, parts of {r['part_size']:,}, {r['epochs']} epochs, "
                f"κ 0.5, σ 1, pool {r['pool_size']}, all attacks, {r['models_trained']} models): "
                f"{r['wall_seconds']:.1f} s — {shares}.", ""]
    return []


def _startup_and_precision_tables(rows: list[dict]) -> list[str]:
    """The tables of a fresh process's start-up and of bf16 mixed precision against fp32."""
    lines = _md_table(
        ["start-up (fresh process, wall)", "best s", "median s", "best − bare python s"],
        [[r["case"], f"{r['best_seconds']:.3f}", f"{r['median_seconds']:.3f}",
          f"{r['best_minus_bare_python_seconds']:.3f}"] for r in _of(rows, "startup")])
    lines += _md_table(
        ["mixed precision", "fp32 samples/s", "bf16 samples/s", "bf16 speedup", "fp32 test acc.", "bf16 test acc.",
         "GFLOP/epoch", "% of fp32 peak (fp32 / bf16)"],
        [[f"{r['model']} ({r['epochs']} epochs)", _f(r["fp32_samples_per_s"], 0), _f(r["bf16_samples_per_s"], 0),
          f"{_f(r['bf16_speedup'])}×", f"{r['fp32_test_accuracy']:.3f}", f"{r['bf16_test_accuracy']:.3f}",
          *columns(r, ("fp32", "bf16"))] for r in _of(rows, "precision")])
    return lines


def _targets_table(targets: list[dict]) -> list[str]:
    """The table of the targets: each measured figure, its goal and whether it is met."""

    def shown(x: dict) -> str:
        v = x["measured"]
        return (f"{100 * v:.0f} %" if "fraction" in x["target"] else
                f"{v:.2f} s" if "scoring" in x["target"] or "wall" in x["target"] or "fixed cost" in x["target"]
                else f"{v:.2f} h" if "hours" in x["target"] else f"{v:.2f}×")

    return _md_table(["target", "measured", "goal", "met"],
                     [[x["target"], shown(x), x["goal"], "yes" if x["met"] else "no"] for x in targets])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", help="folder holding cifar-10-batches-py (else generated CIFAR-shaped data)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks that the suite runs (seconds)")
    p.add_argument("--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    p.add_argument("--baseline", help="git revision to run the digits audit of beside the working tree's "
                                       "(e.g. the commit before a speed-up)")
    p.add_argument("--digits-args", default="", help="more options of the digits audit on both sides, e.g. "
                                                      "'--defenses all --epochs 30'")
    p.add_argument("--load", type=int, default=0, help="busy sibling processes (one core each) through the "
                   "estimate benchmark's plans and runs, e.g. 1: the estimate on a busy machine")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the digits audit (each side's best is kept)")
    p.add_argument("--out", default="benchmarks/results", help="folder for results.json and results.md")
    args = p.parse_args(argv)
    chosen = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}")
    from privaudit.training import resolve_device
    device = resolve_device(args.device)
    data, source = cifar_data(args.data_dir)
    peak = matmul_peak(device)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="privaudit-bench-") as tmp:
        root = Path(args.data_dir) if args.data_dir else cifar_folder(data, Path(tmp))
        for name in chosen:
            print(f"[benchmarks] {name} …", file=sys.stderr, flush=True)
            if name == "startup":
                rows += bench_startup.run(args.quick)
            elif name == "training":
                rows += bench_training.run(data, source, root, device, peak["peak"], args.quick)
            elif name == "commands":
                rows += bench_commands.run(root, source, args.quick)
            elif name == "digits":
                rows += bench_digits.run(args.baseline, args.quick, args.rounds, tuple(shlex.split(args.digits_args)))
            elif name == "inference":
                rows += bench_inference.run(data, source, device, args.quick)
            elif name == "dpsgd":
                rows += bench_dpsgd.run(data, source, device, args.quick)
            elif name == "convex":
                rows += bench_convex.run(device, peak["peak"], args.quick)
            elif name == "pool":
                rows += bench_pool.run(data, source, device, args.quick)
            elif name == "audit":
                rows += bench_audit.run(root, source, device.type, args.quick)
            elif name == "scoring":
                rows += bench_scoring.run(args.quick)
            elif name == "precision":
                rows += bench_precision.run(data, source, device, args.quick)
            elif name == "executor":
                rows += bench_executor.run(root, source, device.type, args.quick)
            elif name == "speed":
                rows += bench_speed.run(root, source, device, data, args.quick)
            elif name == "protocol":
                rows += bench_protocol.run(source, device, data, args.quick)
            elif name == "estimate":
                rows += bench_estimate.run(root, args.quick, args.load)
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "device": str(device), "data": source, "quick": args.quick, "peak": peak, "rows": rows}
    annotate(rows, peak["peak"])
    result["targets"] = targets(rows) if device.type == "cpu" else []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result)
    md = table(result)
    write_text(out / "results.md", md)
    print(md)


if __name__ == "__main__":
    main()
