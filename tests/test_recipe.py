"""One recipe object from the command line to the config (privaudit.api.recipe)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import privaudit
from privaudit.api.recipe import Recipe
from privaudit.cli import app
from privaudit.cli.options import RECIPE_OPTIONS
from privaudit.core.config import make_config
from privaudit.errors import ConfigError

TINY = dict(dataset="digits", epochs=1, part_size=40, width=8)


def test_a_recipe_makes_the_config_make_config_makes_from_the_same_settings():
    recipe = Recipe(model="cnn", dataset="digits", epochs=3, lr=0.01, canaries="mislabeled:5", model_args=None)
    assert recipe.config(seed=4, defence="mixup", knob=0.2) == make_config(
        model="cnn", dataset="digits", epochs=3, lr=0.01, canaries="mislabeled:5", seed=4, defence="mixup", knob=0.2)
    # the defaults table fills what the recipe leaves at None
    assert recipe.config().train.batch_size == 64 and Recipe(dataset="cifar10").config().data.part_size == 10_520


def test_keyword_overrides_replace_the_recipe_and_an_unknown_one_is_named():
    base = Recipe(**TINY)
    assert base.with_overrides({"epochs": 5}) == Recipe(**{**TINY, "epochs": 5})
    with pytest.raises(ConfigError, match="unknown recipe setting wdith; expected some of model, dataset"):
        base.with_overrides({"wdith": 3})


def test_the_api_takes_a_recipe_or_its_fields_and_they_name_the_same_model(tmp_path):
    recipe = Recipe(**TINY)
    a = privaudit.train(recipe, defence="mg", knob=0.5, workdir=tmp_path)
    b = privaudit.train(**TINY, defence="mg", knob=0.5, workdir=tmp_path)
    c = privaudit.train(Recipe(**{**TINY, "epochs": 9}), epochs=1, kappa=0.5, workdir=tmp_path)
    assert a.runs[0].name == b.runs[0].name == c.runs[0].name == make_config(**TINY, kappa=0.5).run_name
    assert not a.runs[0].reused and b.runs[0].reused and c.runs[0].reused
    with pytest.raises(ConfigError, match="recipe= takes a privaudit Recipe"):
        privaudit.train({"dataset": "digits"}, dry_run=True)


def test_every_recipe_option_is_a_recipe_field_and_the_command_line_builds_the_same_recipe(tmp_path):
    fields = set(Recipe.field_names())
    assert {"model_args" if n == "model_arg" else n for n, _, _ in RECIPE_OPTIONS} == fields
    out = CliRunner().invoke(app, ["train", "--dataset", "digits", "--epochs", "1", "--part-size", "40", "--width",
                                   "8", "--kappa", "0.5", "--workdir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert make_config(**TINY, kappa=0.5).run_name in out.output
