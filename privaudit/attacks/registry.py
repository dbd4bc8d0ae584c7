"""The attacks privaudit scores, in one table (:data:`ATTACKS`), as :mod:`privaudit.defences` is
for the defences; and the ``--attacks`` choices that run them (:data:`FAMILIES`).

Each attack is an :class:`Attack`: its ``name`` (the ``attack`` of every result table and the
``score_<name>`` of ``scores.npz``: what the report and scan show), the ``--attacks`` choice
that runs it (its ``family``), what its scores and thresholds come from (its ``source``), its
place in the report's tables (``order``), the line scan shows beside it (``description``) and,
for an attack :func:`~privaudit.attacks.pool_attacks.scores_from_features` computes against a
reference pool, its :class:`Scorer`. Every list of attacks reads this table: the command
line's choices and their help, :meth:`privaudit.pipeline.attacking.AttackPlan.from_choices`
(what a choice runs, and whether it trains a pool), the pool scorer's dispatch, the
jackknife's attacks, the report's order and its pool attacks, scan's reference attacks and
descriptions. The table is listed in the order the attacks are computed and saved: a plan's
attacks, ``metrics.json`` and scan's rows follow it.

Adding an attack:

1. its scorer, for an attack scored against a pool: a function ``score_…(inputs, **options)``
   of :mod:`privaudit.attacks.pool_attacks` that returns one score per audited sample (higher
   = more likely a member) from :class:`~privaudit.attacks.pool_attacks.PoolInputs`;
   an attack of another source is computed by its family's step
   (:data:`privaudit.pipeline.attacking.FAMILIES`);
2. one line in :data:`ATTACKS` (its family, source, report order, scorer, description); a new
   ``--attacks`` choice is one line in :data:`FAMILIES`;
3. docs: the attack in docs/methods/ (its part's page) and in the report's "how to read" part
   (``reporting/templates/how_to_read.html.j2``).

The command line, the plan, the report and scan then know it; ``tests/test_attack_registry.py``
checks the table.

This module imports nothing (the command line reads its choices before any NumPy import): a
:class:`Scorer` names its function, which the pool scorer looks up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

# What an attack's scores and thresholds come from (:attr:`Attack.source`).
#: a shadow model trained like the target: the ML-Leaks attack, or thresholds of a score
SHADOW = "shadow"
#: the predicted label alone (queries of the label), thresholds from the shadow model
LABELS = "labels"
#: a shadow model of the target's recipe trained on another dataset (``--shadow-dataset``)
TRANSFER = "transfer"
#: the reference pool's models: scores read the references, thresholds by leave-one-out
REFERENCES = "references"
#: the reference pool's population: fitted on samples no model trained on, thresholds on a pool model
POPULATION = "population"
#: the audited model's outputs alone, thresholds by cross-validation (``privaudit scan`` only)
OUTPUTS = "outputs"
SOURCES = (SHADOW, LABELS, TRANSFER, REFERENCES, POPULATION, OUTPUTS)
#: the ``--attacks`` choice that runs every family whose :attr:`Family.in_all` is set
ALL = "all"


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=_Named)


def by_name(items: Iterable[_T]) -> dict[str, _T]:
    """``items`` by their ``name``, in their order; a name listed twice is a :class:`ValueError`."""
    out: dict[str, _T] = {}
    for item in items:
        if item.name in out:
            raise ValueError(f"{item.name!r} is listed twice")
        out[item.name] = item
    return out


@dataclass(frozen=True)
class Scorer:
    """A pool attack's scores against one target: the function named ``function`` of
    :mod:`privaudit.attacks.pool_attacks`, which
    :func:`~privaudit.attacks.pool_attacks.scores_from_features` calls with the pool's
    :class:`~privaudit.attacks.pool_attacks.PoolInputs` and ``options`` as keywords. Named, not
    imported: this table imports no NumPy, and the pool scorer looks the name up
    (:func:`~privaudit.attacks.pool_attacks.scorer_function`)."""

    function: str
    options: tuple[tuple[str, bool], ...] = ()


def scorer(function: str, **options: bool) -> Scorer:
    """``scorer("score_lira", online=True)``: a :class:`Scorer` with its options."""
    return Scorer(function, tuple(options.items()))


@dataclass(frozen=True)
class Attack:
    """One scored attack: its ``name``; ``family``, the ``--attacks`` choice that runs it (None:
    no choice does: scan's own attacks, and the transfer attack, which ``--shadow-dataset``
    adds); ``source`` (:data:`SOURCES`); ``description``, scan's line beside it; ``order``, its
    place in the report's tables (None: none of its own; :mod:`privaudit.reporting.page_data`
    ranks it by name among the attacks of a fixed rank); ``scorer``, how
    :func:`~privaudit.attacks.pool_attacks.scores_from_features` computes it (None: its
    family's step computes it); ``per_sample``: its scores read
    per-sample statistics of the references (LiRA's IN/OUT Gaussians, RMIA's reference
    likelihoods), so the pair jackknife recomputes them without each pair
    (:func:`~privaudit.attacks.pool_attacks.pair_jackknife`; the other pool attacks' scores, the
    baselines' and the many-shadow attack's 3-input regression fitted on every reference's rows,
    change too little without one pair for their plain pair means to understate the spread:
    benchmarks/bench_pool_replicates.py measures both); ``needs_in``: scan leaves it out when
    no reference trained on an audited sample (offline references)."""

    name: str
    family: str | None
    source: str
    description: str
    order: int | None = None
    scorer: Scorer | None = None
    per_sample: bool = False
    needs_in: bool = False

    @property
    def pool(self) -> bool:
        """Whether it runs on a reference pool (its models or its population)."""
        return self.source in (REFERENCES, POPULATION)


@dataclass(frozen=True)
class Family:
    """An ``--attacks`` choice: its ``name``, the ``help`` words ``--help`` shows after it,
    whether it ``trains_pool`` (asking for it trains the reference pool; the pool attacks of
    a family that does not, the many-shadow attack, run only when another choice trains it),
    and whether ``all`` runs it (``in_all``). Its attacks are those of :data:`ATTACKS` with it
    as ``family``; ``one-run`` has none of its own (the canary audit writes its own columns)."""

    name: str
    help: str = ""
    trains_pool: bool = False
    in_all: bool = True


#: the ``--attacks`` choices, in the order ``--help`` lists them (``all`` after them)
FAMILIES: dict[str, Family] = by_name((
    Family("shadow", "the paper's attack"),
    Family("loss", "loss, confidence and data-free baselines"),
    Family("lira", trains_pool=True),
    Family("rmia", trains_pool=True),
    Family("quantile", "the quantile-regression attack, with the pool's thresholds", trains_pool=True),
    Family("one-run", "canary audit"),
    Family("label-only", "the gap and augmentation attacks, from the predicted label alone", in_all=False),
))

_LIRA = "score_lira"
#: every attack, in the order they are computed and saved
ATTACKS: dict[str, Attack] = by_name((
    # the target and its shadow model (ML-Leaks adversary 1, the baselines, adversary 3)
    Attack("shadow", "shadow", SHADOW, "ML-Leaks shadow-model attack (logistic regression on the top-3 posteriors)",
           order=0),
    Attack("loss", "loss", SHADOW, "−cross-entropy of the true label (Yeom et al. 2018)", order=12,
           scorer=scorer("score_loss")),
    Attack("confidence", "loss", SHADOW, "top-1 softmax posterior", order=13, scorer=scorer("score_confidence")),
    Attack("data-free", "loss", SHADOW, "top-1 posterior, thresholded on random-noise queries (ML-Leaks adversary 3)"),
    # the predicted label alone
    Attack("gap", "label-only", LABELS, "1 when the predicted label is right (Yeom et al. 2018)", order=15),
    Attack("augmentation", "label-only", LABELS, "share of shifted views still classified correctly "
                                                 "(Choquette-Choo et al. 2021)", order=14),
    # the reference pool
    Attack("lira-online", "lira", REFERENCES, "LiRA, IN and OUT references, per-sample variance (Carlini et al. 2022)",
           order=2, scorer=scorer(_LIRA, online=True, global_variance=False), per_sample=True, needs_in=True),
    Attack("lira-online-global", "lira", REFERENCES, "LiRA online, one variance for all samples", order=3,
           scorer=scorer(_LIRA, online=True, global_variance=True), per_sample=True, needs_in=True),
    Attack("lira-offline", "lira", REFERENCES, "LiRA, OUT references only, per-sample variance", order=4,
           scorer=scorer(_LIRA, online=False, global_variance=False), per_sample=True),
    Attack("lira-offline-global", "lira", REFERENCES, "LiRA offline, one variance for all samples", order=5,
           scorer=scorer(_LIRA, online=False, global_variance=True), per_sample=True),
    Attack("lira-shrunk-online", "lira", REFERENCES, "LiRA online, variances shrunk to a prior (few references)",
           order=6, scorer=scorer("score_lira_shrunk", online=True), per_sample=True),
    Attack("lira-shrunk-offline", "lira", REFERENCES, "LiRA offline, variances shrunk to a prior (few references)",
           order=7, scorer=scorer("score_lira_shrunk", online=False), per_sample=True),
    Attack("lira-bayes-online", "lira", REFERENCES, "LiRA online, means and variances shrunk to a difficulty prior",
           order=8, scorer=scorer("score_lira_bayes", online=True), per_sample=True),
    Attack("lira-bayes-offline", "lira", REFERENCES, "LiRA offline, means and variances shrunk to a difficulty prior",
           order=9, scorer=scorer("score_lira_bayes", online=False), per_sample=True),
    Attack("rmia", "rmia", REFERENCES, "RMIA, offline (Zarifzadeh et al. 2024)", order=10,
           scorer=scorer("score_rmia"), per_sample=True),
    Attack("shadow-pool", "shadow", REFERENCES, "ML-Leaks attack with every reference model as a shadow", order=1,
           scorer=scorer("score_shadow_pool"), needs_in=True),
    Attack("quantile", "quantile", POPULATION, "quantile regression of the non-member score on the population "
                                               "(Bertran et al. 2023)", order=11),
    # a shadow model trained on other data (ML-Leaks adversary 2)
    Attack("shadow-transfer", None, TRANSFER, "ML-Leaks attack with a shadow model trained on another dataset"),
    # privaudit scan's own, from the audited outputs alone
    Attack("entropy", None, OUTPUTS, "−entropy of the posteriors (Song & Mittal 2021)"),
    Attack("modified-entropy", None, OUTPUTS, "−modified entropy, label-aware (Song & Mittal 2021)"),
    Attack("classifier", None, OUTPUTS, "gradient-boosted trees on the sorted posteriors, cross-validated"),
))


def names(*, source: str | None = None, family: str | None = None) -> tuple[str, ...]:
    """The attacks (of one ``source``, of one ``family``), in :data:`ATTACKS`' order."""
    return tuple(a.name for a in ATTACKS.values()
                 if (source is None or a.source == source) and (family is None or a.family == family))


def description(name: str) -> str:
    """The line scan shows beside an attack ("" for a name it does not know)."""
    attack = ATTACKS.get(name)
    return attack.description if attack is not None else ""


def pool_scorer(name: str) -> Scorer | None:
    """The scorer of the attack ``name`` against a pool, None when it has none."""
    attack = ATTACKS.get(name)
    return attack.scorer if attack is not None else None


def choice_help() -> dict[str, str]:
    """Every ``--attacks`` choice with the words ``--help`` shows after it ("" for none)."""
    left_out = ", ".join(f.name for f in FAMILIES.values() if not f.in_all)
    return {**{f.name: f.help for f in FAMILIES.values()}, ALL: f"every attack but {left_out}"}


#: the ``--attacks`` choices: every family, then ``all``
CHOICES: tuple[str, ...] = (*FAMILIES, ALL)
#: the attacks computed from the references' scores (LiRA's, RMIA, the many-shadow attack)
REFERENCE_ATTACKS = names(source=REFERENCES)
#: every attack that runs on a reference pool (the reference attacks and the quantile attack)
POOL_ATTACKS = tuple(a.name for a in ATTACKS.values() if a.pool)
#: the baselines scored beside the reference attacks when each pool model is a target in turn
#: (they read no reference; the pool's leave-one-out and replicates report them too)
POOL_BASELINES = tuple(a.name for a in ATTACKS.values() if a.scorer is not None and not a.pool)
#: the attacks the pair jackknife recomputes (:attr:`Attack.per_sample`)
PER_SAMPLE_ATTACKS = tuple(a.name for a in ATTACKS.values() if a.per_sample)
#: the attacks computed from the target and its shadow model
SHADOW_ATTACKS = names(source=SHADOW)
#: the label-only attacks (thresholds from the shadow model too)
LABEL_ONLY_ATTACKS = names(source=LABELS)
#: the report's order of the attacks (an attack without one sorts by name where the page puts it)
REPORT_ORDER: dict[str, int] = {a.name: a.order for a in ATTACKS.values() if a.order is not None}
