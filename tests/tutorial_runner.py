"""The helper of tests/test_tutorial_commands.py that runs a page's ``privaudit`` commands and
python blocks: a fork server, and the client that the page's shell calls as ``privaudit`` and
``python3``. Only the standard library at module level: a client starts in milliseconds.

Every ``privaudit`` command of the pages would otherwise start a Python that imports torch,
torchvision, scikit-learn, matplotlib and privaudit again, 2-5 s each on a 2-core machine, most
of a small command's time. The server imports them once (:data:`PRELOAD`), then serves one
request at a time: it forks, and the child takes over the client's stdin, stdout and stderr
(passed over the Unix socket), its working folder and environment, and runs the command line
as the console script does (:func:`privaudit.cli.entry`) or the python code read from stdin;
its exit status goes back to the client, which exits with it. The child is a fresh process
in all but the imports.

The shims run ``python tutorial_runner.py privaudit|python ARGS``; the server's socket is
``$PRIVAUDIT_DOC_SERVER`` and the small settings ``$PRIVAUDIT_DOC_SETTINGS`` (JSON). Where
fork or Unix sockets are missing, or no server answers, the client runs ``python -m privaudit``
(or the interpreter) itself.
"""

from __future__ import annotations

import json
import os
import socket
import sys

PRELOAD = ("numpy", "torch", "torchvision", "matplotlib.pyplot", "sklearn.neural_network",
           "sklearn.model_selection", "sklearn.linear_model", "scipy.stats", "pandas", "opacus",
           "privaudit.cli", "privaudit.api", "privaudit.pipeline.runs", "privaudit.executor.auditing",
           "privaudit.reporting.build", "privaudit.scanning.run")
_HEADER = 8  # bytes of the request's length
SERVER_ENV, SETTINGS_ENV = "PRIVAUDIT_DOC_SERVER", "PRIVAUDIT_DOC_SETTINGS"


def small_args(argv: list[str], small: dict, aliases: dict, parse_only: tuple) -> list[str]:
    """``privaudit`` arguments with the small settings of ``small`` set: each option of
    ``small[subcommand]`` (and its ``aliases``) removed with its value and set to the table's
    value, ``--width`` only for the built-in architectures (a ``torchvision:`` or ``module:``
    model takes none); a subcommand in ``parse_only`` gets ``--help``."""
    if not argv:
        return argv
    if argv[0] in parse_only:
        return [*argv, "--help"]
    args = list(argv)
    model = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--model"), None)
    model = model or next((a.split("=", 1)[1] for a in args if a.startswith("--model=")), "mlp")
    for option, value in small.get(argv[0], {}).items():
        if option == "--width" and ":" in model:
            continue  # your own architecture takes no --width
        names = aliases.get(option, (option,))
        kept, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in names:
                skip = True  # the option and its value
            elif not a.startswith(tuple(f"{n}=" for n in names)):
                kept.append(a)
        args = [*kept, option, value]
    return args


# -- the server --------------------------------------------------------------------------------

def serve(path: str, settings: dict) -> None:
    """Import :data:`PRELOAD`, listen on the Unix socket ``path`` and serve requests one at a
    time until killed. ``settings``: the keyword arguments of :func:`small_args` but ``argv``."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                request, fds = _receive(conn)
            except (OSError, ValueError):
                continue
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                _child(request, fds, settings)  # never returns
            for fd in fds:
                os.close(fd)
            _, status = os.waitpid(pid, 0)
            try:
                conn.sendall(str(os.waitstatus_to_exitcode(status)).encode())
            except OSError:
                pass


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < _HEADER or len(data) < _HEADER + int.from_bytes(data[:_HEADER], "big"):
        more = conn.recv(1 << 16)
        if not more:
            raise ValueError("truncated request")
        data += more
    if len(fds) != 3:
        raise ValueError("a request passes stdin, stdout and stderr")
    return json.loads(data[_HEADER:]), fds


def _child(request: dict, fds: list[int], settings: dict) -> None:
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path.insert(0, "")  # as `python -m` and `python -` have it: the current folder
        if request["kind"] == "python":
            sys.argv = ["-"]
            code = _run_python(sys.stdin.read())
        else:
            args = small_args(request["argv"], **settings)
            if args != request["argv"]:
                print("[small settings] privaudit " + " ".join(args), file=sys.stderr, flush=True)
            sys.argv = ["privaudit", *args]
            from privaudit.cli import entry

            try:
                entry()  # leaves the process itself on most paths
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # anything else the command raised: its traceback, as Python prints it
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _run_python(code: str) -> int:
    try:
        exec(compile(code, "<python block>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 0


# -- the client --------------------------------------------------------------------------------

def client(kind: str, argv: list[str], path: str | None, settings: dict) -> None:
    """What the page's shell runs as ``privaudit ARGV`` (``kind="privaudit"``) or as
    ``python3 ARGV`` (``kind="python"``; only ``python3 -`` goes to the server): the request to
    the server at ``path``; without one, the same in this process's place."""
    if path and hasattr(socket, "send_fds") and (kind == "privaudit" or argv == ["-"]):
        payload = json.dumps({"kind": kind, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
        except OSError:  # no server (any more): the command runs here instead
            conn.close()
        else:
            with conn:
                socket.send_fds(conn, [len(payload).to_bytes(_HEADER, "big") + payload], [0, 1, 2])
                answer = b""
                while chunk := conn.recv(64):
                    answer += chunk
            sys.exit(int(answer) if answer.strip().lstrip(b"-").isdigit() else 1)
    if kind == "python":
        os.execv(sys.executable, [sys.executable, *argv])
    args = small_args(argv, **settings)
    if args != argv:
        print("[small settings] privaudit " + " ".join(args), file=sys.stderr, flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "privaudit", *args])


if __name__ == "__main__":  # serve PATH SETTINGS_JSON, or privaudit|python ARGS
    if sys.argv[1] == "serve":
        serve(sys.argv[2], json.loads(sys.argv[3]))
    else:
        client(sys.argv[1], sys.argv[2:], os.environ.get(SERVER_ENV), json.loads(os.environ.get(SETTINGS_ENV, "{}")))
