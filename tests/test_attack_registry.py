"""The attack registry (:mod:`privaudit.attacks.registry`): one entry per scored attack, and
every list of attacks the package used to spell out by hand read from it, unchanged.

The expected values below are the lists as they stood before the registry (the command line's
choices and help words, the pool scorer's attacks, the report's order, scan's descriptions), so a
registry line that moves an attack in any of them fails here."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

from privaudit.attacks import registry
from privaudit.attacks.registry import ATTACKS, FAMILIES, SOURCES, Attack

#: the report's attack order before the registry (reporting/page_data.ATTACK_ORDER)
REPORT_ORDER = {"shadow": 0, "shadow-pool": 1, "lira-online": 2, "lira-online-global": 3,
                "lira-offline": 4, "lira-offline-global": 5, "lira-shrunk-online": 6, "lira-shrunk-offline": 7,
                "lira-bayes-online": 8, "lira-bayes-offline": 9, "rmia": 10, "quantile": 11, "loss": 12,
                "confidence": 13, "augmentation": 14, "gap": 15}
#: the attacks scored from the references, in the order they are computed (attacks/pool_attacks.POOL_ATTACKS)
REFERENCE_ATTACKS = ("lira-online", "lira-online-global", "lira-offline", "lira-offline-global",
                     "lira-shrunk-online", "lira-shrunk-offline", "lira-bayes-online", "lira-bayes-offline", "rmia",
                     "shadow-pool")
#: scan's descriptions (scanning/run.DESCRIPTIONS)
SCAN_DESCRIPTIONS = {
    "loss": "−cross-entropy of the true label (Yeom et al. 2018)",
    "confidence": "top-1 softmax posterior",
    "entropy": "−entropy of the posteriors (Song & Mittal 2021)",
    "modified-entropy": "−modified entropy, label-aware (Song & Mittal 2021)",
    "classifier": "gradient-boosted trees on the sorted posteriors, cross-validated",
    "shadow": "ML-Leaks shadow-model attack (logistic regression on the top-3 posteriors)",
    "lira-online": "LiRA, IN and OUT references, per-sample variance (Carlini et al. 2022)",
    "lira-online-global": "LiRA online, one variance for all samples",
    "lira-offline": "LiRA, OUT references only, per-sample variance",
    "lira-offline-global": "LiRA offline, one variance for all samples",
    "lira-shrunk-online": "LiRA online, variances shrunk to a prior (few references)",
    "lira-shrunk-offline": "LiRA offline, variances shrunk to a prior (few references)",
    "lira-bayes-online": "LiRA online, means and variances shrunk to a difficulty prior",
    "lira-bayes-offline": "LiRA offline, means and variances shrunk to a difficulty prior",
    "rmia": "RMIA, offline (Zarifzadeh et al. 2024)",
    "shadow-pool": "ML-Leaks attack with every reference model as a shadow",
}


def test_every_entry_is_filed_under_its_own_name_and_the_orders_are_unique():
    assert all(key == a.name for key, a in ATTACKS.items())
    assert all(key == f.name for key, f in FAMILIES.items())
    ranked = [a.order for a in ATTACKS.values() if a.order is not None]
    assert len(ranked) == len(set(ranked))
    # an attack named as an --attacks choice is that choice's (``rmia`` runs rmia)
    assert all(a.family == a.name for a in ATTACKS.values() if a.name in FAMILIES)


def test_a_name_listed_twice_is_refused():
    a = ATTACKS["rmia"]
    with pytest.raises(ValueError, match="rmia"):
        registry.by_name((a, Attack("rmia", "rmia", registry.REFERENCES, "again")))


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_attack_names_a_known_family_and_source(name):
    a = ATTACKS[name]
    assert a.family is None or a.family in FAMILIES
    assert a.source in SOURCES
    assert a.description
    assert a.scorer is None or a.pool or a.source == registry.SHADOW  # the pool's baselines read no reference
    assert not a.per_sample or a.source == registry.REFERENCES
    assert not a.needs_in or a.source == registry.REFERENCES


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_choice_runs_at_least_one_attack_but_the_canary_audit(family):
    runs = registry.names(family=family)
    assert bool(runs) == (family != "one-run"), (family, runs)


def test_the_command_line_choices_are_the_families_then_all():
    assert registry.CHOICES == ("shadow", "loss", "lira", "rmia", "quantile", "one-run", "label-only", "all")
    assert registry.CHOICES == (*FAMILIES, registry.ALL)
    assert registry.choice_help() == {
        "shadow": "the paper's attack",
        "loss": "loss, confidence and data-free baselines",
        "lira": "",
        "rmia": "",
        "quantile": "the quantile-regression attack, with the pool's thresholds",
        "one-run": "canary audit",
        "label-only": "the gap and augmentation attacks, from the predicted label alone",
        "all": "every attack but label-only",
    }


def test_the_lists_read_from_the_registry_are_the_lists_before_it():
    assert registry.REPORT_ORDER == REPORT_ORDER
    assert list(registry.REPORT_ORDER) == sorted(REPORT_ORDER, key=lambda a: list(ATTACKS).index(a))
    assert registry.REFERENCE_ATTACKS == REFERENCE_ATTACKS
    assert set(registry.POOL_ATTACKS) == {*REFERENCE_ATTACKS, "quantile"}  # the report's pool attacks
    assert registry.POOL_BASELINES == ("loss", "confidence")
    assert registry.PER_SAMPLE_ATTACKS == REFERENCE_ATTACKS[:-1]  # every one but the many-shadow attack
    assert registry.SHADOW_ATTACKS == ("shadow", "loss", "confidence", "data-free")
    assert registry.LABEL_ONLY_ATTACKS == ("gap", "augmentation")
    assert {a: registry.description(a) for a in SCAN_DESCRIPTIONS} == SCAN_DESCRIPTIONS
    assert registry.description("no-such-attack") == ""
    # scan leaves these out with offline references (it tested the names before)
    assert [a for a in REFERENCE_ATTACKS if ATTACKS[a].needs_in] == [
        a for a in REFERENCE_ATTACKS if a.startswith("lira-online") or a == "shadow-pool"]


@pytest.mark.parametrize("name", [a.name for a in ATTACKS.values() if a.scorer is not None])
def test_every_scorer_is_a_function_of_the_pool_scorer_that_takes_its_options(name):
    from privaudit.attacks.pool_attacks import scorer_function

    scorer = ATTACKS[name].scorer
    assert scorer is not None
    fn = scorer_function(scorer)
    assert callable(fn) and fn.__name__ == scorer.function and fn.__module__ == "privaudit.attacks.pool_attacks"
    inspect.signature(fn).bind(object(), **dict(scorer.options))  # raises when an option is not its own


def _pool(seed: int = 0, m: int = 6, n: int = 40, c: int = 4):
    rng = np.random.default_rng(seed)
    keep = np.zeros((m, n), bool)
    for j in range(0, m, 2):
        keep[j] = rng.permutation(n) < n // 2
        keep[j + 1] = ~keep[j]
    return (rng.normal(size=(n, 1, c)), rng.normal(size=(n, 1, c)), rng.integers(0, c, n), rng.integers(0, c, n),
            rng.normal(size=(m, n, 1, c)), rng.normal(size=(m, n, 1, c)), keep)


def test_the_pool_scorer_dispatches_every_scored_attack_by_its_registry_line():
    from privaudit.attacks.features import compute_features
    from privaudit.attacks.lira import lira_bayes_scores, lira_scores, lira_shrunk_scores
    from privaudit.attacks.pool_attacks import pool_scores
    from privaudit.attacks.scores import confidence_scores, loss_scores

    target, target_pop, labels, pop_labels, refs, ref_pop, keep = _pool()
    asked = (*registry.REFERENCE_ATTACKS, *registry.POOL_BASELINES, "quantile", "no-such-attack")
    s = pool_scores(target, target_pop, labels, pop_labels, refs, ref_pop, keep, attacks=asked)
    assert tuple(s) == (*registry.REFERENCE_ATTACKS, *registry.POOL_BASELINES)  # a name without a scorer is left out
    assert all(v.shape == (len(labels),) and np.isfinite(v).all() for v in s.values())
    phi, ref_phi = compute_features(target, labels).phi, compute_features(refs, labels).phi
    by_hand = {"lira-online": lira_scores(phi, ref_phi, keep, online=True),
               "lira-offline-global": lira_scores(phi, ref_phi, keep, online=False, global_variance=True),
               "lira-shrunk-offline": lira_shrunk_scores(phi, ref_phi, keep, online=False),
               "lira-bayes-online": lira_bayes_scores(phi, ref_phi, keep, online=True),
               "loss": loss_scores(target[:, 0], labels), "confidence": confidence_scores(target[:, 0])}
    for name, expected in by_hand.items():
        np.testing.assert_array_equal(s[name], expected, err_msg=name)


@pytest.mark.parametrize("choices, pool, shown", [
    (["all"], REFERENCE_ATTACKS + ("quantile",),
     ("shadow", "loss", "confidence", "data-free") + REFERENCE_ATTACKS + ("quantile",)),
    (["lira"], REFERENCE_ATTACKS[:8], REFERENCE_ATTACKS[:8]),
    (["shadow"], (), ("shadow",)),
    (["shadow", "rmia"], ("rmia", "shadow-pool"), ("shadow", "rmia", "shadow-pool")),
    (["quantile", "shadow"], ("shadow-pool", "quantile"), ("shadow", "shadow-pool", "quantile")),
    (["loss", "label-only"], (), ("loss", "confidence", "data-free", "gap", "augmentation")),
    (["one-run"], (), ()),
])
def test_a_plan_runs_the_attacks_of_the_families_asked_for(choices, pool, shown):
    from privaudit.pipeline.attacking import AttackPlan

    plan = AttackPlan.from_choices(choices, 4)
    assert plan.pool_attacks == pool and plan.shown == shown
    assert plan.pool_size == (4 if pool else 0)
    assert plan.shadow == bool(set(choices) & {"all", "shadow", "loss", "label-only"})
    assert plan.label_only == ("label-only" in choices) and plan.one_run == bool(set(choices) & {"all", "one-run"})


def test_a_scorer_that_names_no_scorer_is_refused():
    from privaudit.attacks.pool_attacks import scorer_function

    for function in ("score_nothing", "leave_one_out"):
        with pytest.raises(LookupError, match=function):
            scorer_function(registry.scorer(function))


def test_the_registry_imports_no_numerical_library():
    code = "import sys, privaudit.attacks.registry; print(sorted({'numpy', 'torch', 'pandas'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
