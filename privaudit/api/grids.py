"""Which defence settings an audit trains: the request's grid options resolved, by a pure
function, into the settings of every seed's plan.

:func:`resolve_grids` applies the rules below in order, each a small function of the draft so
far; docs/architecture.md lists them. Nothing here trains, reads a file or imports torch, so
the rules are tested as a table (tests/test_grids.py) and ``--dry-run`` and the run share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from privaudit.api import params
from privaudit.core.defaults import CIFAR10_KAPPAS, DEFAULT_KAPPAS, DEFAULT_SIGMAS
from privaudit.errors import ConfigError


@dataclass(frozen=True)
class GridRequest:
    """The grid options of ``privaudit audit`` as given (None: not given)."""

    model: str = "mlp"
    dataset: str = "cifar10"
    kappas: params.Grid = None
    sigmas: params.Grid = None
    target_epsilons: params.Grid = None
    defences: str | Sequence[str] | None = None
    knobs: Sequence[str] | dict[str, Any] | None = None
    target_accuracies: params.Grid = None
    match_accuracy: bool = False


@dataclass(frozen=True)
class AuditGrids:
    """The settings an audit trains on every seed, besides the undefended baseline:
    MG noise per κ, the DP mechanism per σ or per target ε, every other defence per knob
    value (``others``: (name, values)); and the accuracy searches: ``searched`` defences, each
    searched on the first seed to each of ``targets`` (``--target-accuracies``), or
    ``match_accuracy`` (MG noise's κ searched to each DP row's accuracy)."""

    kappas: list[float] = field(default_factory=list)
    sigmas: list[float] = field(default_factory=list)
    target_epsilons: list[float] = field(default_factory=list)
    others: list[tuple[str, list[float]]] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)
    targets: list[float] = field(default_factory=list)
    match_accuracy: bool = False


@dataclass(frozen=True)
class _Draft:
    """The request as the rules rewrite it: grid options still as given (text, lists or None)."""

    request: GridRequest
    kappas: params.Grid
    sigmas: params.Grid
    chosen: list[str] | None
    others: list[tuple[str, list[float]]]
    explicit: set[str]
    targets: list[float]
    searched: list[str] = field(default_factory=list)


# -- the rules, in the order they apply ----------------------------------------------------

def dp_rows_given_once(d: _Draft) -> _Draft:
    """``--sigmas`` and ``--target-epsilons`` both set the DP rows: one of them."""
    if d.request.sigmas is not None and d.request.target_epsilons is not None:
        raise ConfigError("give --sigmas or --target-epsilons, not both (both set the DP rows)")
    return d


def one_accuracy_rule(d: _Draft) -> _Draft:
    """``--target-accuracies`` and ``--match-accuracy`` both choose settings by accuracy: one."""
    if d.targets and d.request.match_accuracy:
        raise ConfigError("give --target-accuracies or --match-accuracy, not both (both choose settings by accuracy)")
    return d


def search_replaces_default_grids(d: _Draft) -> _Draft:
    """With ``--target-accuracies`` the search chooses the settings: the defences named by
    ``--defences`` (default MG noise and DP) are searched, and only grids given explicitly
    (``--kappas``, ``--sigmas``, ``--target-epsilons``, ``--knobs``) are also trained.
    ``convex-relu`` has no MG noise, and its DP is NoisyCGD."""
    if not d.targets:
        return d
    model = d.request.model
    searched = [n for n in (d.chosen or ["mg", "dpsgd"]) if not (n == "mg" and model == "convex-relu")]
    if model == "convex-relu":
        searched = ["noisycgd" if n == "dpsgd" else n for n in searched]
    return replace(d, searched=searched, kappas="none" if d.kappas is None else d.kappas,
                   sigmas="none" if d.sigmas is None and d.request.target_epsilons is None else d.sigmas,
                   others=[(n, v) for n, v in d.others if n in d.explicit])


def defences_limit_default_rows(d: _Draft) -> _Draft:
    """``--defences`` without ``mg`` drops MG noise's default grid, and without ``dpsgd`` (or
    ``noisycgd``) DP's: a grid given explicitly is still trained."""
    if d.chosen is None:
        return d
    kappas = "none" if d.kappas is None and "mg" not in d.chosen else d.kappas
    no_dp = d.sigmas is None and d.request.target_epsilons is None and not {"dpsgd", "noisycgd"} & set(d.chosen)
    return replace(d, kappas=kappas, sigmas="none" if no_dp else d.sigmas)


def default_kappas(d: _Draft) -> _Draft:
    """MG noise's default κ grid: none for ``convex-relu`` (it trains without MG noise), a
    wider one on CIFAR-10 (reaching the lowest DP-SGD row's accuracy), else
    :data:`privaudit.core.defaults.DEFAULT_KAPPAS`."""
    if d.kappas is not None:
        return d
    if d.request.model == "convex-relu":
        return replace(d, kappas="none")
    return replace(d, kappas=list(CIFAR10_KAPPAS if d.request.dataset == "cifar10" else DEFAULT_KAPPAS))


def match_accuracy_needs_dp_and_mg(grids: AuditGrids, model: str) -> None:
    """``--match-accuracy`` searches MG noise's κ to each DP row's accuracy: it needs DP rows
    and a model that trains with MG noise."""
    if not grids.match_accuracy:
        return
    if not (grids.sigmas or grids.target_epsilons):
        raise ConfigError("--match-accuracy matches MG noise to the DP-SGD rows: give --sigmas or --target-epsilons")
    if model == "convex-relu":
        raise ConfigError("--match-accuracy searches MG noise's kappa, which convex-relu does not train with")


RULES = (dp_rows_given_once, one_accuracy_rule, search_replaces_default_grids, defences_limit_default_rows,
         default_kappas)


def resolve_grids(request: GridRequest) -> AuditGrids:
    """The settings ``request`` asks for (:class:`AuditGrids`), or a one-line
    :class:`~privaudit.errors.ConfigError` naming the option: :data:`RULES` in order, then each
    grid parsed and checked against its range (κ in [0, 100], 0 being the baseline; σ in
    (0, 1e6]; ε in (0, 1e4]; accuracies in (0, 1])."""
    chosen, others, explicit = params.defence_grids(request.defences, request.knobs)
    targets = params.grid(request.target_accuracies, "--target-accuracies", low=0.0, high=1.0, low_open=True)
    draft = _Draft(request=request, kappas=request.kappas, sigmas=request.sigmas, chosen=chosen, others=others,
                   explicit=explicit, targets=targets)
    for rule in RULES:
        draft = rule(draft)
    eps = params.grid(request.target_epsilons, "--target-epsilons", low=0.0, low_open=True, high=1e4)
    sigmas = [] if request.target_epsilons is not None else params.grid(
        list(DEFAULT_SIGMAS) if draft.sigmas is None else draft.sigmas, "--sigmas", **params.span("noise_multiplier"))
    grids = AuditGrids(kappas=params.grid(draft.kappas, "--kappas", **params.span("kappa")), sigmas=sigmas,
                       target_epsilons=eps, others=draft.others, searched=draft.searched, targets=targets,
                       match_accuracy=request.match_accuracy)
    match_accuracy_needs_dp_and_mg(grids, request.model)
    return grids
