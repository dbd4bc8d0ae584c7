"""Bad input refused at once, in the user's words (issue part 6, "What a new user hit"): every
output path checked before any work; a file that is not what its name says named for what it
is, never with advice to enable pickle; shapes as the user gave them; no torch, pandas or
scikit-learn loaded before a refusal; and ``privaudit epsilon`` saying what each row is."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import one_error_line, run_cli

from privaudit.errors import ConfigError, DataError
from privaudit.files.atomic import check_output_file, check_output_folder
from privaudit.files.npfiles import OBJECTS, ids_problem, load_npy, npz_problem, open_npz, what_is
from privaudit.scanning import FILES
from privaudit.scanning.inputs import check, load

#: what a refusal must not have loaded (the attack library: nothing was computed)
NOT_BEFORE_A_REFUSAL = ("torch", "pandas", "sklearn", "scipy", "privaudit.scanning.run")
#: the refusals that read no array: they answer without NumPy too
WITHOUT_NUMPY = {"scan: missing input", "scan: --out an existing file", "scan: --out under a file",
                 "scan: a result file is a folder", "export-logits: --out a folder",
                 "export-logits: --out under a file",
                 "export-logits: no such target", "audit-model: missing weights", "audit-model: missing members file",
                 "audit-model: --out an existing file", "train: npz dataset missing", "train: npz dataset is text",
                 "attack: no such target", "audit: empty --kappas", "audit: bogus --canaries",
                 "audit: --workdir under a file"}


def _arrays(n=20, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    return {"logits_in": rng.normal(size=(n, classes)), "labels_in": rng.integers(0, classes, n),
            "logits_out": rng.normal(size=(n, classes)), "labels_out": rng.integers(0, classes, n)}


@pytest.fixture
def files(tmp_path):
    """A good scan input and the bad files of the issue, in one folder."""
    np.savez(tmp_path / "good.npz", **_arrays())
    (tmp_path / "text.npz").write_text("member,label,logit_0\n1,0,0.5\n")
    empty = _arrays()
    empty["logits_in"], empty["labels_in"] = np.zeros((0, 10)), np.zeros(0, np.int64)
    np.savez(tmp_path / "empty.npz", **empty)
    (tmp_path / "blocker").write_text("a file, not a folder")
    npy = tmp_path / "npy"
    npy.mkdir()
    for k, v in _arrays().items():
        np.save(npy / f"{k}.npy", v)
    (npy / "logits_in.npy").write_text("not an array")
    bad = tmp_path / "truncated"
    bad.mkdir()
    for k, v in _arrays().items():
        np.save(bad / f"{k}.npy", v)
    raw = (bad / "logits_out.npy").read_bytes()
    (bad / "logits_out.npy").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "ws" / "models").mkdir(parents=True)
    (tmp_path / "results" / "attacks.csv").mkdir(parents=True)
    (tmp_path / "folder.npz").mkdir()
    np.savez(tmp_path / "float.npz", x=np.zeros((6, 8, 8, 3), np.float32), y=np.arange(6) % 2)
    np.savez(tmp_path / "short.npz", x=np.zeros((6, 8, 8, 3), np.uint8), y=np.arange(5) % 2)
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# (name, argv with {d} for the folder, a fragment the error line must hold, fragments it must not);
# those that read arrays last (they load NumPy, which stays loaded for the cases after them)
CASES = [
    ("scan: missing input", ["scan", "{d}/missing.npz", "--out", "{d}/r"], "scan input", ()),
    ("scan: --out an existing file", ["scan", "{d}/good.npz", "--out", "{d}/blocker"],
     "blocker is an existing file, not a folder", ()),
    ("scan: --out under a file", ["scan", "{d}/good.npz", "--out", "{d}/blocker/r"],
     "blocker is a file, not a folder", ()),
    ("scan: a result file is a folder", ["scan", "{d}/good.npz", "--out", "{d}/results"],
     "attacks.csv is a folder", ()),
    ("export-logits: --out a folder", ["export-logits", "t", "--out", "{d}/folder.npz", "--workdir", "{d}/ws"],
     "is a folder; it must name the file to write", ()),
    ("export-logits: --out under a file", ["export-logits", "t", "--out", "{d}/blocker/t.npz", "--workdir", "{d}/ws"],
     "blocker is a file, not a folder", ()),
    ("export-logits: no such target", ["export-logits", "t", "--out", "{d}/t.npz", "--workdir", "{d}/ws"],
     "no model folder", ()),
    ("audit-model: missing weights", ["audit-model", "--weights", "{d}/w.pt", "--members", "0:10", "--dataset",
                                      "digits", "--workdir", "{d}/ws"], "weights file", ()),
    ("audit-model: missing members file", ["audit-model", "--weights", "{d}/good.npz", "--members", "{d}/m.npy",
                                           "--dataset", "digits", "--workdir", "{d}/ws"], "--members: file", ()),
    ("audit-model: --out an existing file", ["audit-model", "--weights", "{d}/good.npz", "--members", "0:10",
                                             "--dataset", "digits", "--workdir", "{d}/ws", "--out", "{d}/blocker"],
     "blocker is an existing file", ()),
    ("train: npz dataset missing", ["train", "--dataset", "npz:{d}/missing.npz", "--workdir", "{d}/ws"],
     "no such file", ()),
    ("train: npz dataset is text", ["train", "--dataset", "npz:{d}/text.npz", "--workdir", "{d}/ws"],
     "not a NumPy .npz archive", ("allow_pickle",)),
    ("attack: no such target", ["attack", "--target", "no-such-run", "--workdir", "{d}/ws"],
     "no target named 'no-such-run'", ()),
    ("audit: empty --kappas", ["audit", "--dataset", "digits", "--kappas", "", "--workdir", "{d}/ws", "--dry-run"],
     "--kappas is empty", ()),
    ("audit: bogus --canaries", ["audit", "--dataset", "digits", "--canaries", "bogus", "--workdir", "{d}/ws"],
     "--canaries': takes KIND:N", ()),
    ("audit: --workdir under a file", ["audit", "--dataset", "digits", "--workdir", "{d}/blocker/ws", "--dry-run"],
     "blocker is a file, not a folder", ()),
    ("scan: text file named .npz", ["scan", "{d}/text.npz", "--out", "{d}/r"],
     "text.npz: not a NumPy .npz archive (a zip of .npy files): it is text", ("allow_pickle", "pickle")),
    ("scan: (0, 10) logits", ["scan", "{d}/empty.npz", "--out", "{d}/r"],
     "logits_in: has 0 rows (shape (0, 10))", ("(0, 1, 10)",)),
    ("scan: .npy that is text", ["scan", "{d}/npy", "--out", "{d}/r"],
     "logits_in: not a NumPy .npy file: it is text", ("allow_pickle", "pickle")),
    ("scan: truncated .npy", ["scan", "{d}/truncated", "--out", "{d}/r"],
     "logits_out: a damaged or truncated .npy file", ("allow_pickle",)),
    ("audit: no CIFAR-10 in --data-dir", ["audit", "--data-dir", "{d}/nodata", "--workdir", "{d}/ws", "--dry-run"],
     "CIFAR-10 not found in", ()),
    ("audit: npz images as floats", ["audit", "--dataset", "npz:{d}/float.npz", "--workdir", "{d}/ws"],
     "x must be uint8 pixel values (0-255), got float32", ()),
    ("train: npz labels one short", ["train", "--dataset", "npz:{d}/short.npz", "--workdir", "{d}/ws"],
     "y must have shape (6,), got (5,)", ()),
]


def test_bad_input_is_refused_with_exit_2_before_torch_and_before_any_work(files):
    """Every case in one fresh interpreter (as the console script runs), in turn: exit 2, one
    ``error:`` line naming the problem, nothing written, and after each refusal none of torch,
    pandas, scikit-learn, SciPy or the attack library loaded (the cases are ordered so that
    those that read no array come first, and are seen to answer without NumPy as well)."""
    cases = [[a.format(d=files) for a in argv] for _, argv, _, _ in CASES]
    probe = (
        "import contextlib, io, json, sys\n"
        "from privaudit.cli import main\n"
        f"heavy = {NOT_BEFORE_A_REFUSAL + ('numpy',)!r}\n"
        "results = []\n"
        f"for argv in {cases!r}:\n"
        "    sys.argv = ['privaudit', *argv]\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main()\n"
        "            code = 0\n"
        "        except SystemExit as exc:\n"
        "            code = exc.code\n"
        "    results.append([code, err.getvalue(), [m for m in heavy if m in sys.modules]])\n"
        "print('RESULTS:' + json.dumps(results))\n")
    before = _snapshot(files)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600,
                          cwd=files)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.rsplit("RESULTS:", 1)[1])
    for (name, _, fragment, absent), (code, err, loaded) in zip(CASES, results):
        assert code == 2, (name, err)
        line = one_error_line(err)
        assert fragment in line, (name, line)
        for word in absent:
            assert word not in line, (name, line)
        assert loaded in ([], ["numpy"]), (name, loaded)
        assert name not in WITHOUT_NUMPY or loaded == [], (name, loaded)
    assert _snapshot(files) == before                       # nothing written, nothing changed
    assert not (files / "r").exists() and not (files / "t.npz").exists()
    assert sorted(p.name for p in (files / "ws").iterdir()) == ["models"]
    assert sorted(p.name for p in (files / "results").iterdir()) == ["attacks.csv"]


def test_scan_refuses_an_unwritable_out_folder_before_reading_the_input(files, monkeypatch):
    """A folder that cannot be written (here: the probe file cannot be created, as on a
    read-only file system or without permission) is refused before the input is read."""
    import privaudit.scanning.inputs as inputs

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    def never(*args, **kwargs):
        raise AssertionError("the input was read before the output folder was checked")

    monkeypatch.setattr(inputs, "load", never)
    monkeypatch.setattr(tempfile, "mkstemp", denied)
    code, out, err = run_cli("scan", str(files / "good.npz"), "--out", str(files / "new" / "r"))
    assert code == 1  # the machine refused (README: exit status 1), not the input
    line = one_error_line(err)
    assert f"folder {files} is not writable (Permission denied)" in line and "--out" in line
    assert not (files / "new").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders")
def test_scan_refuses_a_read_only_out_folder(files):
    locked = files / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code, out, err = run_cli("scan", str(files / "good.npz"), "--out", str(locked / "r"))
    finally:
        locked.chmod(0o755)
    assert code == 1 and "is not writable" in one_error_line(err)
    assert list(locked.iterdir()) == []


def test_api_scan_checks_out_before_reading(files, monkeypatch):
    import privaudit
    import privaudit.scanning.inputs as inputs

    monkeypatch.setattr(inputs, "load", lambda *a, **k: pytest.fail("read before the output was checked"))
    with pytest.raises(ConfigError, match="is an existing file"):
        privaudit.scan(files / "good.npz", out=files / "blocker")


def test_scan_still_writes_into_a_new_nested_folder(files):
    code, out, err = run_cli("scan", str(files / "good.npz"), "--out", str(files / "a" / "b" / "r"), "--json")
    assert code == 0, err
    assert sorted(p.name for p in (files / "a" / "b" / "r").iterdir()) == sorted(FILES)


# -- output paths ----------------------------------------------------------------------------

def test_output_path_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "d" / "attacks.csv").mkdir(parents=True)
    assert check_output_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()                       # checked, not created
    assert check_output_file(tmp_path / "f") == tmp_path / "f"   # an existing file is replaced when written
    assert check_output_file(tmp_path / "new" / "x.npz") == tmp_path / "new" / "x.npz"
    for call, message in [
        (lambda: check_output_folder(tmp_path / "f"), "`out` {p}/f is an existing file, not a folder"),
        (lambda: check_output_folder(tmp_path / "f" / "r"), "`out` {p}/f/r: {p}/f is a file, not a folder"),
        (lambda: check_output_folder(tmp_path / "d", files=("attacks.csv",)),
         "`out` {p}/d: {p}/d/attacks.csv is a folder"),
        (lambda: check_output_file(tmp_path / "d"), "`out` {p}/d is a folder; it must name the file to write"),
        (lambda: check_output_file(tmp_path / "f" / "x.npz", "--into"), "--into {p}/f/x.npz: {p}/f is a file"),
    ]:
        with pytest.raises(ConfigError) as exc:
            call()
        assert str(exc.value).startswith(message.format(p=tmp_path)), str(exc.value)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="broken symbolic link"):
        check_output_folder(tmp_path / "dangling" / "r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "dangling", "f"]  # no probe file left behind


# -- what a file is --------------------------------------------------------------------------

def test_files_that_are_not_what_their_name_says(tmp_path):
    cases = {"text.npz": b"a,b\n1,2\n", "empty.npz": b"", "pickle.npz": pickle.dumps({"a": 1}),
             "gzip.npz": b"\x1f\x8b\x08\x00rest", "binary.npz": bytes(range(200, 256))}
    said = {"text.npz": "it is text", "empty.npz": "it is empty (0 bytes)", "pickle.npz": "it is a Python pickle",
            "gzip.npz": "it is gzip-compressed", "binary.npz": "it is unrecognised binary data"}
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
        with pytest.raises(DataError) as exc:
            open_npz(tmp_path / name, name)
        text = str(exc.value)
        assert text == f"{name}: not a NumPy .npz archive (a zip of .npy files): {said[name]}", text
        assert "allow_pickle" not in text
    np.save(tmp_path / "one.npy", np.zeros(3))
    (tmp_path / "one.npz").write_bytes((tmp_path / "one.npy").read_bytes())
    assert npz_problem(tmp_path / "one.npz").endswith("it is a single .npy array")
    np.savez(tmp_path / "good.npz", a=np.zeros(3))
    (tmp_path / "cut.npz").write_bytes((tmp_path / "good.npz").read_bytes()[:60])
    assert npz_problem(tmp_path / "good.npz") is None
    assert "damaged or truncated" in npz_problem(tmp_path / "cut.npz")
    (tmp_path / "zip.npy").write_bytes((tmp_path / "good.npz").read_bytes())
    with pytest.raises(DataError, match=r"not a NumPy .npy file: it is a zip archive \(an .npz archive\? name it"):
        load_npy(tmp_path / "zip.npy", "x")
    assert what_is("naïve text".encode()) == "text"


def test_only_a_real_object_array_is_said_to_hold_python_objects(tmp_path):
    a = _arrays()
    a["labels_in"] = np.array([object()] * 20, dtype=object)
    np.savez(tmp_path / "objects.npz", **a)          # np.savez pickles an object array inside a valid archive
    with pytest.raises(DataError) as exc:
        load(tmp_path / "objects.npz")
    assert str(exc.value) == f"labels_in: {OBJECTS}" and "allow_pickle" not in str(exc.value)
    np.save(tmp_path / "objects.npy", np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="holds Python objects, which privaudit does not load"):
        load_npy(tmp_path / "objects.npy", "x")
    with zipfile.ZipFile(tmp_path / "raw.npz", "w") as z:  # a member that is no .npy at all
        z.writestr("logits_in.npy", b"just bytes")
    with pytest.raises(DataError, match="logits_in: not a NumPy array inside raw.npz"):
        load(tmp_path / "raw.npz")


def test_sample_index_arguments_that_name_no_file(tmp_path):
    (tmp_path / "text.npy").write_text("1 2 3")
    assert ids_problem("0:100", "--members") is None and ids_problem("3, 17,42", "--members") is None
    assert ids_problem(str(tmp_path / "m.npy"), "--members") == (
        f"--members: file {tmp_path / 'm.npy'} does not exist (give an .npy or text file of sample indices, "
        "a range a:b or a list i,j,k)")
    assert "is a folder" in ids_problem(str(tmp_path), "--non-members")
    assert ids_problem(str(tmp_path / "text.npy"), "--members").endswith("not a NumPy .npy file: it is text")


# -- shapes as the user gave them --------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (dict(logits_in=np.zeros((0, 10)), labels_in=np.zeros(0, int)),
     "logits_in: has 0 rows (shape (0, 10)); it needs the outputs of at least one sample"),
    (dict(logits_in=np.zeros((1, 10)), labels_in=np.zeros(1, int)),
     "logits_in: 1 member (shape (1, 10)); a scan needs at least 2 members and 2 non-members"),
    (dict(logits_out=np.zeros((20, 11))),
     "logits_out: shape (20, 11) does not fit the members' logits_in (20, 10): expected (n, 10)"),
    (dict(logits_in=np.zeros((20, 1))), "logits_in: needs at least 2 classes in the last axis, got shape (20, 1)"),
    (dict(labels=np.zeros(40, int), reference_logits=np.zeros((4, 40, 11)), keep=np.zeros((4, 40), bool)),
     "reference_logits: shape (4, 40, 11) does not fit the audited model's logits_in (20, 10): expected (M, 40, 10)"),
    (dict(labels=np.zeros(40, int), reference_logits=np.zeros((4, 40, 10)), keep=np.zeros((4, 40), bool),
          population_logits=np.zeros((7, 11)), reference_population_logits=np.zeros((4, 7, 10)),
          population_labels=np.zeros(7, int)),
     "population_logits: shape (7, 11) does not fit reference_logits (4, 40, 10): expected (Z, 10)"),
    (dict(labels=np.zeros(40, int), reference_logits=np.zeros((4, 40, 10)), keep=np.zeros((4, 40), bool),
          population_logits=np.zeros((7, 10)), reference_population_logits=np.zeros((3, 7, 10)),
          population_labels=np.zeros(7, int)),
     "reference_population_logits: expected shape (4, 7, 10) (4 reference models, 7 population samples), "
     "got (3, 7, 10)"),
])
def test_shape_errors_speak_the_users_shapes(change, message):
    a = {**_arrays(), **change}
    if "labels" in change:  # the shared labels agree with labels_in / labels_out
        a["labels"] = np.r_[a["labels_in"], a["labels_out"]]
    with pytest.raises(DataError) as exc:
        check(a)
    assert str(exc.value).startswith(message), str(exc.value)
    assert ", 1, " not in str(exc.value)  # never the internal (n, A, C) with its query axis


def test_a_csv_with_one_side_missing_says_so(tmp_path):
    (tmp_path / "all_members.csv").write_text("member,label,logit_0,logit_1\n1,0,1,0\n1,1,0,1\n1,0,2,0\n")
    with pytest.raises(DataError, match="has 3 member rows and 0 non-member rows; a scan needs at least 2 of each"):
        load(tmp_path / "all_members.csv")


# -- privaudit epsilon says what each row is ----------------------------------------------------

def _rendered(table, width: int) -> str:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, file=sink)
        console.print(table)
    return " ".join(console.export_text().split())  # words, whatever the wrapping


def test_epsilon_rows_say_what_they_are_and_json_keeps_its_keys():
    from privaudit.cli.epsilon import LABELS, epsilon_table

    args = ["epsilon", "--batch-size", "10", "--dataset-size", "100", "--epochs", "1", "--noise-multiplier", "2"]
    code, out, err = run_cli(*args, "--defense", "dpsgd", "--json")
    assert code == 0, err
    dpsgd = json.loads(out)
    assert {"epsilon", "epsilon_replace_one", "epsilon_replace_one_sigma_half", "accountant_replace_one_sigma_half",
            "noise_multiplier", "sample_rate", "steps", "adjacency"} <= set(dpsgd)  # the stable --json keys
    code, out, err = run_cli(*args, "--defense", "noisycgd", "--lr", "0.01", "--l2", "0.1", "--json")
    assert code == 0, err
    noisycgd = json.loads(out)
    assert {"dpsgd_same_noise_epsilon_replace_one", "dpsgd_same_noise_epsilon_replace_one_sigma_half", "mu",
            "contraction", "assumes_smoothness_at_most"} <= set(noisycgd)
    for doc in (dpsgd, noisycgd):
        shown = {k for k in doc if k != "phase_seconds"}
        assert shown <= set(LABELS), shown - set(LABELS)    # every printed key has words
        narrow = _rendered(epsilon_table({k: doc[k] for k in shown}, width=80), 80)
        assert "sigma_half" not in narrow and "--json gives each row under its key" in narrow
        wide = _rendered(epsilon_table({k: doc[k] for k in shown}, width=160), 160)
        for key in shown:
            assert key in wide                               # a wide table names each row's --json key too
    # the rows without the key column (a narrow terminal), rendered wide so that no label wraps
    narrow = _rendered(epsilon_table({k: dpsgd[k] for k in dpsgd if k != "phase_seconds"}, width=80), 200)
    assert "the paper's stand-in: add-remove ε at σ/2" in narrow and "(an upper bound" in narrow
    assert "ε at δ, replace-one adjacency, exact (PLD" in narrow and "add-remove adjacency (what train" in narrow
    code, out, err = run_cli(*args, "--defense", "dpsgd")
    assert code == 0, err
    assert all(word in out.split() for word in ("stand-in", "σ/2", "replace-one", "add-remove"))
    bound = epsilon_table({"defense": "dpsgd", "epsilon_replace_one": 1500.0}, width=80)
    assert "the σ/2 upper bound" in _rendered(bound, 200)  # over 1,000 the exact PLD is not computed
