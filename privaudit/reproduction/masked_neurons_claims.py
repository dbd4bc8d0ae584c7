"""The statements of Figure 2 (Liao & Kyrillidis, arXiv 2112.02668) checked against a reproduction
(docs/methods/c-masked-neurons.md C.4): tables, claims, figures and notes from the runs of
:mod:`privaudit.reproduction.masked_neurons`.

Claims (each a number with a 95 % interval, t over seeds; :mod:`privaudit.reproduction.claims`):

* Figure 2(a): the error is lower at a larger ξ: the mean log₁₀ error over the first 125
  steps, ξ = 0.8 minus ξ = 0.5 and ξ = 0.5 minus ξ = 0.3, paired by seed (< 0); the saw-tooth:
  over the round boundaries in those steps, the mean change of log₁₀ error when the masks
  are redrawn (> 0), over the local steps of a round (< 0) and at aggregation (< 0);
* Figure 2(b): the least-squares slope of the final error on ξ and on p over the whole grid,
  one slope per seed (the grid is balanced, so each equals that axis's coefficient in a
  two-way regression on both), < 0;
* Figure 2(c): the slopes on p and on τ, > 0.

The colour ranges (the grid's smallest and largest seed-mean) are set beside the paper's as a
note, not a claim: the error's scale depends on the unpublished step size and normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from privaudit.reporting.plots import heatmap, line_plot
from privaudit.reporting.summary import t_interval
from privaudit.reproduction.claims import Claim, Estimate, _claim, paired_difference, reading, trend
from privaudit.reproduction.outputs import Figure

SECTIONS = ("Figure 2(a)", "Figure 2(b)", "Figure 2(c)")
PAPER_RANGES = {"bernoulli": (0.017, 0.055), "categorical": (0.007, 0.021)}
MODEL = "two-layer ReLU"
TMLR_NOTE = ("The TMLR version (2022) of the paper regresses ResNet-50 features of CIFAR-10 onto logits; those "
             "features need pretrained weights, which this command does not download: a user who has them can "
             "pass them as an .npz of X and y.")


@dataclass
class MaskedNeuronsOutcome:
    """What :func:`~privaudit.reproduction.masked_neurons.masked_neurons_reproduction` hands the
    page writer."""

    claims: list[Claim]               # not yet family-wise (privaudit.reproduction.claims.familywise)
    figures: list[Figure]
    tables: dict[str, pd.DataFrame]   # CSV name -> frame
    settings: dict                    # the protocol, JSON-able
    section_order: tuple[str, ...]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _tables(results: dict) -> dict[str, pd.DataFrame]:
    traj: list[dict] = []
    bern: list[dict] = []
    cat: list[dict] = []
    for run, r in results.items():
        if run.experiment == "trajectories":
            tau, step = run.tau, 0
            errors, local = r["errors"], r["local"]
            traj.append({"xi": run.xi, "seed": run.seed, "step": 0, "round": 0, "phase": "aggregated",
                         "local_step": -1, "error": errors[0]})
            for k, row in enumerate(local):
                for t, v in enumerate(row):
                    step += 1
                    traj.append({"xi": run.xi, "seed": run.seed, "step": step, "round": k + 1, "phase": "local",
                                 "local_step": t, "error": v})
                step += 1
                traj.append({"xi": run.xi, "seed": run.seed, "step": step, "round": k + 1, "phase": "aggregated",
                             "local_step": tau, "error": errors[k + 1]})
        else:
            row = {"seed": run.seed, "p": run.p, "local_steps": run.tau, "xi": run.xi, "step_factor": run.factor,
                   "lr": r["lr"], "final_error": r["final_error"]}
            (bern if run.experiment == "bernoulli" else cat).append(row)
    t = pd.DataFrame(traj, columns=["xi", "seed", "step", "round", "phase", "local_step", "error"])
    cols = ["seed", "p", "local_steps", "xi", "step_factor", "lr", "final_error"]
    return {"trajectories.csv": t, "bernoulli.csv": pd.DataFrame(bern, columns=cols),
            "categorical.csv": pd.DataFrame(cat, columns=cols)}


def trajectory_claims(traj: pd.DataFrame, steps: int) -> list[Claim]:
    """Figure 2(a): lower error for larger ξ; the saw-tooth's three moves."""
    out: list[Claim] = []
    if traj.empty:
        return out
    t = traj[traj["step"] <= steps].assign(log_error=lambda f: np.log10(f["error"].clip(lower=1e-300)))
    per = t.groupby(["xi", "seed"], as_index=False)["log_error"].mean()
    xis = sorted(per["xi"].unique(), reverse=True)
    for hi, lo in zip(xis, xis[1:]):
        est = paired_difference(per, "xi", hi, lo, "log_error")
        out.append(_claim("Figure 2(a)", MODEL, f"log error, ξ {hi:g} − ξ {lo:g}",
                          "The training error is lower for a larger keep probability ξ.",
                          f"mean log₁₀ training error over the first {steps} steps, ξ = {hi:g} minus ξ = {lo:g}, "
                          "paired by seed", est, reading(est, -1)))
    moves = _sawtooth(t)
    for key, sign, label, statement, measure in (
            ("redraw", +1, "jump at mask redraw", "The error rises when the masks are redrawn (saw-tooth).",
             "mean change of log₁₀ error from the aggregated network to the freshly masked subnetworks"),
            ("local", -1, "change over local steps", "The error falls during the local steps (saw-tooth).",
             "mean change of log₁₀ error from a round's first to its last local step"),
            ("aggregate", -1, "change at aggregation", "The error drops at aggregation (saw-tooth).",
             "mean change of log₁₀ error from the last local step to the aggregated network")):
        mean, lo, hi, n = t_interval(moves[key])
        est = Estimate(mean, lo, hi, n, "per seed (mean over ξ and rounds), t over seeds", n - 1)
        out.append(_claim("Figure 2(a)", MODEL, label, statement, measure + f" in the first {steps} steps", est,
                          reading(est, sign)))
    return out


def _sawtooth(t: pd.DataFrame) -> dict[str, list[float]]:
    """Per seed, the mean (over ξ and rounds) log₁₀ change at redraw, over the local steps and
    at aggregation."""
    out: dict[str, list[float]] = {"redraw": [], "local": [], "aggregate": []}
    for _seed, g in t.groupby("seed"):
        moves: dict[str, list[float]] = {"redraw": [], "local": [], "aggregate": []}
        for _, h in g.groupby("xi"):
            h = h.sort_values("step")
            agg = h[h["phase"] == "aggregated"].set_index("round")["log_error"]
            loc = h[h["phase"] == "local"]
            for k, rnd in loc.groupby("round"):
                rnd = rnd.sort_values("local_step")
                first, last = rnd["log_error"].iloc[0], rnd["log_error"].iloc[-1]
                if k - 1 in agg.index:
                    moves["redraw"].append(first - agg[k - 1])
                if len(rnd) > 1:
                    moves["local"].append(last - first)
                if k in agg.index:
                    moves["aggregate"].append(agg[k] - last)
        for key, v in moves.items():
            if v:
                out[key].append(float(np.mean(v)))
    return out


def grid_claims(bern: pd.DataFrame, cat: pd.DataFrame) -> list[Claim]:
    """Figure 2(b) and (c): the slopes over the grid (the chosen step size)."""
    out: list[Claim] = []
    for frame, fig, axis, sign, statement, name in (
            (bern, "Figure 2(b)", "xi", -1, "With Bernoulli masks the error after training falls as ξ grows.", "ξ"),
            (bern, "Figure 2(b)", "p", -1, "With Bernoulli masks the error after training falls as the number of "
                                           "subnetworks p grows.", "p"),
            (cat, "Figure 2(c)", "p", +1, "With categorical masks the error after training rises with the number "
                                          "of subnetworks p.", "p"),
            (cat, "Figure 2(c)", "local_steps", +1, "With categorical masks the error after training rises with "
                                                    "the number of local steps τ.", "τ")):
        g = frame[np.isclose(frame["step_factor"], 1.0)] if len(frame) else frame
        if g.empty or g[axis].nunique() < 2:
            continue
        est = trend(g, axis, "final_error")
        out.append(_claim(fig, MODEL, f"final error slope on {name}", statement,
                          f"least-squares slope of the final error (mean squared error over the last tenth of the "
                          f"rounds) on {name} over the whole grid", est, reading(est, sign),
                          _monotone(g, axis)))
    return out


def _monotone(frame: pd.DataFrame, axis: str) -> str:
    means = frame.groupby(axis)["final_error"].mean().sort_index()
    ups = int((np.diff(means.to_numpy()) > 0).sum())
    return f"the grid's mean rises at {ups} of {len(means) - 1} steps of {axis.replace('local_steps', 'τ')}"


def step_size_table(bern: pd.DataFrame, cat: pd.DataFrame, sub: dict) -> pd.DataFrame:
    """The (b) and (c) slopes at each step-size factor, on the sub-grid every factor ran."""
    rows = []
    for frame, fig, axis, sign, name, keep in (
            (bern, "Figure 2(b)", "xi", -1, "ξ", ("p", "xi")), (bern, "Figure 2(b)", "p", -1, "p", ("p", "xi")),
            (cat, "Figure 2(c)", "p", +1, "p", ("p", "local_steps")),
            (cat, "Figure 2(c)", "local_steps", +1, "τ", ("p", "local_steps"))):
        if frame.empty:
            continue
        g = frame
        for col in keep:
            allowed = sub["xi" if col == "xi" else "tau" if col == "local_steps" else "p"]
            g = g[np.isclose(g[col].to_numpy(float)[:, None], np.asarray(allowed, float)[None, :]).any(axis=1)]
        for f, h in g.groupby("step_factor"):
            if h[axis].nunique() < 2:
                continue
            est = trend(h, axis, "final_error")
            rows.append({"figure": fig, "statement": f"slope on {name} {'<' if sign < 0 else '>'} 0",
                         "step_factor": f, "lr_mean": float(h["lr"].mean()), "slope": est.value, "lo": est.lo,
                         "hi": est.hi, "n_seeds": est.n, "reading": reading(est, sign),
                         "grid_min": float(h.groupby(["p", axis if axis != "p" else keep[1]])["final_error"]
                                           .mean().min()),
                         "grid_max": float(h.groupby(["p", axis if axis != "p" else keep[1]])["final_error"]
                                           .mean().max())})
    return pd.DataFrame(rows, columns=["figure", "statement", "step_factor", "lr_mean", "slope", "lo", "hi",
                                       "n_seeds", "reading", "grid_min", "grid_max"])


def colour_ranges(bern: pd.DataFrame, cat: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """The heatmaps' colour ranges: the smallest and largest seed-mean final error of each grid."""
    out = {}
    for name, frame, axis in (("bernoulli", bern, "xi"), ("categorical", cat, "local_steps")):
        g = frame[np.isclose(frame["step_factor"], 1.0)] if len(frame) else frame
        if len(g):
            means = g.groupby(["p", axis])["final_error"].mean()
            out[name] = (float(means.min()), float(means.max()))
    return out


def figures(tables: dict[str, pd.DataFrame], proto) -> list[Figure]:
    out = []
    traj = tables["trajectories.csv"]
    if len(traj):
        t = traj[traj["step"] <= proto.trajectory_steps]
        series = []
        for xi, g in sorted(t.groupby("xi"), key=lambda kv: -kv[0]):
            mean = g.groupby("step")["error"].apply(lambda e: float(np.exp(np.log(e).mean())))
            series.append({"label": f"ξ = {xi:g}", "x": mean.index.to_numpy(), "y": mean.to_numpy(),
                           "markers": False})
        out.append(Figure("figure-2a-trajectories",
                          f"Figure 2(a): training error per step, Bernoulli masks, p = {proto.trajectory_p}, "
                          f"τ = {proto.trajectory_tau}",
                          line_plot(series, title=f"Training error over the first {proto.trajectory_steps} steps "
                                                  f"(p = {proto.trajectory_p}, τ = {proto.trajectory_tau})",
                                    xlabel="step (τ local steps, then the aggregated network)",
                                    ylabel="mean squared error (geometric mean over seeds)", log_y=True,
                                    standalone=True), "Figure 2(a)", "geometric means over seeds"))
    for name, fig, axis, ylabel, section in (
            ("bernoulli.csv", "figure-2b-bernoulli", "xi", "keep probability ξ", "Figure 2(b)"),
            ("categorical.csv", "figure-2c-categorical", "local_steps", "local steps τ", "Figure 2(c)")):
        frame = tables[name]
        g = frame[np.isclose(frame["step_factor"], 1.0)] if len(frame) else frame
        if g.empty:
            continue
        grid = g.groupby([axis, "p"])["final_error"].mean().unstack("p").sort_index()
        kind = f"Bernoulli masks (τ = {proto.bernoulli_tau})" if axis == "xi" else "categorical masks (ξ = 1/p)"
        out.append(Figure(fig, f"{section}: final error over p and {ylabel.split()[-1]}, {kind}",
                          heatmap(grid.to_numpy(), x_labels=[str(p) for p in grid.columns],
                                  y_labels=[f"{v:g}" for v in grid.index],
                                  title=f"Final training error, {kind}, mean over seeds", xlabel="subnetworks p",
                                  ylabel=ylabel, value_label="mean squared error, last 10 % of rounds",
                                  standalone=True), section, "each cell the mean over seeds"))
    return out


def outcome(proto, data, results: dict, lam: dict):
    """The :class:`MaskedNeuronsOutcome` of the runs (``proto``: a MaskedNeuronsProtocol)."""
    tables = _tables(results)
    bern, cat = tables["bernoulli.csv"], tables["categorical.csv"]
    claims = trajectory_claims(tables["trajectories.csv"], proto.trajectory_steps) + grid_claims(bern, cat)
    tables["step-sizes.csv"] = step_size_table(bern, cat, {"p": proto.sub_ps, "xi": proto.sub_xis,
                                                           "tau": proto.sub_taus})
    ranges = colour_ranges(bern, cat)
    lrs = [v["lr"] for v in lam.values()]
    notes = [f"Data: {data.source} ({data.path}), {proto.n} rows drawn per seed from {data.X.shape[0]}, "
             f"{data.X.shape[1]} features"
             + (f" (the {len(data.dropped_missing)} predictive attributes with missing values dropped)"
                if data.dropped_missing else "") + "; every input row scaled to unit norm, as the theory assumes.",
             f"Step size (not published): η = {proto.step:g}/λ_max(H∞) of each seed's rows, "
             f"{min(lrs):.4g}–{max(lrs):.4g}; ½× and 2× on a sub-grid are in step-sizes.csv. W₀ ~ N(0, "
             f"{proto.init_scale:g}²), a ~ ±1 fixed; Figure 2(a) with p = {proto.trajectory_p} and τ = "
             f"{proto.trajectory_tau}, Figure 2(b) with τ = {proto.bernoulli_tau} (all not published)."]
    for name, (lo, hi) in ranges.items():
        plo, phi = PAPER_RANGES[name]
        notes.append(f"Colour range of the {name} heatmap: {lo:.3g}–{hi:.3g} here, {plo:g}–{phi:g} in the paper "
                     "(the error's scale depends on the unpublished step size and normalisation; read it as a "
                     "comparison of orders of magnitude only).")
    notes.append(TMLR_NOTE)
    settings = {**proto.to_dict(), "data": {"source": data.source, "path": data.path,
                                            "sha256": data.fingerprint, "rows": int(data.X.shape[0]),
                                            "features": int(data.X.shape[1]),
                                            "dropped_missing": list(data.dropped_missing)},
                "step_sizes": {str(s): v for s, v in lam.items()}, "colour_ranges": ranges,
                "paper_colour_ranges": PAPER_RANGES, "runs": len(results), "models_needed": len(proto.runs())}
    return MaskedNeuronsOutcome(claims, figures(tables, proto), tables, settings, SECTIONS, notes)
