"""``privaudit.theory()``: the papers' theory as experiments, each writing its CSV, figures and
section of ``reports/theory/index.html``; ``privaudit theory EXPERIMENT`` prints what it
returns."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.api import params
from privaudit.api.results import ShortRepr
from privaudit.core.defaults import MAX_SEED, THEORY_LABELS
from privaudit.core.timing import importing
from privaudit.errors import ConfigError

#: each experiment's options (keyword arguments of :func:`theory`) and their defaults, the
#: command line's; every experiment also takes ``seed`` and ``workdir``
OPTIONS: dict[str, dict[str, Any]] = {
    "smoothing": {"kappas": "0.1,0.2,0.5,1", "draws": 200_000},
    "convergence": {"kappas": "0,0.05,0.2,0.4,0.6,1,2", "iterations": 2000, "lr": 0.005, "n": 500, "d": 20, "m": 100,
                    "labels": "teacher"},
    "federated": {"kappas": "0,0.2,0.6,1", "local_steps": "1,5,20", "workers": 5, "rounds": 400, "lr": 0.005,
                  "labels": "teacher"},
    "masked-neurons": {"p": "1,2,4,8", "xi": "0.25,0.5,0.75", "local_steps": "1,2,4,8", "rounds": 200, "n": 100,
                       "d": 128, "m": 4000, "lr": 0.3, "labels": "gaussian"},
    "all": {},
}
EXPERIMENTS = tuple(OPTIONS)
#: the range of each numeric option (:func:`privaudit.api.params.bounded`); rounds: 10 or more
BOUNDS = {"draws": (100, 10_000_000), "iterations": (40, 1_000_000), "lr": (0, 100, True), "n": (1, 100_000),
          "d": (1, 100_000), "m": (1, 100_000), "workers": (1, 500), "rounds": (10, 1_000_000), "seed": (0, MAX_SEED)}
MAX_GRID = 100  # values in one comma-separated grid
MAX_ARRAY = 200_000_000  # elements of one float64 array (1.6 GB): n x m activations, m x d weights


@dataclass(repr=False)
class TheoryResult(ShortRepr):
    """One experiment's outcome (or, for ``all``, every experiment's): its numbers, parameters
    and the files written (:attr:`values`, what ``--json`` prints; ``result["max_gap"]`` reads
    one), the line the command prints, and the page."""

    experiment: str
    values: dict[str, Any]           #: the experiment's summary: numbers, parameters, csv / figures / html paths
    page_path: Path                  #: reports/theory/index.html
    repr_first = ("headline",)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def headline(self) -> str:
        """The experiment's numbers in one line (what ``privaudit theory`` prints)."""
        r = self.values
        if self.experiment == "smoothing":
            return (f"smoothing: largest |closed form − Monte Carlo| = {r['max_gap']:.2e} (SE {r['max_gap_se']:.2e}; "
                    f"at most {r['max_gap_in_se']:.2f} SE over the grid)")
        if self.experiment == "convergence":
            floors = ", ".join(f"κ={row['kappa']:g}: {row['floor']:.3g}{'' if row['plateaued'] else ' (falling)'}"
                               for row in r["per_kappa"])
            return (f"convergence: λ₀ = {r['lambda0']:.4f}; last-window loss {floors}; log-log slope of plateaued "
                    f"floors {r['slope']:.2f}")
        if self.experiment == "federated":
            return "federated: final clean loss " + ", ".join(
                f"τ={row['local_steps']} κ={row['kappa']:g}: {row['final_loss']:.3g}" for row in r["final_loss"])
        if self.experiment == "masked-neurons":
            return (f"masked-neurons: {len(r['bernoulli'])} Bernoulli and {len(r['categorical'])} categorical "
                    f"settings; λ₀ = {r['lambda0']:.3f}")
        return f"all experiments in {sum(r['seconds'].values()):.1f} s"

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit theory EXPERIMENT --json`` prints."""
        return dict(self.values)

    def _repr_html_(self) -> str:
        return (f"<div><h3>privaudit theory {html.escape(self.experiment)}</h3><p>{html.escape(self.headline)}</p>"
                f"<p>Page: <a href=\"{html.escape(self.page_path.resolve().as_uri())}\">"
                f"{html.escape(str(self.page_path))}</a></p></div>")


def _floats(value: params.Grid, option: str, *, low: float = 0.0, allow_low: bool = True,
            high: float = params.RANGES["kappa"][1]) -> list[float]:
    values = params.grid(value, option, low=low, low_open=not allow_low, high=high)
    if not values:
        raise ConfigError(f"{option} needs at least one value")
    if len(values) > MAX_GRID:
        raise ConfigError(f"{option} takes at most {MAX_GRID} values (got {len(values)})")
    return values


def _ints(value: params.Grid, option: str, high: int = 10_000) -> list[int]:
    values = _floats(value, option, low=1.0, high=high)
    if any(v != int(v) for v in values):
        raise ConfigError(f"{option} needs whole numbers between 1 and {high}")
    return [int(v) for v in values]


def _fits(n: int, d: int, m: int) -> None:
    """Refuse a problem whose n x m, m x d or n x d arrays would not fit in memory."""
    for what, size in (("--n x --m", n * m), ("--m x --d", m * d), ("--n x --d", n * d)):
        if size > MAX_ARRAY:
            raise ConfigError(f"{what} = {size:,} is too large (at most {MAX_ARRAY:,} values in one array, "
                              f"{MAX_ARRAY * 8 / 1e9:.1f} GB)")


def _arguments(experiment: str, o: dict[str, Any]) -> dict[str, Any]:
    """The experiment runner's keyword arguments from its checked options."""
    if "labels" in o:
        params.one_of(o["labels"], "--labels", *THEORY_LABELS)
    if experiment == "smoothing":
        return {"kappas": _floats(o["kappas"], "--kappas", allow_low=False), "draws": o["draws"]}
    if experiment == "convergence":
        kappas = _floats(o["kappas"], "--kappas")
        _fits(o["n"], o["d"], o["m"])
        return {"kappas": kappas, **{k: o[k] for k in ("n", "d", "m", "lr", "iterations", "labels")}}
    if experiment == "federated":
        return {"kappas": _floats(o["kappas"], "--kappas"), "local_steps": _ints(o["local_steps"], "--local-steps"),
                **{k: o[k] for k in ("workers", "rounds", "lr", "labels")}}
    if experiment == "masked-neurons":
        ps, steps = _ints(o["p"], "--p", high=1024), _ints(o["local_steps"], "--local-steps")
        xis = _floats(o["xi"], "--xi", allow_low=False, high=1.0)
        _fits(o["n"], o["d"], o["m"])
        categorical = [p for p in ps if p > 1]  # one categorical subnetwork is plain GD
        if not categorical:
            raise ConfigError("--p needs a value >= 2 for the categorical (IST) heatmap")
        return {"bernoulli_ps": ps, "xis": xis, "categorical_ps": categorical, "steps": steps,
                **{k: o[k] for k in ("n", "d", "m", "lr", "rounds", "labels")}}
    return {}


@params.options_named
def theory(experiment: str, *, seed: int = 0, workdir: str | Path = ".",
           progress: Callable[[str, float], None] | None = None, log: Callable[[str], None] | None = None,
           **options: Any) -> TheoryResult:
    """Run the theory experiment ``experiment`` (docs/methods/a-mg-noise.md A.2 and
    docs/methods/c-masked-neurons.md C) and write its CSV, figures and section of
    ``workdir``/reports/theory/index.html (the main report's Papers' figures section is rebuilt
    too; ``log`` receives a line per damaged folder it skips):

    - ``smoothing``: the closed-form expected ReLU under a Gaussian input mask vs Monte Carlo
      and the proxy (Figures 1-2); options ``kappas``, ``draws``;
    - ``convergence``: masked full-batch GD on a two-layer ReLU network (Figure 3a);
      ``kappas``, ``iterations``, ``lr``, ``n``, ``d``, ``m``, ``labels``;
    - ``federated``: FedAvg with Gaussian input masks (Figure 3b); ``kappas``,
      ``local_steps``, ``workers``, ``rounds``, ``lr``, ``labels``;
    - ``masked-neurons``: dropout, multi-sample dropout and IST with Bernoulli or categorical
      neuron masks (docs/methods/c-masked-neurons.md C); ``p``, ``xi``, ``local_steps``,
      ``rounds``, ``n``, ``d``, ``m``, ``lr``, ``labels``;
    - ``all``: every experiment with its defaults; ``progress(name, seconds)`` after each.

    The options are ``privaudit theory EXPERIMENT``'s, with its defaults (:data:`OPTIONS`);
    grids as ``"0,0.5,1"`` or lists. An option another experiment takes raises
    :class:`privaudit.errors.ConfigError` naming this one's."""
    params.one_of(experiment, "experiment", *EXPERIMENTS)
    unknown = sorted(set(options) - set(OPTIONS[experiment]))
    if unknown:
        raise ConfigError(f"theory {experiment} takes no option {unknown[0]!r}; its options are "
                          f"{', '.join([*OPTIONS[experiment], 'seed', 'workdir'])}")
    o = {**OPTIONS[experiment], **options}
    params.bounded(BOUNDS, seed=seed, **{k: v for k, v in o.items() if k in BOUNDS})
    arguments = _arguments(experiment, o)
    workdir = params.path(workdir, "--workdir")
    with importing():
        from privaudit.api.report import rebuild
        from privaudit.pipeline.workspace import Workspace
        from privaudit.theorems import experiments

    if experiment == "all":
        values = experiments.run_all(workdir, seed=seed, progress=progress)
    else:
        values = getattr(experiments, "run_" + experiment.replace("-", "_"))(workdir, seed=seed, **arguments)
    rebuild(Workspace(workdir).ensure_writable(), log)  # the main report's Papers' figures read reports/theory/
    return TheoryResult(experiment=experiment, values=values, page_path=Path(values["html"]))
