"""The audit request's grid rules (privaudit.api.grids), as a table: options given → the
settings every seed trains and the searches, or the one-line error."""

from __future__ import annotations

import pytest

from privaudit.api.grids import RULES, AuditGrids, GridRequest, resolve_grids
from privaudit.errors import ConfigError

DIGITS_K = [0.25, 0.5, 1.0, 2.0]
CIFAR_K = [0.5, 1.0, 2.0, 4.0, 6.0]
SIGMAS = [0.5, 1.0, 2.0]
MIXUP = ("mixup", [0.2, 0.5, 1.0])  # its default grid

CASES = [
    # (request, kappas, sigmas, target epsilons, others, searched, targets)
    (dict(dataset="digits"), DIGITS_K, SIGMAS, [], [], [], []),
    (dict(), CIFAR_K, SIGMAS, [], [], [], []),
    (dict(model="convex-relu", dataset="digits"), [], SIGMAS, [], [], [], []),
    (dict(dataset="digits", kappas="0.5", sigmas="none"), [0.5], [], [], [], [], []),
    (dict(dataset="digits", target_epsilons="1,4"), DIGITS_K, [], [1.0, 4.0], [], [], []),
    (dict(dataset="digits", defences="mixup"), [], [], [], [MIXUP], [], []),
    (dict(dataset="digits", defences="mg,mixup"), DIGITS_K, [], [], [MIXUP], [], []),
    (dict(dataset="digits", defences="dpsgd"), [], SIGMAS, [], [], [], []),
    (dict(dataset="digits", defences="mixup", kappas="1"), [1.0], [], [], [MIXUP], [], []),
    (dict(dataset="digits", defences="mixup", knobs=["mixup=0.3"]), [], [], [], [("mixup", [0.3])], [], []),
    (dict(dataset="digits", target_accuracies="0.85"), [], [], [], [], ["mg", "dpsgd"], [0.85]),
    (dict(dataset="digits", target_accuracies="0.8,0.9", defences="mixup"), [], [], [], [], ["mixup"], [0.8, 0.9]),
    (dict(dataset="digits", target_accuracies="0.8", defences="mixup", knobs=["mixup=0.3"]), [], [], [],
     [("mixup", [0.3])], ["mixup"], [0.8]),
    (dict(dataset="digits", target_accuracies="0.8", kappas="0.5"), [0.5], [], [], [], ["mg", "dpsgd"], [0.8]),
    (dict(model="convex-relu", dataset="digits", target_accuracies="0.8"), [], [], [], [], ["noisycgd"], [0.8]),
    (dict(dataset="digits", match_accuracy=True), DIGITS_K, SIGMAS, [], [], [], []),
]


@pytest.mark.parametrize("request_, kappas, sigmas, eps, others, searched, targets", CASES)
def test_the_grid_rules_as_a_table(request_, kappas, sigmas, eps, others, searched, targets):
    got = resolve_grids(GridRequest(**request_))
    assert got == AuditGrids(kappas=kappas, sigmas=sigmas, target_epsilons=eps, others=others, searched=searched,
                             targets=targets, match_accuracy=request_.get("match_accuracy", False))


@pytest.mark.parametrize("request_, message", [
    (dict(sigmas="1", target_epsilons="2"), "--sigmas or --target-epsilons, not both"),
    (dict(target_accuracies="0.8", match_accuracy=True), "--target-accuracies or --match-accuracy"),
    (dict(sigmas="none", match_accuracy=True), "--match-accuracy matches MG noise to the DP-SGD rows"),
    (dict(model="convex-relu", match_accuracy=True), "convex-relu does not train with"),
    (dict(kappas="-1"), "--kappas"),
    (dict(kappas="101"), "--kappas"),
    (dict(sigmas="0"), "--sigmas"),
    (dict(target_accuracies="1.5"), "--target-accuracies"),
    (dict(knobs=["mixup=0.2"]), "give --defences too"),
    (dict(defences="mixup", knobs=["mg=0.2"]), "--kappas"),
])
def test_a_bad_request_is_one_line_naming_its_option(request_, message):
    with pytest.raises(ConfigError, match=message) as info:
        resolve_grids(GridRequest(**request_))
    assert "\n" not in str(info.value)


def test_every_rule_says_what_it_does():
    """docs/architecture.md lists the rules by their docstrings' first lines."""
    for rule in RULES:
        assert rule.__doc__ and len(rule.__doc__.split(".")[0]) > 20, rule.__name__
