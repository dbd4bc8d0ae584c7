"""The command line as a new user meets it: start-up without heavy imports, every numeric
option range-checked, one name per idea, errors that name what the user typed, and the
rough edges of issue 13, each pinned by a test."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from cli_helpers import run_cli

import privaudit.executor.auditing
import privaudit.pipeline.attacking
import privaudit.pipeline.runs
from privaudit.cli import app
from privaudit.cli.progress import PlainProgress
from privaudit.core.config import MODELS, make_config
from privaudit.core.formatting import lower_bound, sig3

HEAVY = ("torch", "numpy", "pandas", "sklearn", "scipy", "opacus")


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


# ------------------------------------------------------------------ start-up

def _modules_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print('MODULES:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    line = res.stdout.rsplit("MODULES:", 1)[1].strip()
    return [m for m in line.split(",") if m]


def test_importing_the_cli_loads_no_heavy_library():
    assert _modules_after("import privaudit.cli") == []


@pytest.mark.slow
def test_opacus_loads_only_when_an_epsilon_is_asked_for():
    """The library an audit runs on loads without Opacus (its import costs ~1.2 s); the first ε
    loads it, on whichever thread asks."""
    assert "opacus" not in _modules_after("import privaudit.executor.auditing, privaudit.reporting.build, "
                                          "privaudit.executor")
    assert "opacus" in _modules_after("from privaudit.analysis.accounting import dpsgd_epsilon\n"
                                      "assert dpsgd_epsilon(1.0, 0.01, 100, 1e-5)[0] > 0")


@pytest.mark.parametrize("argv", [["--help"], ["epsilon", "--help"], ["audit", "--help"], ["train", "--epochs", "0"],
                                  ["audit", "--sigmas", "abc"], ["report", "--workdir", "/nonexistent/ws"],
                                  ["theory", "smoothing", "--seed", "-1"], ["attack"], ["bogus"]])
def test_help_and_refusals_answer_without_heavy_imports(argv):
    code = (f"sys.argv = ['privaudit', *{argv!r}]\nfrom privaudit.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass")
    assert _modules_after(code) == []


# ------------------------------------------------------------------ every numeric option is range-checked

class Accepted(BaseException):
    pass


def _accept(*args, **kwargs):
    raise Accepted


@pytest.fixture
def stubbed(monkeypatch, tmp_path):
    from privaudit.theorems import experiments
    for mod, name in ((privaudit.pipeline.runs, "ensure_model"), (privaudit.pipeline.attacking, "attack_target"),
                      (privaudit.executor.auditing, "run_audit")):
        monkeypatch.setattr(mod, name, _accept)
    for name in ("run_smoothing", "run_convergence", "run_federated", "run_masked_neurons", "run_all"):
        monkeypatch.setattr(experiments, name, _accept)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _numeric_options():
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        for sub, subcmd in (getattr(cmd, "commands", None) or {None: cmd}).items():
            for p in subcmd.params:
                annotation = (repr(getattr(getattr(p, "type_descriptor", None), "annotation", ""))
                              + str(getattr(p, "type", "")))
                kind = "int" if "int" in annotation.lower() else "float" if "float" in annotation.lower() else None
                if kind and getattr(p, "opts", None) and not getattr(p, "is_flag", False):
                    yield [name] + ([sub] if sub else []), p.opts[0], kind


NUMERIC = list(_numeric_options())
REQUIRED = {"epsilon": ["--defense", "dpsgd", "--batch-size", "10", "--dataset-size", "100", "--epochs", "1",
                        "--sigma", "1"], "attack": ["--target", "mlp"]}


def test_the_check_sees_every_numeric_option():
    options = {(" ".join(c), o) for c, o, _ in NUMERIC}
    assert len(options) >= 40
    for expected in [("train", "--epochs"), ("theory smoothing", "--seed"), ("theory smoothing", "--draws"),
                     ("epsilon", "--lr"), ("audit", "--cpus-per-job"), ("attack", "--pool-size")]:
        assert expected in options


@pytest.mark.parametrize("command, option, kind", NUMERIC, ids=[f"{' '.join(c)} {o}" for c, o, _ in NUMERIC])
def test_every_numeric_option_refuses_out_of_range_values(stubbed, command, option, kind):
    """-1 (every option here is a count, a size, a seed or a positive scale), a value far past
    any machine (10^20) and, for floats, nan and inf: each a one-line usage error naming the
    option, before any work (a stub would raise Accepted)."""
    required = REQUIRED.get(command[0], [])
    extra = [a for i, a in enumerate(required)       # the required options, less the one under test
             if a != option and not (i > 0 and required[i - 1] == option)]
    bad = ["-1", "100000000000000000000"] + (["nan", "inf"] if kind == "float" else [])
    for value in bad:
        code, out, err = run_cli(*command, *extra, option, value)
        assert code == 2, (command, option, value, out, err)
        assert option in one_error(err) or option.lstrip("-") in one_error(err), err


# ------------------------------------------------------------------ one name per idea, help that tells the truth

def _help(*args: str) -> str:
    code, out, err = run_cli(*args, "--help")
    assert code == 0, err
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())


def test_every_attacking_command_takes_attacks_with_the_attack_alias_and_one_default():
    root = typer.main.get_command(app)
    for name in ("attack", "audit"):
        param = next(p for p in root.commands[name].params if "--attacks" in p.opts)
        assert "--attack" in param.aliases and "--attack" not in param.opts
        assert list(param.default) == ["all"], (name, param.default)


def test_attack_help_lists_every_architecture():
    text = _help("attack")
    for model in MODELS:
        assert model in text


def test_help_keeps_literal_brackets():
    assert "privaudit[ray]" in _help("audit")


def _commands():
    """Every command as (argv words, click command): the top-level ones and theory's and reproduce's."""
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():
        for sub, subcmd in (getattr(cmd, "commands", None) or {None: cmd}).items():
            yield [name] + ([sub] if sub else []), subcmd


def _options(cmd):
    return [p for p in cmd.params if getattr(p, "opts", None) and p.param_type_name == "option"]


def test_every_command_shows_one_spelling_per_option_and_the_old_ones_still_parse():
    """Issue 42, item 9: one name per concept. Each option's help row shows one long
    spelling; the retired ones (--noise-multiplier, --references, --l2, --attack, …) appear
    nowhere in any help, and every hidden spelling still sets its option."""
    from privaudit.cli.options import OPTIONS

    names = {s.name for s in OPTIONS.values()}
    retired = {a for s in OPTIONS.values() for a in s.aliases} - names
    assert {"--noise-multiplier", "--references", "--l2", "--attack", "--defense", "--defenses"} <= retired
    tried = 0
    for argv, cmd in _commands():
        text = _help(*argv)
        for spelling in retired:
            assert not re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text), (argv, spelling)
        for p in _options(cmd):
            assert len([o for o in p.opts if o.startswith("--")]) == 1, (argv, p.opts)
            for alias in getattr(p, "aliases", ()):
                ctx = cmd.make_context(" ".join(argv), [alias, "2"], resilient_parsing=True)
                value = ctx.params[p.name]
                assert value in ("2", 2) or list(value) == ["2"], (argv, alias, value)
                tried += 1
    assert tried >= 20


def test_the_renamed_options_reach_the_same_setting(stubbed):
    """An old spelling is the option itself: the value it gives is checked as the new name's."""
    for argv, named in ((["train", "--dp", "--noise-multiplier", "0"], "--sigma"),
                        (["audit-model", "--weights", "w.pt", "--members", "0:9", "--references", "1"], "--pool-size"),
                        (["epsilon", "--defense", "noisycgd", "--batch-size", "10", "--dataset-size", "100",
                          "--epochs", "1", "--sigma", "1", "--lr", "1", "--l2", "0"], "--weight-decay")):
        code, _, err = run_cli(*argv)
        assert code == 2 and named in one_error(err), (argv, err)


def test_each_shared_option_has_its_help_written_once():
    """An option of the table (privaudit.cli.options.OPTIONS) shows the table's help, or help
    of its own that no other command repeats (a narrower meaning on that command)."""
    from privaudit.cli.options import OPTIONS

    table = {s.name: s.help for s in OPTIONS.values()}
    own: dict[tuple[str, str], set[str]] = {}
    for argv, cmd in _commands():
        for p in _options(cmd):
            if p.opts[0] in table and p.help != table[p.opts[0]]:  # theory's subcommands share their own
                own.setdefault((p.opts[0], p.help), set()).add(argv[0])
    copies = {key: where for key, where in own.items() if len(where) > 1}
    assert not copies, copies


def test_flags_show_no_value_type():
    for argv, _ in _commands():
        assert "<bool>" not in _help(*argv), argv
    assert "--dry-run Train nothing" in _help("train")


def test_version_prints_the_installed_version():
    from importlib import metadata

    code, out, err = run_cli("--version")
    assert code == 0 and out == f"privaudit {metadata.version('privaudit')}\n", (out, err)
    assert "--version" in _help()


def test_attacks_help_lists_every_accepted_attack():
    from privaudit.attacks.registry import CHOICES

    root = typer.main.get_command(app)
    for name in ("attack", "audit"):
        param = next(p for p in root.commands[name].params if "--attacks" in p.opts)
        for attack in CHOICES:
            assert re.search(rf"(?<![\w-]){re.escape(attack)}(?![\w-])", param.help), (name, attack)


def test_device_help_says_where_models_run_not_train():
    root = typer.main.get_command(app)
    param = next(p for p in root.commands["export-logits"].params if "--device" in p.opts)
    assert "train" not in param.help.lower()


# ------------------------------------------------------------------ the rough edges, one test each

def test_report_refuses_a_missing_workspace(tmp_path):
    code, _, err = run_cli("report", "--workdir", str(tmp_path / "nonexistent" / "ws"))
    assert code == 2 and str(tmp_path / "nonexistent" / "ws") in one_error(err)
    assert not (tmp_path / "nonexistent").exists()


def test_target_epsilons_and_sigmas_together_are_refused(stubbed):
    code, _, err = run_cli("audit", "--dataset", "digits", "--target-epsilons", "4", "--sigmas", "1")
    assert code == 2
    line = one_error(err)
    assert "--sigmas" in line and "--target-epsilons" in line


@pytest.mark.parametrize("argv, named", [
    (["audit", "--dataset", "digits", "--sigmas", "0"], "--sigmas"),
    (["audit", "--dataset", "digits", "--kappas", "-1"], "--kappas"),
    (["audit", "--dataset", "digits", "--target-epsilons", "0"], "--target-epsilons"),
])
def test_errors_name_the_flag_the_user_typed(stubbed, argv, named):
    code, _, err = run_cli(*argv)
    assert code == 2
    line = one_error(err)
    assert named in line and "--noise-multiplier" not in line


def test_noisycgd_on_the_mlp_reports_the_architecture_first(stubbed):
    code, _, err = run_cli("train", "--dataset", "digits", "--defense", "noisycgd")
    assert code == 2 and "convex-relu" in one_error(err)


def test_empty_paths_are_refused(stubbed):
    for argv in (["train", "--dataset", "digits", "--workdir", ""], ["report", "--workdir", " "],
                 ["train", "--data-dir", ""]):
        code, _, err = run_cli(*argv)
        assert code == 2 and "empty" in one_error(err), argv


def test_huge_sizes_are_refused_before_any_work(stubbed):
    for argv in (["train", "--epochs", "100000000000000"], ["train", "--width", "10000000"],
                 ["audit", "--batch-size", "1000000000"], ["theory", "convergence", "--n", "100000", "--m", "100000"],
                 ["theory", "masked-neurons", "--m", "100000", "--d", "100000"]):
        code, _, err = run_cli(*argv)
        assert code == 2, argv
        one_error(err)


def test_epsilon_states_its_smoothness_assumption_and_refuses_large_steps():
    args = ["epsilon", "--defense", "noisycgd", "--noise-multiplier", "15", "--batch-size", "1000",
            "--dataset-size", "60000", "--epochs", "400", "--l2", "0.174", "--json"]
    code, out, err = run_cli(*args, "--lr", "3.1e-4")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["epsilon"] == pytest.approx(1.336, abs=0.01)
    assert doc["assumes_smoothness_at_most"] == pytest.approx(2 / 3.1e-4 - 0.174)
    assert "smooth" in doc["assumption"]
    code, out, err = run_cli(*args, "--lr", "5")          # 2/η − λ = 0.226: no loss with data is that flat
    assert code == 2 and "--smoothness" in one_error(err)
    code, out, err = run_cli(*args, "--lr", "5", "--smoothness", "0.3")   # a stated β: the bound applies
    assert code == 0, err
    assert json.loads(out)["contraction"] == pytest.approx(max(1 - 5 * 0.174, abs(1 - 5 * 0.3)))


def test_lower_bounds_round_down_in_the_terminal_and_the_page():
    from privaudit.reporting import page_numbers
    for value, text in [(2.2799, "2.27"), (2.28, "2.28"), (0.004, "0.00"), (-0.001, "-0.01"), (12345.6, "1.23e+04")]:
        assert lower_bound(value) == text
        assert page_numbers.lb(value) == text
    assert sig3(3.0949) == page_numbers.sig3(3.0949) == "3.09"


def test_plain_progress_prints_one_line_per_model_and_at_most_one_a_minute():
    lines, now = [], [0.0]
    progress = PlainProgress(lines.append, clock=lambda: now[0])
    cfg = make_config(model="mlp", dataset="digits", kappa=0.5)
    progress.start(cfg)
    for epoch in range(1, 301):
        now[0] = epoch * 1.0                   # one epoch a second: 300 s in all
        progress.on_epoch(epoch, 300, 0.5)
    assert len([line for line in lines if line.startswith("training")]) == 4    # at 60, 120, 180, 240 s
    assert lines[-1].startswith("trained target mlp k0.5 (digits): 300 epochs in 300.0 s")


@pytest.mark.slow
def test_train_without_a_terminal_reports_each_model_in_plain_text(tmp_path):
    res = subprocess.run([sys.executable, "-m", "privaudit", "train", "--dataset", "digits", "--epochs", "2",
                          "--part-size", "60", "--width", "16", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "trained target mlp plain (digits): 2 epochs" in res.stderr
    assert "\x1b[" not in res.stderr and "━" not in res.stderr


def _trained(root: Path, *extra: str) -> None:
    code, _, err = run_cli("train", "--dataset", "digits", "--epochs", "2", "--part-size", "60", "--width", "16",
                           "--workdir", str(root), *extra)
    assert code == 0, err


@pytest.mark.slow
def test_attack_filters_by_dataset_and_shows_only_what_was_asked(tmp_path):
    _trained(tmp_path)
    _trained(tmp_path, "--kappa", "0.5")
    code, out, err = run_cli("attack", "--target", "mlp", "--attacks", "shadow", "--dataset", "digits",
                             "--workdir", str(tmp_path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["attacks"]) == 2
    for a in doc["attacks"]:
        assert set(a["metrics"]) == {"shadow"}     # loss and confidence were computed, not asked
    code, out, err = run_cli("attack", "--target", "mlp", "--attacks", "shadow", "--workdir", str(tmp_path))
    assert code == 0, err
    assert "loss" not in out.split("Membership inference")[1].split("shadow: AUC")[0]
    # no cifar10 targets: the filter says so, naming the option to drop
    code, _, err = run_cli("attack", "--target", "mlp", "--dataset", "cifar10", "--workdir", str(tmp_path))
    assert code == 2 and "--dataset" in one_error(err)


def _forge_cifar_target(root: Path) -> tuple[str, str]:
    """(digits target, a copy of it whose config says cifar10): a CIFAR-10 target without the
    data or the training, its manifest rewritten so that the copy is not 'damaged'."""
    import shutil

    from privaudit.files.integrity import MANIFEST, write_manifest
    from privaudit.pipeline.workspace import Workspace

    ws = Workspace(root)
    name = ws.model_names("target")[0]
    other = make_config(model="mlp", dataset="cifar10", width=16, part_size=60, epochs=2)
    shutil.copytree(ws.model_dir(name), ws.model_dir(other.run_name))
    raw = json.loads((ws.model_dir(name) / "config.json").read_text())
    raw.update({**other.to_dict(), "run_name": other.run_name, "config_hash": other.config_hash})
    (ws.model_dir(other.run_name) / "config.json").write_text(json.dumps(raw))
    (ws.model_dir(other.run_name) / MANIFEST).unlink()
    write_manifest(ws.model_dir(other.run_name))
    return name, other.run_name


def test_summary_shows_the_dataset_when_targets_span_more_than_one(tmp_path):
    from rich.console import Console

    from privaudit.api.attack import summary_rows
    from privaudit.cli.summary import summary_table
    from privaudit.pipeline.workspace import Workspace

    _trained(tmp_path)
    digits, cifar = _forge_cifar_target(tmp_path)
    ws = Workspace(tmp_path)

    def render(names):
        console = Console(width=200, record=True)
        console.print(summary_table(summary_rows(ws, [(n, {"shadow": {"auc": 0.5}}, {}) for n in names])))
        return console.export_text()

    assert "dataset" not in render([digits])
    both = render([digits, cifar])
    assert "dataset" in both and "digits" in both and "cifar10" in both


def test_missing_data_hint_names_options_that_attack_has(tmp_path):
    _trained(tmp_path)
    _forge_cifar_target(tmp_path)
    code, _, err = run_cli("attack", "--target", "mlp", "--attacks", "shadow", "--data-dir", str(tmp_path / "none"),
                           "--workdir", str(tmp_path))
    assert code == 2
    line = one_error(err)
    assert "--data-dir" in line and "--dataset digits" in line
    root = typer.main.get_command(app)
    options = {o for p in root.commands["attack"].params for o in getattr(p, "opts", [])}
    for hinted in re.findall(r"--[a-z-]+", line):
        assert hinted in options, hinted
    # and the hint works: the digits targets alone
    code, _, err = run_cli("attack", "--target", "mlp", "--attacks", "shadow", "--dataset", "digits",
                           "--workdir", str(tmp_path))
    assert code == 0, err


def test_theory_refreshes_the_main_report(tmp_path):
    code, _, err = run_cli("theory", "smoothing", "--kappas", "0.2", "--draws", "1000", "--workdir", str(tmp_path))
    assert code == 0, err
    page = (tmp_path / "reports" / "index.html").read_text()
    section = page.split('id="paper-smoothing"')[1].split("</section>")[0]
    assert "Not run yet" not in section


def test_terminal_tables_never_split_an_attack_name_at_80_columns(tmp_path):
    """The names stay whole (the numbers' headers wrap instead), and a TPR difference is in
    percentage points, as on the page."""
    from types import SimpleNamespace

    import pandas as pd
    from rich.console import Console

    from privaudit.api.attack import summary_rows
    from privaudit.cli.summary import summary_table, verdict_table
    from privaudit.core.formatting import difference
    from privaudit.pipeline.workspace import Workspace

    def render(table) -> list[str]:
        console = Console(width=80, record=True)
        console.print(table)
        return console.export_text().splitlines()

    _trained(tmp_path)
    name = next(p.name for p in (tmp_path / "models").iterdir() if p.name.startswith("target-"))
    metrics = {"shadow": {"auc": 0.58}, "lira-offline-global": {"tpr_at_0p1pct_fpr": 0.04, "auc": 0.66}}
    lines = render(summary_table(summary_rows(Workspace(tmp_path), [(name, metrics, {})])))
    assert any("lira-offline-global" in line for line in lines) and max(map(len, lines)) <= 80
    row = {"model": "mlp", "dataset": "digits", "attack": "lira-online-global", "comparison": "strongest attack",
           "metric": "tpr_at_0p1pct_fpr", "acc_low": 0.922, "acc_high": 0.944, "gap": 0.02419, "gap_lo": 0.005284,
           "gap_hi": 0.044685, "interval": "sampling (1 seed)", "verdict": "MG noise leaks less", "reason": ""}
    lines = render(verdict_table(SimpleNamespace(verdicts=pd.DataFrame([row, {**row, "metric": "auc"}]))))
    assert sum("lira-online-global" in line for line in lines) == 2 and max(map(len, lines)) <= 80
    assert any("+2.419 pp" in line for line in lines) and any("+0.024" in line and "pp" not in line for line in lines)
    assert difference("tpr_at_0p1pct_fpr", 0.02419, 0.005284, 0.044685) == ("+2.419 pp", "[+0.528, +4.469]")
    assert difference("auc", float("nan")) == ("—", "")


# ------------------------------------------------------------------ issue 42, item 10: the small ones

@pytest.mark.parametrize("argv, said", [
    (["audit", "--dataset", "digits", "--kappas", "0.5,0.5"], "--kappas lists 0.5 twice"),
    (["audit", "--dataset", "digits", "--sigmas", "1,1.0"], "--sigmas lists 1 twice"),
    (["audit", "--dataset", "digits", "--target-epsilons", "4,2,4"], "--target-epsilons lists 4 twice"),
    (["audit", "--dataset", "digits", "--defenses", "mixup", "--knobs", "mixup=0.2,0.2"],
     "--knobs mixup lists 0.2 twice"),
    (["audit", "--dataset", "digits", "--seeds", "0,0"], "--seeds lists 0 twice"),
    (["theory", "smoothing", "--kappas", "1,1"], "--kappas lists 1 twice"),
])
def test_every_grid_refuses_a_value_given_twice(stubbed, argv, said):
    code, _, err = run_cli(*argv)
    assert code == 2 and one_error(err) == f"error: {said}"


def _refuse(number: int):
    def refuse(*args, **kwargs):
        raise OSError(number, os.strerror(number))
    return refuse


@pytest.mark.parametrize("number", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_a_workspace_the_machine_cannot_write_exits_1(stubbed, monkeypatch, number):
    """README: exit status 1 is for a failure of the machine (a full disk, a read-only file
    system), 2 for bad input. A path under a file is bad input and stays 2."""
    import tempfile

    monkeypatch.setattr(tempfile, "mkstemp", _refuse(number))
    code, _, err = run_cli("train", "--dataset", "digits", "--workdir", str(stubbed / "ws"))
    assert code == 1 and os.strerror(number) in one_error(err) and "not writable" in one_error(err)
    monkeypatch.undo()
    (stubbed / "file").write_text("not a folder")
    code, _, err = run_cli("train", "--dataset", "digits", "--workdir", str(stubbed / "file" / "ws"))
    assert code == 2 and "is a file, not a folder" in one_error(err)


def test_a_full_disk_while_writing_exits_1(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    monkeypatch.setattr(os, "fsync", _refuse(errno.ENOSPC))
    code, _, err = run_cli("report", "--workdir", str(tmp_path))
    assert code == 1 and "No space left on device" in one_error(err)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_workspace_exits_1(tmp_path):
    (tmp_path / "models").mkdir()
    tmp_path.chmod(0o555)
    (tmp_path / "models").chmod(0o555)
    try:
        code, _, err = run_cli("report", "--workdir", str(tmp_path))
    finally:
        (tmp_path / "models").chmod(0o755)
        tmp_path.chmod(0o755)
    assert code == 1 and "not writable" in one_error(err)


def test_small_numbers_are_readable_in_a_table():
    from privaudit.cli.output import fmt

    assert fmt(1e-5, 4) == "1e-05" and fmt(2.5e-7) == "2.5e-07"
    assert fmt(0.5, 4) == "0.5000" and fmt(0.0, 4) == "0.0000" and fmt(0.00005, 4) == "0.0001"


def test_the_summary_orders_settings_by_their_numbers(tmp_path):
    """σ as trained (given, or calibrated to a target ε), and other defences' knobs, compare
    as numbers: σ=0.5 before σ=1.15, whatever order the targets come in."""
    from privaudit.api.attack import summary_rows
    from privaudit.cli.summary import summary_table
    from privaudit.files.atomic import write_json
    from privaudit.pipeline.workspace import Workspace

    ws = Workspace(tmp_path).ensure_writable()
    settings = [({"dp": True, "target_epsilon": 2.0}, 1.15), ({"dp": True, "noise_multiplier": 0.5}, 0.5),
                ({"defense": "input-noise", "knob": 10.0}, None), ({"defense": "input-noise", "knob": 2.0}, None)]
    names = []
    for kwargs, sigma in settings:
        cfg = make_config(dataset="digits", model="mlp", **kwargs)
        folder = ws.models / cfg.run_name
        folder.mkdir()
        write_json(folder / "config.json", {**cfg.to_dict(), "run_name": cfg.run_name, "config_hash": cfg.config_hash})
        write_json(folder / "metrics.json", {"test_accuracy": 0.9, **({"noise_multiplier": sigma} if sigma else {})})
        names.append(cfg.run_name)
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    targets = ws.resolve_targets("mlp")         # as `privaudit attack --target mlp` finds them
    assert sorted(targets) == sorted(names)
    console.print(summary_table(summary_rows(ws, [(n, {}, {}) for n in targets])))
    text = console.export_text()
    order = [text.index(s) for s in ("σ=2", "σ=10", "σ=0.5", "σ=1.15")]
    assert order == sorted(order), text


class _NotATensor:
    """Pickled into a weights file: torch's safe loader refuses it."""


def test_refused_weights_say_what_torch_met_without_escape_codes(tmp_path):
    import torch

    torch.save({"w": torch.zeros(2), "extra": _NotATensor()}, tmp_path / "model.pt")
    code, _, err = run_cli("audit-model", "--weights", str(tmp_path / "model.pt"), "--members", "0:10",
                           "--dataset", "digits", "--workdir", str(tmp_path))
    line = one_error(err)
    assert code == 2 and "\x1b" not in err
    assert "Unsupported global" in line and "_NotATensor was not an allowed global by default)" in line
    assert "two options" not in line and "weights_only" not in line    # no advice to load it anyway


def test_error_lines_carry_no_escape_codes_and_never_an_empty_reason(tmp_path, monkeypatch):
    import numpy as np

    from privaudit.errors import DataError, brief
    from privaudit.files.npfiles import load_npy

    assert brief(EOFError()) == "EOFError"
    assert brief(RuntimeError("a \x1b[1mbold\x1b[0m\n\tword")) == "a bold word"
    cut = brief(RuntimeError("One whole sentence that is long enough. " * 3 + "x" * 300), 100)
    assert cut.endswith("long enough.") and len(cut) <= 100
    np.save(tmp_path / "a.npy", np.zeros(3))

    def fails(*args, **kwargs):
        raise EOFError()

    monkeypatch.setattr(np, "load", fails)
    with pytest.raises(DataError) as info:
        load_npy(tmp_path / "a.npy", "logits_in")
    assert "()" not in str(info.value) and "EOFError" in str(info.value)

    from privaudit.cli.failures import handle_errors

    @handle_errors
    def coloured():
        raise DataError("ray::job() \x1b[36mfailed\x1b[39m here")

    with pytest.raises(typer.Exit), pytest.MonkeyPatch.context() as m:
        stderr = []
        m.setattr("privaudit.cli.failures.err.print", lambda text, **kw: stderr.append(text))
        coloured()
    assert stderr and "\x1b" not in stderr[0] and "ray::job() failed here" in stderr[0]


def test_one_channel_normalisation_says_one_value():
    from privaudit.errors import ConfigError
    from privaudit.scanning.external import channel_normaliser

    with pytest.raises(ConfigError) as info:
        channel_normaliser([0.1, 0.2], [1.0], (1, 8, 8))
    assert "1 or 1" not in str(info.value) and "take one value" in str(info.value)
    with pytest.raises(ConfigError, match="take 1 or 3 values"):
        channel_normaliser([0.1, 0.2], [1.0], (3, 8, 8))


def test_result_reprs_are_one_short_line():
    """repr() of an API result names its tables by their size and its paths, never a whole table."""
    import numpy as np
    import pandas as pd

    import privaudit
    from privaudit.api.report import WorkspaceReport
    from privaudit.api.results import ShortRepr

    for name in privaudit._LAZY:
        if name[0].isupper():
            cls = getattr(privaudit, name)
            assert issubclass(cls, ShortRepr) and cls.__repr__ is ShortRepr.__repr__, name
    table = pd.DataFrame(np.zeros((500, 12)), columns=[f"c{i}" for i in range(12)])
    text = repr(WorkspaceReport(table=table, verdicts=table.head(3), report_path=Path("ws/reports/index.html"),
                                csv_path=Path("ws/reports/tradeoff.csv")))
    assert "\n" not in text and len(text) < 250, text
    assert "table=<table 500 rows × 12 columns>" in text and "'ws/reports/index.html'" in text
    eps = privaudit.epsilon(defence="dpsgd", batch_size=100, dataset_size=1000, epochs=1, noise_multiplier=1.0)
    assert repr(eps).startswith(f"EpsilonResult(epsilon={eps.epsilon!r}, noise_multiplier=1.0, values={{")
