"""RunConfig: stable identity (hash, run name), round trips, shadow recipe, validation."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

from privaudit.api.params import as_options
from privaudit.core.config import (
    DataConfig,
    DefenceConfig,
    DPParams,
    ModelConfig,
    RunConfig,
    TrainConfig,
    make_config,
)
from privaudit.errors import ConfigError

SUBCONFIGS = ("data", "model", "defence", "train")


def _changed(value):
    """A different value of the same kind (validity does not matter for hashing)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 0.5
    if value is None:
        return 1.0
    if isinstance(value, str):
        return value + "x"
    raise AssertionError(f"unexpected field type {type(value)}")


def _variants(obj):
    """(field path, ``obj`` with exactly that one leaf field changed) for every leaf field,
    nested dataclasses (the defence's DP parameters) included."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            for path, new in _variants(value):
                yield f"{f.name}.{path}", dataclasses.replace(obj, **{f.name: new})
        else:
            yield f.name, dataclasses.replace(obj, **{f.name: _changed(value)})


def _leaves(obj) -> int:
    return sum(_leaves(getattr(obj, f.name)) if dataclasses.is_dataclass(getattr(obj, f.name)) else 1
               for f in dataclasses.fields(obj))


def test_hash_is_stable_for_equal_configs():
    a = make_config(model="cnn", kappa=0.5, epochs=7, seed=4)
    b = make_config(model="cnn", kappa=0.5, epochs=7, seed=4)
    assert a == b and a is not b
    assert a.config_hash == b.config_hash
    assert re.fullmatch(r"[0-9a-f]{10}", a.config_hash)


def test_hash_does_not_depend_on_the_process():
    """SHA-256 of canonical JSON, not Python's salted ``hash``: a fresh interpreter agrees."""
    cfg = make_config(model="cnn-improved", dp=True, noise_multiplier=1.5, kappa=0.2, seed=11)
    code = ("from privaudit.core.config import make_config; "
            "print(make_config(model='cnn-improved', dp=True, noise_multiplier=1.5, kappa=0.2, seed=11).config_hash)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert out.stdout.strip() == cfg.config_hash


def test_equal_configs_with_int_and_float_numbers_hash_alike():
    """``a == b`` must imply the same hash (the hash names the artifact and decides reuse).

    A float setting given as an int (kappa=1 vs 1.0, lr=1 vs 1.0) makes an equal config, so it
    must name the same model folder.
    """
    base = RunConfig()
    as_int = RunConfig(defence=DefenceConfig(name="mg", knob=1), train=TrainConfig(lr=1)).validated()
    as_float = RunConfig(defence=DefenceConfig(name="mg", knob=1.0), train=TrainConfig(lr=1.0)).validated()
    assert as_int == as_float != base
    assert as_int.config_hash == as_float.config_hash
    assert as_int.run_name == as_float.run_name


def test_hash_changes_when_any_field_changes():
    cfg = make_config(dp=True, noise_multiplier=1.0, kappa=0.3)
    seen = {cfg.config_hash: "original"}
    variants = list(_variants(cfg))
    # role, seed and every leaf of the four sub-configs
    n_leaves = 2 + sum(_leaves(getattr(cfg, s)) for s in SUBCONFIGS)
    assert len(variants) == n_leaves >= 17
    for path, other in variants:
        assert other != cfg, path
        h = other.config_hash
        assert h not in seen, f"changing {path} gives the hash of {seen.get(h)}"
        seen[h] = path


@pytest.mark.parametrize("kwargs, label", [
    ({}, "plain"),
    ({"kappa": 0.5}, "k0.5"),
    ({"dp": True, "noise_multiplier": 1.0}, "dp-s1"),
    ({"dp": True, "target_epsilon": 2.5}, "dp-e2.5"),
    ({"kappa": 0.25, "dp": True, "noise_multiplier": 0.8}, "k0.25-dp-s0.8"),
])
def test_run_name_format(kwargs, label):
    cfg = make_config(model="cnn", dataset="digits", **kwargs)
    assert cfg.defence.label == label
    assert cfg.run_name == f"target-cnn-digits-{label}-{cfg.config_hash}"
    assert re.fullmatch(r"target-cnn-digits-[a-z0-9.\-]+-[0-9a-f]{10}", cfg.run_name)


@pytest.mark.parametrize("kwargs, name", [
    ({}, "none"), ({"kappa": 0.1}, "mg"), ({"dp": True, "noise_multiplier": 1.0}, "dpsgd"),
    ({"kappa": 0.1, "dp": True, "target_epsilon": 3.0}, "mg+dpsgd"),
])
def test_defence_name(kwargs, name):
    assert make_config(**kwargs).defence.name == name


@pytest.mark.parametrize("kwargs", [
    {}, {"model": "cnn-improved", "kappa": 0.7, "seed": 5},
    {"dataset": "cifar10", "dp": True, "target_epsilon": 4.0, "delta": 1e-6},
])
def test_round_trip_to_dict_from_dict(kwargs):
    cfg = make_config(**kwargs)
    raw = cfg.to_dict()
    assert raw["schema"] == 2 and set(raw["defence"]) == {"name", "knob", "params"}
    back = RunConfig.from_dict(raw)
    assert back == cfg and back.config_hash == cfg.config_hash
    via_json = RunConfig.from_dict(json.loads(json.dumps(raw)))
    assert via_json == cfg and via_json.config_hash == cfg.config_hash


@pytest.mark.parametrize("kwargs, name, knob", [
    ({}, "none", 0.0), ({"kappa": 0.7}, "mg", 0.7), ({"dp": True, "noise_multiplier": 2.0}, "dpsgd", 2.0),
    ({"dp": True, "target_epsilon": 4.0}, "dpsgd", 0.0),
    ({"kappa": 0.2, "dp": True, "noise_multiplier": 1.0}, "mg+dpsgd", 1.0),
    ({"defense": "mixup", "knob": 0.5}, "mixup", 0.5),
    ({"defense": "early-stopping", "knob": 7}, "early-stopping", 7.0),
    ({"model": "convex-relu"}, "none", 0.0),
    ({"model": "convex-relu", "defense": "noisycgd", "knob": 3.0}, "noisycgd", 3.0),
])
def test_a_schema_1_config_migrates_to_one_defence_shape_with_its_hash(kwargs, name, knob):
    """Schema 1 wrote MG noise and DP as fields of their own (kappa, dp, noise_multiplier);
    read back, each is a (name, knob) pair whose config hashes, and so names its folder, as
    before. ``hash_dict`` is exactly schema 1's dict."""
    cfg = make_config(**kwargs)
    v1 = cfg.hash_dict()
    assert v1["schema"] == 1 and "kappa" in v1["defence"] and "name" not in v1["defence"]
    back = RunConfig.from_dict(json.loads(json.dumps(v1)))
    assert back == cfg and back.config_hash == cfg.config_hash
    assert (back.defence.name, back.defence.knob) == (name, knob)


def test_from_dict_refuses_foreign_dicts():
    raw = make_config().to_dict()
    bad_schema = {**raw, "schema": 99}
    missing = {k: v for k, v in raw.items() if k != "model"}
    unknown = {**raw, "train": {**raw["train"], "momentum": 0.9}}
    invalid = {**raw, "defence": {**raw["defence"], "kappa": -1.0}}
    for bad in (bad_schema, missing, unknown, invalid, {}):
        with pytest.raises(ConfigError):
            RunConfig.from_dict(bad)


def test_as_shadow_differs_only_in_role():
    cfg = make_config(model="cnn", kappa=0.4, dp=True, noise_multiplier=2.0, seed=9)
    shadow = cfg.as_shadow()
    assert shadow.role == "shadow" and cfg.role == "target"
    a, b = cfg.to_dict(), shadow.to_dict()
    assert {k for k in a if a[k] != b[k]} == {"role"}
    assert shadow.config_hash != cfg.config_hash
    assert shadow.run_name.startswith("shadow-cnn-digits-k0.4-dp-s2-")


def test_make_config_fills_dataset_defaults():
    c = make_config(dataset="cifar10", model="cnn-improved")
    assert (c.data.part_size, c.train.epochs, c.train.batch_size) == (10_520, 50, 100)
    assert c.train.weight_decay == 1e-5
    d = make_config(dataset="digits", model="mlp")
    assert (d.data.part_size, d.train.epochs, d.train.batch_size) == (449, 60, 64)
    assert d.train.weight_decay == 1e-7


@pytest.mark.parametrize("kwargs, field, option", [
    ({"kappa": -0.1}, "`kappa`", "--kappa"),
    ({"kappa": float("nan")}, "`kappa`", "--kappa"),
    ({"dp": True, "noise_multiplier": 0.0}, "`noise_multiplier`", "--sigma"),
    ({"dp": True, "noise_multiplier": -1.0}, "`noise_multiplier`", "--sigma"),
    ({"dp": True, "target_epsilon": 0.0}, "`target_epsilon`", "--target-epsilon"),
    ({"model": "resnet"}, "model", "model"),
    ({"dataset": "imagenet"}, "dataset", "dataset"),
    ({"dp": True}, "`dp`", "--dp"),
    ({"dp": True, "noise_multiplier": 1.0, "target_epsilon": 2.0}, "`dp`", "--dp"),
    ({"target_epsilon": 2.0}, "`target_epsilon`", "--target-epsilon"),
    ({"noise_multiplier": 1.0}, "`noise_multiplier`", "--sigma"),
    ({"delta": 0.0}, "`delta`", "--delta"),
    ({"delta": 1.0}, "`delta`", "--delta"),
    ({"delta": 1.5}, "`delta`", "--delta"),
    ({"delta": -1e-5}, "`delta`", "--delta"),
    ({"epochs": 0}, "`epochs`", "--epochs"),
    ({"batch_size": 0}, "`batch_size`", "--batch-size"),
    ({"width": 0}, "`width`", "--width"),
    ({"part_size": 1}, "`part_size`", "--part-size"),
    ({"lr": 0.0}, "`lr`", "--lr"),
    ({"max_grad_norm": 0.0}, "`max_grad_norm`", "--max-grad-norm"),
    ({"seed": -1}, "`seed`", "--seed"),
])
def test_invalid_settings_raise_config_error_naming_the_field(kwargs, field, option):
    """Below the API a message names the setting by its field (the keyword given); the API
    and the command line say the option (``as_options``), the same words otherwise."""
    with pytest.raises(ConfigError) as info:
        make_config(**kwargs)
    assert field in str(info.value)
    assert option in as_options(str(info.value)) and "`" not in as_options(str(info.value))


def test_validated_catches_a_directly_built_bad_config():
    with pytest.raises(ConfigError, match="`kappa`"):
        RunConfig(defence=DefenceConfig(name="mg", knob=-1.0)).validated()
    with pytest.raises(ConfigError, match="role"):
        RunConfig(role="victim").validated()
    with pytest.raises(ConfigError, match="`width`"):
        RunConfig(model=ModelConfig(width=2.5)).validated()
    with pytest.raises(ConfigError, match="`part_size`"):
        RunConfig(data=DataConfig(part_size=0)).validated()
    assert RunConfig().validated() == RunConfig()


#: one config per rule of CONFIG_RULES, broken in that rule's setting only, and the words its error says
BROKEN = {
    "role_is_known": (dict(role="victim"), "unknown role"),
    "dataset_is_known": (dict(data=DataConfig(dataset="mnist3")), "unknown dataset"),
    "model_is_known": (dict(model=ModelConfig(name="resnet9")), "unknown model"),
    "parts_hold_the_canaries": (dict(data=DataConfig(part_size=4, canaries="mislabeled:5")), "at most 4 canaries"),
    "pool_place_only_for_references": (dict(data=DataConfig(pool_size=4)), "reference models only"),
    "dp_settings_in_range": (dict(defence=DefenceConfig(params=DPParams(delta=1.5))), "`delta`"),
    "_check_defence": (dict(defence=DefenceConfig(name="mg", knob=-1.0)), "`kappa`"),
    "optimiser_in_range": (dict(train=TrainConfig(weight_decay=-1.0)), "`weight_decay`"),
    "convex_relu_fits_its_bound": (dict(model=ModelConfig(name="convex-relu"), train=TrainConfig(batch_size=10**6)),
                                   "exceeds"),
    "augmentation_fits_the_data": (dict(train=TrainConfig(augment="flip")), "natural images"),
    "precision_fits_the_defence": (dict(train=TrainConfig(precision="fp8")), "unknown precision"),
    "seed_in_range": (dict(seed=-3), "`seed`"),
}


@pytest.mark.parametrize("rule", list(BROKEN))
def test_each_config_rule_catches_its_own_setting_and_no_other_rule_does(rule):
    """Each config of BROKEN breaks one rule: that rule raises, every other passes it, and
    validated() reports that rule's error (a table over CONFIG_RULES, which it covers)."""
    from privaudit.core.config import CONFIG_RULES

    assert sorted(r.__name__ for r in CONFIG_RULES) == sorted(BROKEN)
    changes, words = BROKEN[rule]
    cfg = RunConfig(**changes)
    for r in CONFIG_RULES:
        if r.__name__ == rule:
            with pytest.raises(ConfigError, match=words):
                r(cfg)
        else:
            r(cfg)
    with pytest.raises(ConfigError, match=words):
        cfg.validated()


def test_the_other_spelling_of_defence_keywords_is_accepted():
    """Identifiers spell "defence"; the public functions take ``defense=`` and ``defenses=`` too."""
    import privaudit

    a = make_config(dataset="digits", defence="mixup", knob=0.2)
    assert make_config(dataset="digits", defense="mixup", knob=0.2) == a and a.defence.name == "mixup"
    with pytest.raises(ConfigError, match="not both"):
        make_config(dataset="digits", defence="mixup", defense="mixup", knob=0.2)
    kw = dict(batch_size=64, dataset_size=449, epochs=5, noise_multiplier=1.0)
    assert privaudit.epsilon(defense="dpsgd", **kw).epsilon == privaudit.epsilon(defence="dpsgd", **kw).epsilon > 0
