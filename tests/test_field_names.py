"""Below the API a message names a setting by its field (the keyword a Python caller gives,
in backticks: ``\\`batch_size\\```); the API and the command line say it as the option
(``--batch-size``) through one table, ``privaudit.api.params.flag``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from cli_helpers import one_error_line, run_cli

import privaudit
from privaudit.api.params import as_options, flag, options_named
from privaudit.core.config import make_config
from privaudit.errors import FIELD, ConfigError, DamagedArtifactError

PACKAGE = Path(privaudit.__file__).parent
#: an option as the command line spells it, outside a backticked command to run
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _messages_below_the_api() -> list[tuple[str, int, str]]:
    """(module, line, text) of every string in a call that raises or requires, outside
    ``api/`` and ``cli/``: the messages the library below the API writes."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("api", "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):  # the setting a helper's messages name by default
                args = node.args.args[len(node.args.args) - len(node.args.defaults):] + node.args.kwonlyargs
                defaults = node.args.defaults + node.args.kw_defaults
                found += [(str(rel), d.lineno, d.value) for a, d in zip(args, defaults)
                          if a.arg == "option" and isinstance(d, ast.Constant)]
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name.endswith("Error") or name in ("_require", "Knob"):
                found += [(str(rel), text.lineno, _text(text)) for text in _strings(node)]
    return found


def _strings(node: ast.AST) -> list[ast.Constant | ast.JoinedStr]:
    """The string literals under ``node``: an f-string whole, not its parts."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return [node]
    return [s for child in ast.iter_child_nodes(node) for s in _strings(child)]


def _text(node: ast.Constant | ast.JoinedStr) -> str:
    """A literal's text, each replacement field of an f-string as ``{}``."""
    if isinstance(node, ast.Constant):
        return node.value
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _command_line_options() -> set[str]:
    """Every long option of every command and subcommand."""
    import click
    import typer

    from privaudit.cli import app

    options: set[str] = set()

    def walk(command: click.Command) -> None:
        for param in command.params:
            options.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return options


def test_no_message_below_the_api_names_an_option():
    """Options appear only inside a backticked command to run (``\\`privaudit train --model mlp\\```)."""
    named = [(module, line, text) for module, line, text in _messages_below_the_api()
             if any(OPTION.search(part) for part in text.split("`")[::2])]
    assert not named, named


def test_every_field_a_message_names_is_an_option_of_the_command_line():
    messages = _messages_below_the_api()
    fields = {m for _, _, text in messages for m in FIELD.findall(text)}
    assert {"epochs", "noise_multiplier", "defence", "model_args", "data_dir", "l2"} <= fields  # the scan sees them
    options = _command_line_options()
    missing = sorted(f"{name} -> {flag(name)}" for name in fields if flag(name) not in options)
    assert not missing, missing


def test_the_table_says_each_field_as_its_option():
    assert as_options("`dp` needs exactly one of `noise_multiplier` or `target_epsilon`") == \
        "--dp needs exactly one of --sigma or --target-epsilon"
    assert as_options("`model_args` is for torchvision: and module: models; `defence` dropout; `l2`") == \
        "--model-arg is for torchvision: and module: models; --defence dropout; --weight-decay"
    text = "run `privaudit train --model mlp` first, or drop `seeds`"  # a command to run stays as written
    assert as_options(text) == "run `privaudit train --model mlp` first, or drop --seeds"
    assert as_options(as_options(text)) == as_options(text)


def test_below_the_api_the_field_through_the_api_and_the_command_line_the_option(tmp_path):
    with pytest.raises(ConfigError) as below:
        make_config(dataset="digits", dp=True)
    assert str(below.value) == "`dp` needs exactly one of `noise_multiplier` or `target_epsilon`"
    with pytest.raises(ConfigError) as api:
        privaudit.train(dataset="digits", defence="dpsgd", workdir=tmp_path)
    assert str(api.value) == "--dp needs exactly one of --sigma or --target-epsilon"
    code, _, err = run_cli("train", "--dataset", "digits", "--defense", "dpsgd", "--workdir", str(tmp_path))
    assert code == 2 and one_error_line(err) == "error: --dp needs exactly one of --sigma or --target-epsilon"
    with pytest.raises(ConfigError) as knob:
        make_config(dataset="digits", defence="mixup", knob=0)
    assert str(knob.value).startswith("`knob` for mixup is its alpha")
    code, _, err = run_cli("train", "--dataset", "digits", "--defense", "mixup", "--knob", "0",
                           "--workdir", str(tmp_path))
    assert code == 2 and one_error_line(err).startswith("error: --knob for mixup is its alpha")


def test_options_named_rewords_the_same_error_object():
    """The API re-raises the error it caught (its type, its extra fields), only reworded."""
    raised = DamagedArtifactError("`target` mlp-x is damaged", kind="model", folder="models/mlp-x")

    @options_named
    def command():
        raise raised

    with pytest.raises(DamagedArtifactError) as info:
        command()
    assert info.value is raised and str(raised) == "--target mlp-x is damaged"
    assert (raised.kind, raised.folder) == ("model", "models/mlp-x")
