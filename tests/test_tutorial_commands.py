"""The tutorial pages run as written: every command block of docs/tutorials/*.md and of
docs/getting-started.md is executed, in page order, at small settings, so that a page cannot
drift from the tool (docs/tutorials/digits.ipynb is executed by tests/test_tutorial.py).

How a page runs
---------------
The page's fenced blocks become one bash script, run by one ``bash`` in a fresh temporary
folder (so an ``export`` or a ``cd`` holds for the blocks after it, as in the reader's shell),
stopping at the first command that fails (``set -e``):

- a ```` ```bash ```` block runs as it stands, after the text substitutions of :data:`TEXT`
  (the data placeholder);
- a ```` ```python ```` block runs as ``python3 -`` in the shell's current folder, after the
  page's earlier python blocks (run again before it, so that it sees their names, as one
  notebook kernel would), after the substitutions of :data:`TEXT`;
- a ```` ```text ```` (or ``json``/``csv``) block is output the page shows, not run; a fence
  in any other language, or in none, or indented, fails the test (say which it is);
- a block right after ``<!-- not run in tests: REASON -->`` is not run (the test suite
  itself, a server): the reason is required, and any other HTML comment right before a fence
  fails the test, so that a typo cannot skip a block;
- a block right after ``<!-- tests: write NAME -->`` is a file the page asks the reader to
  create: its text is written to ``NAME`` in the current folder.

HTML comments do not render on the site (mkdocs, Python-Markdown) nor on GitHub.

Before the first block the folder holds :data:`READER_FILES`: tiny stand-ins for the reader's
own files that a page's commands name without making them (their images, weights, exported
logits).

Small settings
--------------
``privaudit``, ``python3``, ``python`` and ``pip`` resolve to shims in a folder first on
``PATH``. ``privaudit ARGS`` runs the command line with ARGS changed by
:func:`tutorial_runner.small_args` as the table :data:`SMALL` says (the changed line is
printed to the output):

- for a subcommand of the table, each of its options is set to the table's value, replacing
  the page's value if it gives one (``--width`` only for the built-in architectures: a
  ``torchvision:`` or ``module:`` model takes none);
- ``privaudit reproduce …`` gets ``--help`` (:data:`PARSE_ONLY`): the protocol has no size
  options (its smallest scale trains 180 models, and ``--dry-run`` times every recipe first,
  minutes), so its lines are only parsed, and their subcommands and options must exist
  (tests/test_reproduce.py runs the protocol on the digits);
- ``pip`` does nothing and says so: the package under test is installed already.

``privaudit`` and ``python3 -`` run in a child forked from a server that imported torch,
scikit-learn, matplotlib and privaudit once (tests/tutorial_runner.py: 2-5 s saved on each of
about 25 commands), with the shell's folder, environment, stdin, stdout and stderr; elsewhere
``python3`` is this interpreter. Every command runs on one thread (:data:`THREADS`).

The data: ``/path/to/data`` becomes a folder holding a CIFAR-10 stand-in in the exact
``cifar-10-batches-py`` layout (six pickled batches, 50 random 32x32 RGB images each) and a
Fashion-MNIST stand-in (``FashionMNIST/raw/``, four IDX files, 300 28x28 images). Nothing in
the tests' environment names a data folder (tests/conftest.py), so a command that does not
get it from the page looks in ``./data`` and fails, as it would for the reader.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tutorial_runner import SERVER_ENV, SETTINGS_ENV, small_args

RUNNER = Path(__file__).with_name("tutorial_runner.py")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted((DOCS / "tutorials").glob("*.md")) + [DOCS / "getting-started.md"]
PAGE_TIMEOUT_S = 600

# -- the substitutions (module docstring) ------------------------------------------------------

# privaudit SUBCOMMAND → {option: value}: set on every run, the page's own value replaced.
SMALL: dict[str, dict[str, str]] = {
    "audit": {"--epochs": "2", "--part-size": "60", "--width": "16",
              "--kappas": "1", "--sigmas": "1",  # three settings: the baseline, one MG noise, one DP-SGD
              "--attacks": "shadow,loss"},  # no reference pool, no canary model: an eighth of the training
    "train": {"--epochs": "2", "--part-size": "60", "--width": "16"},
    "attack": {"--pool-size": "4"},  # the pools and canaries of every target: `attack` runs them here
    "audit-model": {"--epochs": "2", "--pool-size": "2"},
}
# every spelling of an option of SMALL that the page may use instead (removed before it is set)
ALIASES = {"--attacks": ("--attacks", "--attack"), "--pool-size": ("--pool-size", "--references")}
# subcommands whose lines are only parsed (`--help` appended): no size option makes them small
PARSE_ONLY = ("reproduce",)
# text of a bash or python block → what the test runs instead ({data}: the stand-in data folder)
TEXT = {"/path/to/data": "{data}",
        "max_iter=500": "max_iter=30"}  # scikit-learn's training of the scan page's model: seconds, not a minute
# the environment of every command: one thread each. The suite shares the machine's cores, and
# models this small lose far more waiting for a second, busy core than they gain from it
# (measured on a shared 2-core machine: the your-model page in 34 s instead of 89 s).
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# language of a fence → what is done with it
RUN_LANGS = {"bash": "bash", "sh": "bash", "python": "python"}
SHOWN_LANGS = ("text", "json", "csv")


# -- the pages ---------------------------------------------------------------------------------

FENCE = re.compile(r"^```[ \t]*([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SKIP = re.compile(r"\s*not run in tests:\s*(.*?)\s*\Z", re.DOTALL)
WRITE = re.compile(r"\s*tests:\s*write\s+(\S+)\s*\Z")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int      # the line of the opening fence, counted from 1
    action: str    # "bash", "python", "write", "skip" or "shown"
    detail: str = ""  # the file of "write", the reason of "skip"


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page and what the test does with each."""
    indented = re.search(r"^[ \t]+```", text, re.MULTILINE)
    if indented:
        raise ValueError(f"line {text.count(chr(10), 0, indented.start()) + 1}: an indented ``` fence "
                         "(this test reads fences at the start of a line)")
    found = []
    for match in FENCE.finditer(text):
        lang, code = match.group(1).lower(), match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        before = text[:match.start()].rstrip()
        comment = before[before.rfind("<!--") + 4:-3] if before.endswith("-->") else None
        if comment is not None:
            skip, write = SKIP.fullmatch(comment), WRITE.fullmatch(comment)
            if skip:
                if not skip.group(1):
                    raise ValueError(f"line {line}: `not run in tests:` needs a reason")
                found.append(Block(lang, code, line, "skip", skip.group(1)))
            elif write:
                found.append(Block(lang, code, line, "write", write.group(1)))
            else:
                raise ValueError(f"line {line}: unknown comment before a block: <!--{comment}-->")
        elif lang in RUN_LANGS:
            found.append(Block(lang, code, line, RUN_LANGS[lang]))
        elif lang in SHOWN_LANGS:
            found.append(Block(lang, code, line, "shown"))
        else:
            raise ValueError(f"line {line}: a ``` block in {lang or 'no language'}: say bash or python (run), "
                             f"or {', '.join(SHOWN_LANGS)} (output)")
    return found


def page_script(name: str, found: list[Block], data: Path) -> str:
    """One bash script that runs the blocks of page ``name`` in order (module docstring)."""
    out = ["set -e -o pipefail", "PS4='+ [${SECONDS} s] '"]  # each traced command with the seconds so far
    python_so_far: list[str] = []
    for block in found:
        where = f"{name}:{block.line}"
        if block.action in ("skip", "shown"):
            out.append(f"echo {_q(f'### {where}: not run ({block.detail or block.action})')}")
            continue
        out.append(f"echo {_q(f'### {where}: {block.action} {block.detail}'.rstrip())}")
        if block.action == "write":
            out.append(f"cat > {_q(block.detail)} <<'__PRIVAUDIT_DOC_FILE__'\n{block.code}__PRIVAUDIT_DOC_FILE__")
        elif block.action == "python":
            python_so_far.append(_substituted(block.code, data))
            out.append(f"python3 - <<'__PRIVAUDIT_DOC_PY__'\n{''.join(python_so_far)}__PRIVAUDIT_DOC_PY__")
        else:
            out.append(f"set -x\n{_substituted(block.code, data)}{{ set +x; }} 2>/dev/null")
    return "\n".join(out) + "\n"


def _substituted(code: str, data: Path) -> str:
    for text, value in TEXT.items():
        code = code.replace(text, value.format(data=data))
    return code


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# -- the stand-ins -----------------------------------------------------------------------------

def _fake_cifar10(root: Path, per_batch: int = 50) -> None:
    """``root/cifar-10-batches-py`` as the official archive unpacks: five training batches and a
    test batch, each a pickled dict of uint8 rows of 3,072 values (channel-major 32x32) and labels."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"batch_label": name, "labels": [int(v) for v in rng.integers(0, 10, per_batch)],
                 "data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 "filenames": [f"{name}_{j}.png" for j in range(per_batch)]}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))


def _idx(a: np.ndarray) -> bytes:
    return bytes([0, 0, 8, a.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in a.shape) + a.tobytes()


def _fake_fashion_mnist(root: Path, n_train: int = 250, n_test: int = 50) -> None:
    """``root/FashionMNIST/raw/`` with torchvision's four IDX files of 28x28 images."""
    folder = root / "FashionMNIST" / "raw"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(_idx(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)))
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(_idx(rng.integers(0, 10, n).astype(np.uint8)))


def _digits_npz(path: Path) -> None:
    from sklearn.datasets import load_digits

    d = load_digits()
    np.savez(path, x=(d.images * 255 / 16).astype(np.uint8)[:, :, :, None], y=d.target)


def _photos(path: Path, classes: int = 4, per_class: int = 64, side: int = 8) -> None:
    from PIL import Image

    rng = np.random.default_rng(2)
    for c in range(classes):
        (path / f"class{c}").mkdir(parents=True)
        for j in range(per_class):
            Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path / f"class{c}" / f"{j}.png")


def _mymodels(path: Path) -> None:
    path.write_text(textwrap.dedent("""\
        from torch import nn


        def make_net(hidden=32, num_classes=10, input_shape=(3, 32, 32)):
            c, h, w = input_shape
            return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
        """))


def _resnet18_weights(path: Path) -> None:
    import torch

    from privaudit.models import build_model

    torch.manual_seed(0)
    torch.save(build_model("torchvision:resnet18", (3, 32, 32), 10).state_dict(), path)


def _logits(n: int = 100, classes: int = 10, seed: int = 3):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, 2 * n)
    logits = rng.normal(size=(2 * n, classes)).astype(np.float32)
    logits[np.arange(n), labels[:n]] += 2.0  # members: a little more confident
    return logits, labels


def _outputs_npz(path: Path) -> None:
    logits, labels = _logits()
    np.savez(path, logits_in=logits[:100], logits_out=logits[100:], labels_in=labels[:100], labels_out=labels[100:])


def _outputs_csv(path: Path) -> None:
    logits, labels = _logits(seed=4)
    rows = ["member,label," + ",".join(f"logit_{k}" for k in range(logits.shape[1]))]
    rows += [f"{int(i < 100)},{labels[i]}," + ",".join(f"{v:.5f}" for v in logits[i]) for i in range(len(labels))]
    path.write_text("\n".join(rows) + "\n")


# the reader's own files that a page's commands name without making them → their stand-ins
READER_FILES = {
    "scan-from-logits.md": {"my_model_outputs.npz": _outputs_npz, "outputs.csv": _outputs_csv},
    "your-model-and-data.md": {
        "my_images.npz": _digits_npz,          # the page makes it later; its first block uses it
        "photos": _photos,                     # folder:photos/, one sub-folder per class
        "mymodels.py": _mymodels,              # the page writes its own later
        "model.pt": _resnet18_weights,         # a torchvision ResNet-18 for CIFAR-10's 10 classes
        "members.npy": lambda p: np.save(p, np.arange(60)),  # the samples it trained on
    },
}


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    """The shims' folder (module docstring), the stand-in data folder and the environment of
    the pages' shell; the shims send their commands to a fork server (tests/tutorial_runner.py),
    stopped at the end."""
    root = tmp_path_factory.mktemp("tutorial-tools")
    bin_dir, data = root / "bin", root / "data"
    bin_dir.mkdir()
    _fake_cifar10(data)
    _fake_fashion_mnist(data)
    settings = {"small": SMALL, "aliases": ALIASES, "parse_only": PARSE_ONLY}
    sock_dir = tempfile.mkdtemp(prefix="privaudit-doc-")  # short: a Unix socket's path has ~100 bytes
    sock = os.path.join(sock_dir, "server")
    server = None
    if hasattr(os, "fork") and hasattr(socket, "send_fds"):
        server = subprocess.Popen([sys.executable, str(RUNNER), "serve", sock, json.dumps(settings)], text=True,
                                  stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env={**os.environ, **THREADS})
        if server.stdout.readline().strip() != "ready":
            server.kill()
            server, sock = None, None
    else:
        sock = None
    for name, kind in (("privaudit", "privaudit"), ("python3", "python"), ("python", "python")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "{RUNNER}" {kind} "$@"\n')
    (bin_dir / "pip").write_text('#!/bin/sh\necho "[small settings] pip $*: not run (the package under test is '
                                 'installed)" >&2\n')
    for shim in bin_dir.iterdir():
        shim.chmod(0o755)
    env = {**os.environ, **THREADS, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           SETTINGS_ENV: json.dumps(settings), **({SERVER_ENV: sock} if sock else {})}
    env.pop("PRIVAUDIT_DATA_DIR", None)
    yield env, data
    if server is not None:
        server.kill()
        server.wait()
    shutil.rmtree(sock_dir, ignore_errors=True)


def run_page(page: Path, name: str, folder: Path, env: dict, data: Path) -> subprocess.CompletedProcess:
    """Run the blocks of ``page`` (shown as ``name``) in ``folder`` with ``env``, after the page's
    reader files."""
    for file, make in READER_FILES.get(page.name, {}).items():
        make(folder / file)
    script = folder.parent / f"{page.stem}.sh"
    script.write_text(page_script(name, blocks(page.read_text(encoding="utf-8")), data))
    return subprocess.run(["bash", "--noprofile", "--norc", str(script)], cwd=folder, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=PAGE_TIMEOUT_S)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
@pytest.mark.slow
def test_every_command_block_of_the_page_runs(page, tools, tmp_path):
    env, data = tools
    folder = tmp_path / "reader"
    folder.mkdir()
    name = page.relative_to(ROOT).as_posix()
    start = time.perf_counter()
    proc = run_page(page, name, folder, env, data)
    print(f"{name}: {time.perf_counter() - start:.0f} s")
    tail = "\n".join(proc.stdout.splitlines()[-60:])
    assert proc.returncode == 0, f"{name} fails as written (exit {proc.returncode}):\n{tail}"
    found = blocks(page.read_text(encoding="utf-8"))
    assert any(b.action == "bash" for b in found), "the page runs no command block"
    assert f"### {name}:{found[-1].line}" in proc.stdout, "the page stopped before its last block"


# -- the mechanism, fast ----------------------------------------------------------------------

PAGE = """# A page

<!-- not run in tests: starts a server -->
```bash
serve
```

```bash
export X=1     # a comment
```

<!-- tests: write m.py -->
```python
VALUE = 2
```

```python
import m
```

```text
output
```
"""


def test_blocks_are_read_with_their_markers():
    found = blocks(PAGE)
    assert [(b.action, b.detail, b.line) for b in found] == [
        ("skip", "starts a server", 4), ("bash", "", 8), ("write", "m.py", 13), ("python", "", 17), ("shown", "", 21)]
    assert found[1].code == "export X=1     # a comment\n"


@pytest.mark.parametrize("text, match", [
    ("<!-- not run in test: typo -->\n```bash\nx\n```\n", "unknown comment"),
    ("<!-- not run in tests: -->\n```bash\nx\n```\n", "needs a reason"),
    ("```\nprivaudit audit\n```\n", "no language"),
    ("```console\n$ privaudit audit\n```\n", "console"),
    ("- a step:\n\n  ```bash\n  privaudit audit\n  ```\n", "indented"),
])
def test_a_block_is_never_skipped_silently(text, match):
    with pytest.raises(ValueError, match=match):
        blocks(text)


@pytest.mark.parametrize("argv, expected", [
    (["audit", "--model", "cnn", "--kappas", "0.5,1", "--epochs", "20", "--json"],
     ["audit", "--model", "cnn", "--json", "--epochs", "2", "--part-size", "60", "--width", "16",
      "--kappas", "1", "--sigmas", "1", "--attacks", "shadow,loss"]),
    (["audit", "--attack", "lira", "--attacks=all", "--part-size=100"],
     ["audit", "--epochs", "2", "--part-size", "60", "--width", "16", "--kappas", "1", "--sigmas", "1",
      "--attacks", "shadow,loss"]),
    (["train", "--model", "torchvision:resnet18", "--width", "8"],
     ["train", "--model", "torchvision:resnet18", "--width", "8", "--epochs", "2", "--part-size", "60"]),
    (["reproduce", "mg-noise", "--data-dir", "d"], ["reproduce", "mg-noise", "--data-dir", "d", "--help"]),
    (["scan", "x.npz"], ["scan", "x.npz"]),
    ([], []),
])
def test_small_settings(argv, expected):
    assert small_args(argv, SMALL, ALIASES, PARSE_ONLY) == expected


def test_a_page_runs_in_one_shell_and_stops_at_the_first_failure(tools, tmp_path):
    """`export` and `cd` carry over from block to block, python blocks see the earlier ones'
    names, a written file is there, and the first failing command fails the page."""
    env, data = tools
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        ```bash
        export GREETING=hello
        mkdir sub && cd sub
        ```

        <!-- tests: write m.py -->
        ```python
        VALUE = 2
        ```

        ```python
        import os
        import m
        x = m.VALUE * 3
        ```

        ```python
        open("out.txt", "w").write(f"{os.environ['GREETING']} {x} {os.path.basename(os.getcwd())}")
        ```

        ```bash
        test "$(cat out.txt)" = "hello 6 sub"
        ls /path/to/data/cifar-10-batches-py/test_batch
        false
        echo never
        ```
        """))
    folder = tmp_path / "reader"
    folder.mkdir()
    proc = run_page(page, "page.md", folder, env, data)
    assert proc.returncode != 0, proc.stdout
    assert (folder / "sub" / "out.txt").read_text() == "hello 6 sub"
    assert "cifar-10-batches-py/test_batch" in proc.stdout  # the data placeholder
    assert proc.stdout.rstrip().endswith("] false")  # the last command traced: `echo never` did not run


def test_a_data_folder_given_to_one_command_only_fails_the_next(tools, tmp_path):
    """The drift this test was written for (issue 42, item 7): `--data-dir` on one line holds
    for that line only, so the next command that reads CIFAR-10 looks in ./data and fails."""
    env, data = tools
    page = tmp_path / "page.md"
    page.write_text("```bash\nprivaudit train --data-dir /path/to/data\nprivaudit attack --target mlp\n```\n")
    folder = tmp_path / "reader"
    folder.mkdir()
    proc = run_page(page, "page.md", folder, env, data)
    assert proc.returncode != 0, proc.stdout
    assert "CIFAR-10 not found in ./data" in proc.stdout and "saved: models/target-mlp-cifar10" in proc.stdout


def test_without_the_server_a_command_runs_in_its_own_process(tools, tmp_path):
    """The client's fallback (no fork, or no server answers): `python -m privaudit` itself."""
    env, _ = tools
    env = {**env, SERVER_ENV: str(tmp_path / "gone")}
    proc = subprocess.run(["privaudit", "reproduce", "mg-noise"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "privaudit reproduce mg-noise --help" in proc.stderr and "--data-dir" in proc.stdout
