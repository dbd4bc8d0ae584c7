"""Reproducing Figure 2 of Liao & Kyrillidis (arXiv 2112.02668, v1): ``privaudit reproduce
masked-neurons`` (docs/methods/c-masked-neurons.md C.4).

Three experiments on 100 rows of UCI Communities and Crime (or any ``.npz`` regression set),
a one-hidden-layer ReLU network of 4,000 neurons, K = 200 rounds:

* ``trajectories`` (Figure 2a): the training error over the first 125 steps for Bernoulli
  masks at ξ ∈ {0.8, 0.5, 0.3}, every local step recorded (:data:`TRAJECTORY_P` subnetworks,
  τ = 10: a period of 11 points, τ local ones and the aggregated network);
* ``bernoulli`` (Figure 2b): the final error over p × ξ, τ = 1;
* ``categorical`` (Figure 2c): the final error over p × τ, ξ = 1/p (IST).

Every run (one grid cell, one seed, one step size) is a cached JSON file under the
workspace's ``models/reproduce/masked-neurons/<data>-n…-m…/``, written atomically, so an
interrupted reproduction resumes where it stopped. Step sizes: η = c/λ_max(H∞) of the
seed's rows, c = :data:`STEP` (the chosen one), and c/2 and 2c on a sub-grid of both heatmaps,
to show how the statements depend on it. The claims, figures and tables:
:mod:`privaudit.reproduction.masked_neurons_claims`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from privaudit.core.defaults import DATA_DIR_ENV
from privaudit.data.communities import RegressionData, load_regression, subset
from privaudit.errors import ArtifactError, ConfigError
from privaudit.files.atomic import read_json, write_json
from privaudit.pipeline.workspace import Workspace
from privaudit.reproduction.masked_neurons_claims import MaskedNeuronsOutcome, outcome
from privaudit.reproduction.outputs import plan_headline
from privaudit.theorems.masked_neurons import PreactivationNet, cell_rng, train_masked
from privaudit.theorems.twolayer import ntk_gram

SCALES = ("full", "reduced")
EXPERIMENTS = ("trajectories", "bernoulli", "categorical")
FOLDER = ("reproduce", "masked-neurons")   # under the workspace's models/
#: η = STEP / λ_max(H∞(X)) for the seed's rows X (about 0.022 on the official file)
STEP = 0.75
STEP_FACTORS = (0.5, 1.0, 2.0)
TRAJECTORY_XIS = (0.8, 0.5, 0.3)
TRAJECTORY_P = 4
TRAJECTORY_STEPS = 125
INIT_SCALE = 1.0
#: rounds of each short run that times this machine (:func:`timed_costs`)
TIMING_ROUNDS = 12
#: torch threads of every run: its matrices (width × n) are too small to share between threads, and
#: two threads slow down many times over while another process holds a core (docs/performance.md)
THREADS = 1


@dataclass(frozen=True)
class MaskedNeuronsProtocol:
    """Every setting of one reproduction of Figure 2."""

    scale: str
    seeds: tuple[int, ...]
    experiments: tuple[str, ...]
    n: int = 100
    width: int = 4000
    rounds: int = 200
    trajectory_tau: int = 10
    trajectory_steps: int = TRAJECTORY_STEPS
    trajectory_xis: tuple[float, ...] = TRAJECTORY_XIS
    trajectory_p: int = TRAJECTORY_P
    bernoulli_ps: tuple[int, ...] = tuple(range(1, 11))
    bernoulli_xis: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(1, 11))
    bernoulli_tau: int = 1
    categorical_ps: tuple[int, ...] = tuple(range(1, 11))
    categorical_taus: tuple[int, ...] = tuple(range(1, 11))
    step: float = STEP
    step_factors: tuple[float, ...] = STEP_FACTORS
    #: the sub-grid the other step sizes run on (a subset of the heatmaps' grid)
    sub_ps: tuple[int, ...] = (1, 4, 7, 10)
    sub_xis: tuple[float, ...] = (0.1, 0.4, 0.7, 1.0)
    sub_taus: tuple[int, ...] = (1, 4, 7, 10)
    init_scale: float = INIT_SCALE
    reduces: tuple[str, ...] = ()

    @property
    def window(self) -> int:
        """The final error is the mean over the last tenth of the rounds."""
        return max(self.rounds // 10, 1)

    @property
    def trajectory_rounds(self) -> int:
        """Rounds enough for the first ``trajectory_steps`` points (τ + 1 per round)."""
        return math.ceil(self.trajectory_steps / (self.trajectory_tau + 1))

    def runs(self) -> list[Run]:
        """Every run of the protocol, in order."""
        out: list[Run] = []
        for seed in self.seeds:
            if "trajectories" in self.experiments:
                out += [Run("trajectories", "bernoulli", self.trajectory_p, self.trajectory_tau, xi, 1.0, seed,
                            self.trajectory_rounds) for xi in self.trajectory_xis]
            for f in self.step_factors:
                full = f == 1.0
                if "bernoulli" in self.experiments:
                    ps = self.bernoulli_ps if full else [p for p in self.sub_ps if p in self.bernoulli_ps]
                    xis = self.bernoulli_xis if full else [x for x in self.sub_xis if x in self.bernoulli_xis]
                    out += [Run("bernoulli", "bernoulli", p, self.bernoulli_tau, xi, f, seed, self.rounds)
                            for xi in xis for p in ps]
                if "categorical" in self.experiments:
                    ps = self.categorical_ps if full else [p for p in self.sub_ps if p in self.categorical_ps]
                    taus = self.categorical_taus if full else [t for t in self.sub_taus if t in self.categorical_taus]
                    out += [Run("categorical", "categorical", p, tau, 1.0 / p, f, seed, self.rounds)
                            for tau in taus for p in ps]
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(window=self.window, trajectory_rounds=self.trajectory_rounds, reduces=list(self.reduces))
        return d


def protocol(scale: str = "reduced", seeds: Sequence[int] | None = None,
             experiments: Sequence[str] | None = None) -> MaskedNeuronsProtocol:
    """The full (the paper's grid: 4,000 neurons, 200 rounds, 10 × 10 heatmaps, 5 seeds) or
    the reduced protocol (:attr:`MaskedNeuronsProtocol.reduces` says what it shrinks)."""
    if scale not in SCALES:
        raise ConfigError(f"scale must be one of {', '.join(SCALES)} (got {scale!r})")
    chosen = tuple(experiments) if experiments else EXPERIMENTS
    unknown = [e for e in chosen if e not in EXPERIMENTS]
    if unknown:
        raise ConfigError(f"unknown masked-neurons experiment {unknown[0]!r}: choose from {', '.join(EXPERIMENTS)}")
    if seeds is not None and (len(seeds) == 0 or any(int(s) < 0 for s in seeds)):
        raise ConfigError("seeds must be one or more whole numbers ≥ 0")
    ordered = tuple(e for e in EXPERIMENTS if e in chosen)
    if scale == "full":
        return MaskedNeuronsProtocol("full", tuple(int(s) for s in seeds) if seeds else (0, 1, 2, 3, 4), ordered)
    grid = (1, 4, 7, 10)
    return MaskedNeuronsProtocol(
        "reduced", tuple(int(s) for s in seeds) if seeds else (0, 1, 2), ordered, width=1000, rounds=100,
        bernoulli_ps=grid, bernoulli_xis=(0.1, 0.4, 0.7, 1.0), categorical_ps=grid, categorical_taus=grid,
        reduces=("1,000 hidden neurons instead of 4,000", "100 rounds instead of 200",
                 "4 × 4 heatmaps (p, ξ, τ ∈ {1, 4, 7, 10} / {0.1, 0.4, 0.7, 1.0}) instead of 10 × 10",
                 "3 seeds instead of 5"))


@dataclass(frozen=True)
class Run:
    """One training run: a grid cell (or a trajectory) at one seed and step-size factor."""

    experiment: str
    kind: str
    p: int
    tau: int
    xi: float
    factor: float
    seed: int
    rounds: int

    @property
    def name(self) -> str:
        return (f"{self.experiment}-p{self.p}-t{self.tau}-xi{self.xi:.6g}-lr{self.factor:g}-s{self.seed}"
                f"-k{self.rounds}.json")

    def row_steps(self, width: int) -> float:
        """Kept rows × local steps over the run (the cost model's unit)."""
        rows = width if self.kind == "categorical" else self.xi * self.p * width
        return rows * self.tau * self.rounds


def resolve_data(data: str | Path | None) -> RegressionData:
    """The data set: ``data``, else ``$PRIVAUDIT_DATA_DIR``; a ConfigError when neither is given."""
    if data is None:
        data = os.environ.get(DATA_DIR_ENV)
    if not data:
        raise ConfigError("the masked-neurons reproduction needs its data: `data_dir` pointing at the folder "
                          "holding the UCI Communities and Crime files (communities.data, communities.names), "
                          "or at an .npz of X and y")
    return load_regression(data)


def cache_dir(workdir: str | Path, proto: MaskedNeuronsProtocol, data: RegressionData) -> Path:
    """Where the runs of ``proto`` on ``data`` are cached: the data's checksum and every
    setting the numbers depend on beyond the run's own name."""
    return Workspace(workdir).models.joinpath(*FOLDER) / (
        f"{data.fingerprint[:16]}-n{proto.n}-m{proto.width}-init{proto.init_scale:g}-step{proto.step:g}")


@dataclass
class SeedProblem:
    """One seed's rows, network and step size."""

    X: np.ndarray
    y: np.ndarray
    rows: np.ndarray
    W0: np.ndarray
    a: np.ndarray
    lam_max: float
    lr: float


def seed_problem(data: RegressionData, proto: MaskedNeuronsProtocol, seed: int) -> SeedProblem:
    """The seed's n rows (unit norm), W₀ ~ N(0, init²), a ~ ±1, and η = step/λ_max(H∞)."""
    X, y, rows = subset(data, proto.n, seed)
    rng = np.random.default_rng([seed, 2112, 2668])
    W0 = proto.init_scale * rng.standard_normal((proto.width, X.shape[1]))
    a = rng.choice([-1.0, 1.0], proto.width)
    lam_max = float(np.linalg.eigvalsh(ntk_gram(X))[-1])
    return SeedProblem(X, y, rows, W0, a, lam_max, proto.step / lam_max)


def train_run(problem: SeedProblem, run: Run, net: PreactivationNet | None = None) -> dict:
    """One run: its errors as mean squared errors ‖y − u‖²/n (per round; per local step too for
    a trajectory) and the final error (mean over the last tenth of the rounds)."""
    import torch

    net = net or PreactivationNet(problem.X, problem.y, problem.W0, problem.a, torch.float32)
    traj = train_masked(net, kind=run.kind, p=run.p, local_steps=run.tau, xi=run.xi, lr=problem.lr * run.factor,
                        rounds=run.rounds, rng=cell_rng(run.seed, run.kind, run.p, run.tau, run.xi),
                        record_local=run.experiment == "trajectories")
    n = len(problem.y)
    errors = traj.errors / n
    out = {"run": asdict(run), "lr": problem.lr * run.factor, "errors": [float(e) for e in errors],
           "final_error": float(errors[-max(run.rounds // 10, 1):].mean())}
    if traj.local is not None:
        out["local"] = [[float(v) for v in row] for row in traj.local / n]
    return out


def _log(log: Callable[[str], None] | None) -> Callable[[str], None]:
    return log or (lambda line: None)


def execute(proto: MaskedNeuronsProtocol, data: RegressionData, workdir: str | Path,
            log: Callable[[str], None] | None = None, trainer: Callable[..., dict] = train_run) -> dict[Run, dict]:
    """Every run of ``proto``: read from the cache, or trained and cached (atomically), on
    :data:`THREADS` torch threads."""
    from privaudit.executor.costs import thread_count

    say = _log(log)
    folder = cache_dir(workdir, proto, data)
    runs = proto.runs()
    results: dict[Run, dict] = {}
    todo = []
    for run in runs:
        path = folder / run.name
        if path.is_file():
            try:
                cached = read_json(path)
            except ArtifactError:
                cached = None  # damaged (or half-written by a crashed older run): train it again
            if isinstance(cached, dict) and cached.get("run") == asdict(run) and "final_error" in cached:
                results[run] = cached
                continue
        todo.append(run)
    if results:
        say(f"masked-neurons: {len(results)} of {len(runs)} runs cached in {folder}")
    if not todo:
        return results
    folder.mkdir(parents=True, exist_ok=True)
    with thread_count(THREADS):
        _train_all(proto, data, todo, folder, results, say, trainer)
    return results


def _train_all(proto: MaskedNeuronsProtocol, data: RegressionData, todo: list[Run], folder: Path,
               results: dict[Run, dict], say: Callable[[str], None], trainer: Callable[..., dict]) -> None:
    """Train ``todo`` in order, caching each run's result as it ends."""
    import torch

    start, last = time.perf_counter(), time.perf_counter()
    problems: dict[int, tuple[SeedProblem, PreactivationNet]] = {}
    for i, run in enumerate(todo, start=1):
        if run.seed not in problems:
            problems.clear()
            pr = seed_problem(data, proto, run.seed)
            problems[run.seed] = (pr, PreactivationNet(pr.X, pr.y, pr.W0, pr.a, torch.float32))
        pr, net = problems[run.seed]
        t0 = time.perf_counter()
        result = trainer(pr, run, net)
        result["seconds"] = time.perf_counter() - t0  # the dry run's estimate learns from it
        write_json(folder / run.name, result)
        results[run] = result
        if time.perf_counter() - last > 30 or i == len(todo):
            last = time.perf_counter()
            say(f"masked-neurons: {i} of {len(todo)} runs trained ({time.perf_counter() - start:.0f} s)")


@dataclass(frozen=True)
class RunCosts:
    """Seconds of a run on this machine, by its kind of mask (``bernoulli`` or
    ``categorical``): ``per_round`` (masks, aggregation, the full network's error) plus
    ``per_row_step`` × kept rows × local steps in each round; ``timing`` is what measuring
    them took."""

    per_round: dict[str, float]
    per_row_step: dict[str, float]
    timing: float = 0.0

    def seconds(self, run: Run, width: int) -> float:
        return run.rounds * self.per_round[run.kind] + run.row_steps(width) * self.per_row_step[run.kind]


def timed_costs(proto: MaskedNeuronsProtocol, rows: int | None = None, features: int = 8) -> RunCosts:
    """:class:`RunCosts` measured on this machine, in this process, on the code every run
    trains with (on :data:`THREADS` threads): for each kind of mask, two short runs
    (:data:`TIMING_ROUNDS` rounds, best of two) on random data of the protocol's width and
    ``rows`` samples (default its n; the data's when it has fewer), at the two ends of the
    grid's kept rows × local steps (Bernoulli: one subnetwork at ξ = 0.1, ten at ξ = 1;
    categorical: one with one local step, ten with ten), and the line through them. The time
    depends on the sizes, not on the data's values. Cached per machine
    (:meth:`~privaudit.executor.costs.CostModel.timed`)."""
    import torch

    from privaudit.executor.costs import CostModel, thread_count

    t0 = time.perf_counter()
    n = min(proto.n, rows or proto.n)
    probes = {"bernoulli": ((1, 1, 0.1), (10, 1, 1.0)), "categorical": ((1, 1, 1.0), (10, 10, 0.1))}

    def measure() -> list[float]:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((n, features))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        net = PreactivationNet(X, rng.standard_normal(n), rng.standard_normal((proto.width, features)),
                               rng.choice([-1.0, 1.0], proto.width), torch.float32)
        line = []
        for kind, ends in probes.items():
            points = []
            for p, tau, xi in ends:
                run = Run("timing", kind, p, tau, xi, 1.0, 0, TIMING_ROUNDS)
                best = math.inf
                for _ in range(2):
                    t = time.perf_counter()
                    train_masked(net, kind=kind, p=p, local_steps=tau, xi=xi, lr=1e-3, rounds=TIMING_ROUNDS,
                                 rng=np.random.default_rng(1))
                    best = min(best, time.perf_counter() - t)
                points.append((run.row_steps(proto.width), best))
            (x0, t0_), (x1, t1) = points
            slope = max(0.0, (t1 - t0_) / (x1 - x0))
            line += [max(0.0, t0_ - slope * x0) / TIMING_ROUNDS, slope]
        return line

    def on_threads() -> list[float]:
        with thread_count(THREADS):
            return measure()

    b_round, b_step, c_round, c_step = CostModel(None, torch.device("cpu")).timed(
        f"masked-neurons|n={n}|m={proto.width}|k={TIMING_ROUNDS}|t={THREADS}", on_threads)
    return RunCosts({"bernoulli": b_round, "categorical": c_round}, {"bernoulli": b_step, "categorical": c_step},
                    time.perf_counter() - t0)


def masked_neurons_plan(scale: str = "reduced", seeds: Sequence[int] | None = None,
                        experiments: Sequence[str] | None = None, *, data: str | Path | None = None,
                        workdir: str | Path | None = None, costs: RunCosts | None = None) -> dict:
    """For ``--dry-run`` and the start of a run: how many runs, how many already cached (with
    ``data`` and ``workdir``) and the estimated time of the rest: :func:`timed_costs` (measured
    here now, unless ``costs`` is given), scaled by measured / modelled time over the runs
    already trained in this workspace (each records its seconds)."""
    proto = protocol(scale, seeds, experiments)
    runs = proto.runs()
    cached: dict[str, dict] = {}
    dataset = resolve_data(data) if data is not None else None
    if dataset is not None and workdir is not None:
        folder = cache_dir(workdir, proto, dataset)
        read: dict[str, dict | None] = {}
        for r in runs:
            try:
                read[r.name] = read_json(folder / r.name) if (folder / r.name).is_file() else None
            except ArtifactError:
                read[r.name] = None
        cached = {k: v for k, v in read.items() if isinstance(v, dict)}
    todo = [r for r in runs if r.name not in cached]
    if not todo:  # nothing left: nothing to time (zero costs model nothing, so no ratio either)
        costs = RunCosts({"bernoulli": 0.0, "categorical": 0.0}, {"bernoulli": 0.0, "categorical": 0.0})
    costs = costs or timed_costs(proto, len(dataset.y) if dataset is not None else None)
    # the runs already trained here (with their time) say how far the timing is from their own
    timed = [(r, cached[r.name]["seconds"]) for r in runs if r.name in cached and cached[r.name].get("seconds")]
    modelled = sum(costs.seconds(r, proto.width) for r, _ in timed)
    ratio = sum(t for _, t in timed) / modelled if timed and modelled > 0 else 1.0
    seconds = ratio * sum(costs.seconds(r, proto.width) for r in todo)
    by_experiment = {e: sum(r.experiment == e for r in runs) for e in proto.experiments}
    return {"paper": "masked-neurons", "scale": proto.scale, "runs": len(runs), "cached": len(cached),
            "to_train": len(todo),
            "by_experiment": by_experiment, "estimated_seconds": round(seconds, 1),
            "calibration_seconds": round(costs.timing, 2),
            "cost_model": ("per round and per kept row and local step of each kind of mask, timed here on short "
                           "runs"
                           + (f", times {ratio:.2g}, the ratio of measured to modelled time of the {len(timed)} "
                              "runs already trained here" if timed else "")),
            "settings": proto.to_dict()}


def masked_neurons_reproduction(scale: str = "reduced", *, data: str | Path | None,
                                seeds: Sequence[int] | None = None, experiments: Sequence[str] | None = None,
                                workdir: str | Path = ".",
                                log: Callable[[str], None] | None = None) -> MaskedNeuronsOutcome:
    """Run (or resume) the reproduction of Figure 2 and check the paper's statements."""
    proto = protocol(scale, seeds, experiments)
    dataset = resolve_data(data)
    start = time.perf_counter()
    if log:
        log(plan_headline("masked-neurons", masked_neurons_plan(scale, seeds, experiments, data=data,
                                                                workdir=workdir)))
    results = execute(proto, dataset, workdir, log)
    lam = {s: seed_problem_lr(dataset, proto, s) for s in proto.seeds}
    out = outcome(proto, dataset, results, lam)
    out.seconds = time.perf_counter() - start
    out.settings["seconds"] = round(out.seconds, 1)
    return out


def seed_problem_lr(data: RegressionData, proto: MaskedNeuronsProtocol, seed: int) -> dict:
    """The seed's λ_max(H∞) and η (without drawing the network)."""
    X, _, _ = subset(data, proto.n, seed)
    lam_max = float(np.linalg.eigvalsh(ntk_gram(X))[-1])
    return {"lambda_max": lam_max, "lr": proto.step / lam_max}
