"""Attacking a trained target: shadow model, reference pool, attack scores, metrics, artifacts.

``attacks/<target>/`` holds ``config.json``, ``metrics.json`` (one entry per attack, each
naming its ``source``: the shadow model or the pool it was computed from), ``scores.npz``
(labels and one score vector per attack, samples = the target's members then its
non-members), and when a pool was used ``loo.json`` (leave-one-out evaluation over the pool)
and ``exposure.json`` with ``exposed.npz`` (the most exposed members' images,
:mod:`privaudit.pipeline.exposed`); when the one-run audit ran, ``one_run.json``; ``manifest.json``
holds their checksums (:mod:`privaudit.files.integrity`). Re-running with more attacks adds them;
an attack whose source is unchanged is not recomputed.

Before anything is trained, every artifact the plan reuses is verified: the target's model
folder, and where they exist the shadow model, the saved pool (or, when it must be computed,
its reference models), the canary model and the earlier attack folder. A damaged one stops
the attack at once with an error naming the folder.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privaudit.analysis.empirical import epsilon_lower_bound
from privaudit.analysis.gdp import gdp_at_threshold
from privaudit.analysis.metrics import attack_metrics, strongest_attack
from privaudit.attacks import registry
from privaudit.attacks.pool_attacks import (
    QUANTILE_ATTACK,
    REPLICATED,
    empirical_privacy,
    evaluate_scores,
    exposure,
    leave_one_out,
    pair_jackknife,
    pool_scores,
    quantile_scores,
    summarise,
    tpr_intervals,
)
from privaudit.attacks.registry import (
    ALL,
    CHOICES,
    LABEL_ONLY_ATTACKS,
    LABELS,
    PER_SAMPLE_ATTACKS,
    POOL_BASELINES,
    SHADOW,
    SHADOW_ATTACKS,
)
from privaudit.attacks.scores import confidence_scores, loss_scores
from privaudit.attacks.shadow import ShadowAttack
from privaudit.core.config import RunConfig
from privaudit.core.defaults import DEFAULT_POOL_SIZE
from privaudit.core.provenance import provenance
from privaudit.core.timing import timed
from privaudit.errors import ArtifactError, ConfigError
from privaudit.files.atomic import read_json, write_bytes, write_json
from privaudit.files.integrity import verify_folder
from privaudit.files.locks import artifact_lock
from privaudit.files.npfiles import npz_bytes
from privaudit.pipeline.exposed import FILE as EXPOSED_FILE
from privaudit.pipeline.exposed import most_exposed, read_exposed
from privaudit.pipeline.runs import DataCache, ensure_model
from privaudit.pipeline.workspace import Workspace
from privaudit.training.loop import EpochCallback
from privaudit.training.results import predict_logits, role_data

# 3: AUC intervals (metrics.auc_interval) in every attack's metrics; 4: GDP μ, calibrated operating points, PPV
ATTACK_SCHEMA = 4
TRANSFER_ATTACK = "shadow-transfer"
# ML-Leaks adversary 3 (Salem et al., NDSS 2019, Section VI): the top posterior, thresholded
# at this percentile of the top posteriors of as many uniformly random images (no data needed).
DATA_FREE_QUERIES = 1000
DATA_FREE_PERCENTILE = 90.0


@dataclass(frozen=True)
class AttackPlan:
    """Which attacks to run: ML-Leaks shadow trio, pool attacks (with the pool size), one-run.

    The shadow attack and the loss/confidence baselines are computed together (the baselines
    take their ε-bound thresholds from the same shadow model, and cost nothing more), so
    asking for either runs all three; ``shown`` names the attacks that were asked for, the
    ones a summary reports (empty: every attack computed)."""

    shadow: bool = True
    pool_attacks: tuple[str, ...] = ()
    pool_size: int = 0
    one_run: bool = False
    shown: tuple[str, ...] = ()
    shadow_dataset: str | None = None  # ML-Leaks adversary 2: a shadow trained on other data
    label_only: bool = False  # the gap and augmentation attacks (also run on output-side defences)
    # named in --attacks (not only through "all"): a quantile model that cannot fit is an error
    quantile_asked: bool = False

    def asked(self, metrics: dict) -> dict:
        """``metrics`` restricted to the attacks that were asked for (and the label-only ones,
        which ran either because they were asked for or because the target hides its scores)."""
        return {k: v for k, v in metrics.items() if not self.shown or k in self.shown or k in LABEL_ONLY_ATTACKS}

    @classmethod
    def from_choices(cls, choices: Iterable[str], pool_size: int = DEFAULT_POOL_SIZE,
                     shadow_dataset: str | None = None) -> AttackPlan:
        """``shadow`` (the paper's attack; plus the many-shadow one with a pool), ``loss``
        (loss, confidence and data-free baselines), ``lira`` (online/offline,
        per-sample/global variance), ``rmia``, ``one-run`` (canary audit), ``all``: the
        families of :data:`privaudit.attacks.registry.FAMILIES`, each running its attacks of
        :data:`~privaudit.attacks.registry.ATTACKS`; ``shadow_dataset`` adds the transfer attack
        (``shadow-transfer``)."""
        chosen = set(choices)
        unknown = chosen - set(CHOICES)
        if unknown:
            raise ConfigError(f"unknown attack {sorted(unknown)[0]!r}; expected one of {', '.join(CHOICES)}")
        quantile_asked = "quantile" in chosen  # named, not only through "all"
        if ALL in chosen:
            chosen |= {f.name for f in registry.FAMILIES.values() if f.in_all}
        # the pool attacks of every family asked for, when one of them trains the pool (the
        # many-shadow attack, of the shadow family, runs on a pool another family trains)
        trains_pool = any(f.trains_pool for name, f in registry.FAMILIES.items() if name in chosen)
        pool_attacks = (tuple(a.name for a in registry.ATTACKS.values() if a.pool and a.family in chosen) if trains_pool
                        else ())
        if pool_attacks and (not isinstance(pool_size, int) or pool_size < 4 or pool_size % 2):
            raise ConfigError(f"`pool_size` must be an even number >= 4 for lira, rmia and the many-shadow attack "
                              f"(got {pool_size})")
        # the shadow model's attacks (and the label-only ones) of the families asked for
        with_shadow = [a.name for a in registry.ATTACKS.values() if a.family in chosen and a.source in (SHADOW, LABELS)]
        shown = list(with_shadow)
        if shadow_dataset is not None:
            shown.append(TRANSFER_ATTACK)
        return cls(shadow=bool(with_shadow), pool_attacks=pool_attacks, label_only="label-only" in chosen,
                   pool_size=pool_size if pool_attacks else 0, one_run="one-run" in chosen,
                   shown=tuple(shown) + pool_attacks, shadow_dataset=shadow_dataset, quantile_asked=quantile_asked)


@dataclass
class AttackResult:
    target: str
    shadow: str | None
    path: Path
    metrics: dict[str, dict[str, float]]
    reused: bool
    extras: dict = field(default_factory=dict)


def model_outputs(workspace: Workspace, name: str, data: DataCache,
                  device: torch.device) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Logits of a saved model on its own members and non-members (clean inputs), with labels.

    The weights are loaded safely (``allow_pickle=False``) and the model's own saved
    normalisation is used. Returns (logits_in, y_in, logits_out, y_out), float64 / int64.
    """
    cfg = workspace.read_model_config(name)
    images = data.images(cfg)
    loaded = workspace.load_model(name, images.input_shape, images.num_classes)
    rd = role_data(cfg, images, device, normaliser=loaded.normaliser)
    model = loaded.model.to(device)
    return (predict_logits(model, rd.x_in).double().numpy(), rd.y_in.cpu().numpy(),
            predict_logits(model, rd.x_out).double().numpy(), rd.y_out.cpu().numpy())


def hides_scores(cfg: RunConfig) -> bool:
    """Whether ``cfg``'s defence releases less than the scores (an output-side defence of
    :mod:`privaudit.defences`): its targets get the label-only attacks, whatever was asked."""
    from privaudit.defences import OUTPUT, of_config

    defence = of_config(cfg.defence)
    return defence is not None and defence.side == OUTPUT


def label_outputs(workspace: Workspace, name: str, data: DataCache,
                  device: torch.device) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The label-only attacks' scores of a saved model on its members and non-members: (gap
    in, gap out, augmentation in, augmentation out). The model is queried for its predicted
    label alone (its own argmax, which every output defence still releases) on the raw images
    shifted by up to one pixel (two on images larger than 16 pixels), and mirrored when it
    trained on mirrored images; each view normalised as the model's inputs are."""
    from privaudit.attacks.label_only import AugmentationSpec, augmentation_scores, gap_scores
    from privaudit.data.splits import model_members
    from privaudit.models.released import Released

    cfg = workspace.read_model_config(name)
    images = data.images(cfg)
    loaded = workspace.load_model(name, images.input_shape, images.num_classes)
    model = loaded.model.model if isinstance(loaded.model, Released) else loaded.model
    model = model.to(device)
    mean = torch.from_numpy(loaded.normaliser.mean).to(device)
    std = torch.from_numpy(loaded.normaliser.std).to(device)

    def predict(x: torch.Tensor) -> torch.Tensor:
        return predict_logits(model, (x - mean) / std).argmax(1)

    idx_in, idx_out = model_members(cfg, len(images.y))
    spec = AugmentationSpec(radius=1 if max(images.input_shape[1:]) <= 16 else 2, flip=cfg.train.augment == "flip")
    out = []
    for idx in (idx_in, idx_out):
        x = torch.from_numpy(images.x[idx].astype(np.float32)).to(device)
        y = images.y[idx]
        out.append((gap_scores(predict(x).cpu().numpy(), y), augmentation_scores(predict, x, y, spec)))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def run_label_only(target_out: tuple, shadow_out: tuple,
                   delta: float = 1e-5) -> tuple[dict[str, dict[str, float | str | None]], dict[str, np.ndarray]]:
    """The gap attack (score 1[ŷ = y], member iff 1) and the augmentation attack (the share
    of shifted views still classified correctly, thresholded where it separates the shadow
    model's own members from its non-members best), from :func:`label_outputs` of the target
    and its shadow; ε bounds with thresholds chosen on the shadow model."""
    from privaudit.attacks.label_only import reference_threshold

    g_in, g_out, a_in, a_out = target_out
    sg_in, sg_out, sa_in, sa_out = shadow_out
    labels = np.concatenate([np.ones(len(g_in), dtype=np.int8), np.zeros(len(g_out), dtype=np.int8)])
    s_labels = np.concatenate([np.ones(len(sg_in), dtype=np.int8), np.zeros(len(sg_out), dtype=np.int8)])
    scores = {"gap": (np.concatenate([g_in, g_out]), np.concatenate([sg_in, sg_out]), 1.0)}
    aug_calib = np.concatenate([sa_in, sa_out])
    scores["augmentation"] = (np.concatenate([a_in, a_out]), aug_calib, reference_threshold(s_labels, aug_calib))
    metrics = {}
    for name, (s, calib, thr) in scores.items():
        metrics[name] = {**attack_metrics(labels, s, thr),
                         **empirical_privacy(labels, s, s_labels, calib, delta=delta)}
    return metrics, {"labels": labels, **{f"score_{name}": s for name, (s, _, _) in scores.items()}}


def data_free_threshold(workspace: Workspace, name: str, data: DataCache, device: torch.device) -> float:
    """ML-Leaks adversary 3's threshold for the saved model ``name``: the
    :data:`DATA_FREE_PERCENTILE` th percentile of its top posterior on
    :data:`DATA_FREE_QUERIES` images of uniformly random pixels (over the dataset's raw value
    range, normalised as the model's inputs are), seeded by the model's own seed. The
    attacker needs no data at all, only queries."""
    from privaudit.core.seeding import derive_seed

    cfg = workspace.read_model_config(name)
    images = data.images(cfg)
    loaded = workspace.load_model(name, images.input_shape, images.num_classes)
    rng = np.random.default_rng(derive_seed(cfg.seed, "data-free"))
    noise = rng.integers(0, int(images.x.max()) + 1, size=(DATA_FREE_QUERIES, *images.input_shape), dtype=np.uint8)
    logits = predict_logits(loaded.model.to(device), torch.from_numpy(loaded.normaliser(noise)).to(device))
    return float(np.percentile(confidence_scores(logits.double().numpy()), DATA_FREE_PERCENTILE))


def transfer_shadow_config(cfg: RunConfig, dataset: str, data: DataCache) -> RunConfig:
    """ML-Leaks adversary 2's shadow model: the target's recipe (architecture, defence,
    training) trained on the shadow parts of *another* dataset, ``dataset``, the attacker's
    own data (parts no larger than the target's, nor than a quarter of that dataset). Its
    sorted top-3 posteriors do not depend on the class count, so any image dataset serves."""
    from dataclasses import replace

    extra = data.config_kwargs(dataset)
    n = extra.get("dataset_size") or len(data.get(dataset).y)
    part = min(cfg.data.part_size, n // 4)
    if part < 2:
        raise ConfigError(f"`shadow_dataset` {dataset} has {n} samples: too few for a shadow model's parts")
    shadow = cfg.as_shadow()
    return replace(shadow, data=replace(shadow.data, dataset=dataset, part_size=part,
                                        fingerprint=extra.get("fingerprint", ""))).validated()


def run_attacks(target_out: tuple, shadow_out: tuple, delta: float = 1e-5, data_free: float | None = None
                ) -> tuple[dict[str, dict[str, float | str | None]], dict[str, np.ndarray]]:
    """The ML-Leaks shadow attack and the shadow-free baselines on a target.

    shadow: ML-Leaks logistic regression on top-3 posteriors, threshold 0.5 (adversary 1).
    loss: score −loss, threshold −(mean loss over the target's members) (Yeom et al.).
    confidence: score top-1 posterior, threshold = mean top-1 posterior over its members.
    data-free: score top-1 posterior, threshold ``data_free`` (:func:`data_free_threshold`;
    ML-Leaks adversary 3), when given; its ε bound is taken at that same threshold, which
    no member or non-member chose.
    Returns (metrics per attack, arrays: labels and one score vector per attack).
    """
    t_in, ty_in, t_out, ty_out = target_out
    s_in, _, s_out, _ = shadow_out
    labels = np.concatenate([np.ones(len(t_in), dtype=np.int8), np.zeros(len(t_out), dtype=np.int8)])
    logits = np.concatenate([t_in, t_out])
    y = np.concatenate([ty_in, ty_out])
    shadow = ShadowAttack().fit(s_in, s_out)
    scores = {
        "shadow": (shadow.scores(logits), shadow.threshold),
        "loss": (loss_scores(logits, y), float(loss_scores(t_in, ty_in).mean())),
        "confidence": (confidence_scores(logits), float(confidence_scores(t_in).mean())),
    }
    metrics: dict[str, dict[str, Any]] = {name: attack_metrics(labels, s, thr) for name, (s, thr) in scores.items()}
    # Empirical ε and TPR intervals, the ε threshold chosen on the shadow model's own members
    # and non-members (another model than the audited one).
    s_logits, s_y = np.concatenate([s_in, s_out]), np.concatenate([shadow_out[1], shadow_out[3]])
    s_labels = np.concatenate([np.ones(len(s_in), dtype=np.int8), np.zeros(len(s_out), dtype=np.int8)])
    calib = {"shadow": shadow.scores(s_logits), "loss": loss_scores(s_logits, s_y),
             "confidence": confidence_scores(s_logits)}
    for name, (s, _) in scores.items():
        metrics[name].update(empirical_privacy(labels, s, s_labels, calib[name], delta=delta))
    if data_free is not None:
        conf = scores["confidence"][0]
        m: dict[str, Any] = attack_metrics(labels, conf, data_free)
        m["eps_threshold"] = data_free
        m["threshold_strategy"] = "fixed: random-noise queries, no data"
        m["eps_lower_bound"] = float(epsilon_lower_bound(labels, conf, data_free, delta=delta))
        gdp = gdp_at_threshold(labels, conf, data_free, delta=delta)
        m.update(gdp.metrics(), eps_fpr=gdp.fpr)
        metrics["data-free"] = {**m, **tpr_intervals(labels, conf)}
    arrays = {"labels": labels, **{f"score_{name}": s for name, (s, _) in scores.items()}}
    if data_free is not None:
        arrays["score_data-free"] = scores["confidence"][0]
    return metrics, arrays


@timed("attack")
def attack_target(workspace: Workspace, target: str, data: DataCache, device: torch.device,
                  plan: AttackPlan | None = None, *,
                  on_start: Callable[[RunConfig], None] | None = None,
                  on_epoch: EpochCallback | None = None) -> AttackResult:
    """Attack the target run ``target`` as ``plan`` says (default: the ML-Leaks shadow attack
    and the baselines), training or reusing what each attack needs, and save the results."""

    plan = plan or AttackPlan()
    cfg = workspace.read_model_config(target)
    if cfg.role != "target":
        raise ArtifactError(f"{target} is a {cfg.role} model, not a target")
    workspace.verify_model(target)  # before anything is trained for it
    workspace.attacks.mkdir(parents=True, exist_ok=True)
    with artifact_lock(workspace.attacks, target, "work"):  # another audit may be attacking it
        return _attack(workspace, target, cfg, data, device, plan, on_start, on_epoch)


@dataclass
class _Attacking:
    """One target's attack in progress: what the attack families read (the target, its
    config, the data, the plan) and what they add to (its metrics, score arrays, extras and
    most exposed members, as read from an earlier attack of it)."""

    workspace: Workspace
    target: str
    cfg: RunConfig
    data: DataCache
    device: torch.device
    plan: AttackPlan
    on_start: Callable[[RunConfig], None] | None
    on_epoch: EpochCallback | None
    metrics: dict
    arrays: dict
    extras: dict
    exposed: dict
    _outputs: tuple | None = None

    def outputs(self) -> tuple:
        """The target's outputs on its members and non-members, computed once."""
        if self._outputs is None:
            self._outputs = model_outputs(self.workspace, self.target, self.data, self.device)
        return self._outputs

    def model(self, cfg: RunConfig):
        """``cfg``'s model, trained or reused."""
        return ensure_model(cfg, self.workspace, self.data, self.device, on_start=self.on_start,
                            on_epoch=self.on_epoch)

    def record(self, results: dict, source: str) -> None:
        """Each attack's metrics of ``results``, noting what they were computed from."""
        self.metrics.update({k: {**v, "source": source} for k, v in results.items()})


@dataclass(frozen=True)
class AttackFamily:
    """Attacks computed together from one source: ``source`` names it (a shadow model's run,
    a pool, a canary model; None when the plan does not ask for the family), ``done`` says
    whether an earlier attack already holds the family from that source, ``check`` looks at
    the artifacts it would reuse before anything trains, and ``compute`` adds its results."""

    name: str
    source: Callable[[_Attacking], str | None]
    done: Callable[[_Attacking, str], bool]
    compute: Callable[[_Attacking, str], None]
    check: Callable[[_Attacking], None] = lambda job: None


def _sourced(names: Callable[[_Attacking], Iterable[str]]) -> Callable[[_Attacking, str], bool]:
    """``done`` of a family whose attacks' metrics each name their source."""
    return lambda job, source: all(job.metrics.get(a, {}).get("source") == source for a in names(job))


def _shadow_source(job: _Attacking) -> str | None:
    return job.cfg.as_shadow().run_name if job.plan.shadow else None


def _shadow_attacks(job: _Attacking, source: str) -> None:
    """ML-Leaks' shadow attack and the loss, confidence and data-free baselines, from the
    target's and its shadow model's outputs."""
    shadow = job.model(job.cfg.as_shadow())
    m, a = run_attacks(job.outputs(), model_outputs(job.workspace, shadow.name, job.data, job.device),
                       delta=job.cfg.defence.delta,
                       data_free=data_free_threshold(job.workspace, job.target, job.data, job.device))
    job.record(m, shadow.name)
    job.arrays.update(a)


def _label_source(job: _Attacking) -> str | None:
    return _shadow_source(job) if job.plan.label_only or hides_scores(job.cfg) else None


def _label_attacks(job: _Attacking, source: str) -> None:
    """The gap and augmentation attacks, from the predicted labels alone."""
    shadow = job.model(job.cfg.as_shadow())
    m, a = run_label_only(label_outputs(job.workspace, job.target, job.data, job.device),
                          label_outputs(job.workspace, shadow.name, job.data, job.device), delta=job.cfg.defence.delta)
    job.record(m, shadow.name)
    job.arrays.update(a)


def _pool_source(job: _Attacking) -> str | None:
    from privaudit.pipeline.pools import pool_name

    return pool_name(job.cfg, job.plan.pool_size) if job.plan.pool_attacks else None


def _pool_attacks(job: _Attacking, source: str) -> None:
    """LiRA, RMIA, the many-shadow and quantile attacks from the reference pool, each
    calibrated by leave-one-out on the pool, and the most exposed members under the strongest."""
    from privaudit.pipeline.pools import ensure_pool, model_logits

    cfg, plan, metrics, arrays, extras = job.cfg, job.plan, job.metrics, job.arrays, job.extras
    pool = ensure_pool(cfg, plan.pool_size, job.workspace, job.data, job.device, on_start=job.on_start,
                       on_epoch=job.on_epoch)
    images = job.data.images(cfg)
    t_logits = model_logits(job.workspace, job.target, images, pool.indices, pool.queries, job.device)
    t_pop = model_logits(job.workspace, job.target, images, pool.pop_indices, pool.queries, job.device)
    from_refs = tuple(a for a in plan.pool_attacks if a != QUANTILE_ATTACK)
    per_target, loo_scores = leave_one_out(pool.logits, pool.pop_logits, pool.keep, pool.labels,
                                           pool.pop_labels, attacks=from_refs + POOL_BASELINES,
                                           delta=cfg.defence.delta)
    scores = pool_scores(t_logits, t_pop, pool.labels, pool.pop_labels, pool.logits, pool.pop_logits,
                         pool.keep, attacks=from_refs)
    labels = np.concatenate([np.ones(cfg.data.part_size, dtype=np.int8),
                             np.zeros(cfg.data.part_size, dtype=np.int8)])  # pool = members, non-members
    calib_labels = pool.keep.astype(int).ravel()
    for name, values in scores.items():
        m = evaluate_scores(labels, values, calib_labels, loo_scores[name].ravel(), delta=cfg.defence.delta)
        metrics[name] = {**m, "source": pool.name}
        arrays[f"score_{name}"] = values
    if QUANTILE_ATTACK in plan.pool_attacks:  # the target's, thresholds on pool model 0's
        from privaudit.attacks.lira import logit_scaled_confidence as phi

        s: np.ndarray | None  # the quantile attack's scores, None where it is left out
        try:
            s, calib = (quantile_scores(images.x[pool.indices], pool.labels, phi(lg[:, 0], pool.labels),
                                        images.x[pool.pop_indices], pool.pop_labels,
                                        phi(pop[:, 0], pool.pop_labels), seed=cfg.seed)
                        for lg, pop in ((t_logits, t_pop), (pool.logits[0], pool.pop_logits[0])))
        except ValueError as exc:  # too few population samples, or a fit that does not converge
            if plan.quantile_asked:
                raise ConfigError(f"the quantile attack cannot run on {job.target}: {exc}") from None
            s = None  # asked for through "all": left out, as an attack that does not apply
        if s is not None:
            m = evaluate_scores(labels, s, pool.keep[0].astype(int), calib, delta=cfg.defence.delta)
            metrics[QUANTILE_ATTACK] = {**m, "source": pool.name}
            scores[QUANTILE_ATTACK] = arrays[f"score_{QUANTILE_ATTACK}"] = s
    arrays["labels"] = labels
    extras["loo"] = {"pool": pool.name, "pool_size": pool.size, "summary": summarise(per_target),
                     "replicates": _replicates(job, pool, per_target, from_refs + POOL_BASELINES)}
    strongest = strongest_attack({n: metrics[n] for n in scores})
    top = most_exposed(scores, strongest, labels, pool.indices, images.x, images.y)
    job.exposed = top.arrays() if top is not None else {}
    assert strongest is not None  # at least one attack ran on members and non-members: it has an AUC
    extras["exposure"] = {"attack": strongest,
                          **exposure(labels, scores[strongest], pool.labels, pool.indices),
                          **(top.summary() if top is not None else {}),
                          "loss_trace": trace_exposure(job.workspace.read_loss_trace(job.target), scores[strongest],
                                                       pool.indices, cfg.data.part_size)}


def _replicates(job: _Attacking, pool, per_target: dict, attacks: tuple[str, ...]) -> dict:
    """Every pool model as a replicate of the setting (:mod:`privaudit.analysis.replicates`):
    its test accuracy and its leave-one-out measures, and the delete-one-pair jackknife."""
    from privaudit.analysis.replicates import replicates

    accuracies = (pool.accuracies if pool.accuracies is not None
                  else [_saved_accuracy(job, name) for name in pool.models])
    jack = pair_jackknife(pool.logits, pool.pop_logits, pool.keep, pool.labels, pool.pop_labels, per_target,
                          attacks=tuple(a for a in attacks if a in PER_SAMPLE_ATTACKS), delta=job.cfg.defence.delta)
    return replicates(per_target, jack, accuracies, REPLICATED, job.cfg.defence.delta)


def _saved_accuracy(job: _Attacking, name: str) -> float:
    """A pool model's test accuracy from its folder, for a pool saved before pools kept them;
    NaN where the folder is not here (a worker that was sent the pool's outputs only)."""
    if not (job.workspace.models / name).is_dir():
        return math.nan
    return float(job.workspace.read_model_metrics(name).get("test_accuracy", math.nan))


def _check_model(job: _Attacking, cfg: RunConfig) -> None:
    """Raise :class:`~privaudit.errors.DamagedArtifactError` when ``cfg``'s saved model is damaged."""
    job.workspace.has_model(cfg.validated())


def _check_pool(job: _Attacking) -> None:
    from privaudit.pipeline.pools import check_pool

    check_pool(job.cfg, job.plan.pool_size, job.workspace)


def _one_run(job: _Attacking, source: str) -> None:
    """The one-run audit: a canary model trained with half its canaries."""
    from privaudit.pipeline.canary import one_run_audit

    job.extras["one_run"] = one_run_audit(job.cfg, job.workspace, job.data, job.device, on_start=job.on_start,
                                          on_epoch=job.on_epoch)


def _transfer_config(job: _Attacking) -> RunConfig | None:
    return transfer_shadow_config(job.cfg, job.plan.shadow_dataset, job.data) if job.plan.shadow_dataset else None


def _transfer_attack(job: _Attacking, source: str) -> None:
    """ML-Leaks' transfer attack: a shadow model of the target's recipe on another dataset."""
    transfer = _transfer_config(job)
    assert transfer is not None
    run = job.model(transfer)
    m, a = run_attacks(job.outputs(), model_outputs(job.workspace, run.name, job.data, job.device),
                       delta=job.cfg.defence.delta)
    job.metrics[TRANSFER_ATTACK] = {**m["shadow"], "source": run.name}
    job.arrays[f"score_{TRANSFER_ATTACK}"] = a["score_shadow"]
    job.arrays.setdefault("labels", a["labels"])


def _transfer_source(job: _Attacking) -> str | None:
    transfer = _transfer_config(job)
    return transfer.run_name if transfer is not None else None


#: every family of attacks, in the order they are computed (the order their results are saved)
FAMILIES = (
    AttackFamily("shadow", _shadow_source, _sourced(lambda job: SHADOW_ATTACKS), _shadow_attacks,
                 check=lambda job: _check_model(job, job.cfg.as_shadow())),
    AttackFamily("label-only", _label_source, _sourced(lambda job: LABEL_ONLY_ATTACKS), _label_attacks),
    AttackFamily("pool", _pool_source, _sourced(lambda job: job.plan.pool_attacks), _pool_attacks, check=_check_pool),
    AttackFamily("one-run", lambda job: job.cfg.as_canary().run_name if job.plan.one_run else None,
                 lambda job, source: job.extras.get("one_run", {}).get("canary_run") == source, _one_run,
                 check=lambda job: _check_model(job, job.cfg.recipe.as_canary())),
    AttackFamily("transfer", _transfer_source, _sourced(lambda job: (TRANSFER_ATTACK,)), _transfer_attack),
)


def _attack(workspace: Workspace, target: str, cfg: RunConfig, data: DataCache, device: torch.device,
            plan: AttackPlan, on_start, on_epoch) -> AttackResult:
    """Each family of attacks the plan asks for that an earlier attack of ``target`` does not
    already hold from the same source, computed in :data:`FAMILIES`' order, then saved with
    what was kept (the canaries' rates and the samples' indices added)."""
    folder = workspace.attacks / target
    metrics, arrays, extras, exposed = _read_existing(folder, target)
    job = _Attacking(workspace, target, cfg, data, device, plan, on_start, on_epoch, metrics, arrays, extras, exposed)
    sources = {f.name: f.source(job) for f in FAMILIES}
    todo = [f for f in FAMILIES if (source := sources[f.name]) is not None and not f.done(job, source)]
    shadow_name, pool_id = sources["shadow"], sources["pool"]
    if not todo:
        return AttackResult(target, shadow_name, folder, metrics, True, extras)
    for family in todo:  # a damaged model or pool it would reuse, before any of them trains anything
        family.check(job)
    for family in todo:
        source = sources[family.name]
        assert source is not None  # todo holds only the families with a source
        family.compute(job, source)

    if cfg.data.canaries:
        add_canary_rates(cfg, data, metrics, arrays)
    if "labels" in arrays and "indices" not in arrays:  # the samples' dataset indices: members, then non-members
        from privaudit.data import split_parts

        arrays["indices"] = split_parts(len(data.images(cfg).y), cfg.data.part_size, cfg.data.seed).pool

    attack_config: dict[str, Any] = {"schema": ATTACK_SCHEMA, "target": target,
                                     "shadow": shadow_name or metrics.get("shadow", {}).get("source"),
                                     "pool": pool_id or extras.get("loo", {}).get("pool"), "attacks": sorted(metrics)}

    def write(tmp: Path) -> None:
        write_bytes(tmp / "scores.npz", npz_bytes(arrays, compressed=True))
        write_json(tmp / "metrics.json", metrics)
        for key, value in extras.items():
            write_json(tmp / f"{key}.json", value)
        if job.exposed:
            write_bytes(tmp / EXPOSED_FILE, npz_bytes(job.exposed, compressed=True))
        write_json(tmp / "config.json", {**attack_config, "provenance": provenance(device)})

    path = workspace.commit_folder(workspace.attacks, target, write)
    saved, _, saved_extras, _ = _read_existing(path, target)  # as JSON stores them (inf → null)
    return AttackResult(target, attack_config["shadow"], path, saved, False, saved_extras)


def trace_exposure(found: tuple[np.ndarray, np.ndarray] | None, scores: np.ndarray, indices: np.ndarray,
                   members: int, fraction: float = 0.01) -> dict:
    """The loss-trace ranking of the target's members (LT-IQR, docs/methods/d-attacks.md D.10) beside the
    strongest attack's: the share of its top ``fraction`` by LT-IQR among the attack's top
    ``fraction`` members (``precision``; chance = ``fraction``) and the top members' dataset
    indices. ``found``: the model's saved trace, None when it has none (then ``reason`` says so).
    ``scores`` (n,) over the pool samples ``indices``, its first ``members`` the target's members."""
    from privaudit.attacks.loss_trace import lt_iqr, top_precision, top_set

    if found is None:
        return {"available": False, "reason": "no loss trace: the model was trained by an earlier privaudit, by "
                                              "Opacus's engine or by NoisyCGD, which record none"}
    trace, idx = found
    position = {int(i): j for j, i in enumerate(indices[:members])}
    if len(idx) != members or any(int(i) not in position for i in idx):
        return {"available": False, "reason": "the loss trace's members are not the target's"}
    cols = np.array([position[int(i)] for i in idx])
    vulnerability = lt_iqr(trace)
    best = top_set(vulnerability, fraction)
    return {"available": True, "epochs": int(trace.shape[0]), "fraction": fraction,
            "precision": top_precision(vulnerability, scores[cols], fraction),
            "top": [int(idx[i]) for i in best[:10]]}


def add_canary_rates(cfg: RunConfig, data: DataCache, metrics: dict, arrays: dict) -> None:
    """Each attack's TPR at 1 % and 0.1 % FPR on the planted canaries among the target's
    members, at the population's threshold (:func:`privaudit.analysis.empirical.canary_tpr_at_fpr`):
    ``canary_tpr_at_1pct_fpr`` (with ``_lo``/``_hi``), ``canary_tpr_at_0p1pct_fpr`` and
    ``n_canaries`` (the canaries among the members) in its metrics."""
    from privaudit.analysis.empirical import canary_tpr_at_fpr
    from privaudit.data.planted import canary_indices
    from privaudit.data.splits import split_parts

    images = data.images(cfg)
    split = split_parts(len(images.y), cfg.data.part_size, cfg.data.seed)
    order = np.concatenate([split.target_in, split.target_out])  # the scores' order: members, then non-members
    mask = np.isin(order, canary_indices(len(images.y), cfg.data.part_size, cfg.data.seed, cfg.data.canaries))
    labels = arrays.get("labels")
    for name, m in metrics.items():
        scores = arrays.get(f"score_{name}")
        if labels is None or scores is None or len(scores) != len(mask) or len(labels) != len(mask):
            continue
        for key, level in (("canary_tpr_at_1pct_fpr", 0.01), ("canary_tpr_at_0p1pct_fpr", 0.001)):
            r = canary_tpr_at_fpr(labels, scores, mask, level)
            m[key], m[f"{key}_lo"], m[f"{key}_hi"] = r["tpr"], r["lo"], r["hi"]
            m["n_canaries"] = r["n"]


EXTRA_FILES = ("loo", "exposure", "one_run")


def _read_existing(folder: Path, target: str) -> tuple[dict, dict, dict, dict]:
    """(metrics, score arrays, extras, the most exposed members' arrays of ``exposed.npz``)
    of an earlier attack of ``target``, or empty ones (none, another schema, or written before
    manifests and unreadable). Raises
    :class:`~privaudit.errors.DamagedArtifactError` when its files do not match their manifest."""
    if folder.is_dir():
        verify_folder(folder, "attack")
    try:
        saved = read_json(folder / "config.json")
        if not isinstance(saved, dict) or saved.get("schema") != ATTACK_SCHEMA or saved.get("target") != target:
            return {}, {}, {}, {}
        metrics = read_json(folder / "metrics.json")
        with np.load(folder / "scores.npz", allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        extras = {k: read_json(folder / f"{k}.json") for k in EXTRA_FILES if (folder / f"{k}.json").is_file()}
        return metrics, arrays, extras, read_exposed(folder)
    except (ArtifactError, OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return {}, {}, {}, {}
