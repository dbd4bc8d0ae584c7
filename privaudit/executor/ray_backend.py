"""The Ray executor: the audit's jobs as Ray tasks on a local instance or a cluster.

The driver walks the job graph: a job is submitted as soon as the jobs it depends on have
finished, as a task asking for ``cpus_per_job`` CPUs (and one GPU when the device is CUDA).
Jobs whose artifacts already exist are not submitted (a rerun resumes); the report is
built by the driver. Every ``PRIVAUDIT_*`` environment variable of the driver is passed to
the workers (``runtime_env``), and each job runs with ``cpus_per_job`` torch threads, so a
job computes the same numbers as on the local executor with the same thread count.

Failures:

* a worker process that dies (killed, out of memory, node lost) is a system failure: Ray
  reruns the task, at most ``max_retries`` times;
* an exception raised by the job itself (bad input, a corrupt artifact) is deterministic:
  it is not retried and fails the audit once, with the job's own message.

Filesystems: when the workers see the driver's workspace (a probe file written by the
driver is read back by a task), they write artifacts there directly. Otherwise each task
gets its inputs as bytes (:mod:`privaudit.executor.bundle`), runs in a private temporary
workspace and returns its outputs, which the driver writes atomically.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from privaudit.errors import ConfigError, PrivauditError, brief
from privaudit.executor.bundle import pack, unpack
from privaudit.executor.jobs import is_done, run_job
from privaudit.executor.plan import Job
from privaudit.files.atomic import owner_tag, remove_orphans
from privaudit.pipeline.runs import DataCache
from privaudit.pipeline.workspace import Workspace

INSTALL_HINT = 'the Ray executor needs Ray: pip install "privaudit[ray]"'
DEFAULT_RETRIES = 3
_DATA: dict[tuple, DataCache] = {}  # per worker process: each dataset loaded once


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def _worker_job(job: Job, root: str | None, inputs, data_dir, download: bool, device: str, threads: int):
    """The task body: run ``job`` against the shared workspace at ``root``, or (``root`` None:
    the workers do not see the driver's) in a private one filled from ``inputs``, whose
    outputs go back as bytes. Returns the result, those outputs, the workspace's root and
    the id of the node that ran the job."""
    import ray

    data = _DATA.setdefault((str(data_dir), download), DataCache(data_dir, download))
    private = None if root is not None else private_workspace()
    try:
        base = root if root is not None else private
        assert base is not None  # private is made when root is None
        ws = Workspace(base)
        ws.ensure_writable()
        if private:
            unpack(ws, inputs)
        result = run_job(job, ws, data, torch.device(device), threads=threads)
        node = ray.get_runtime_context().get_node_id()
        return result, (pack(ws, job.outputs) if private else None), str(ws.root), node
    finally:
        if private:
            shutil.rmtree(private, ignore_errors=True)


PRIVATE_PREFIX = "privaudit-job-"


def private_workspace(tmp: str | None = None) -> str:
    """A new private workspace folder ``privaudit-job-<pid>@<host>-…`` in this node's temporary
    folder, after removing those that this host's dead processes left (a worker killed mid-job
    cannot remove its own, and the node's next job does: :func:`privaudit.files.atomic.remove_orphans`)."""
    tmp = tmp or tempfile.gettempdir()
    remove_orphans(Path(tmp), PRIVATE_PREFIX)
    return tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{owner_tag()}-", dir=tmp)


def _probe(path: str, token: str) -> bool:
    try:
        return Path(path).read_text() == token
    except OSError:
        return False


def _rebase(result: Any, worker_root: str, workspace: Workspace) -> Any:
    """Point the paths of a result computed in a worker's private workspace at the driver's."""
    def move(path: Path) -> Path:
        try:
            return workspace.root / Path(path).relative_to(worker_root)
        except ValueError:
            return path
    if isinstance(result, list):
        return [_rebase(r, worker_root, workspace) for r in result]
    if hasattr(result, "path"):  # RunResult, AttackResult
        return replace(result, path=move(result.path))
    return result


REACH_TIMEOUT_S = 10.0


def check_reachable(address: str | None, timeout: float = REACH_TIMEOUT_S) -> None:
    """A one-line error when a cluster address (``host:port`` or ``ray://host:port``) does not
    accept a connection within ``timeout`` seconds: ``ray.init`` itself keeps retrying an
    address that does not answer for minutes. ``None`` and ``auto`` (a local instance, or
    the one Ray recorded on this machine) are left to Ray."""
    if not address or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"`ray_address` {address!r} is not host:port or ray://host:port (or auto)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(f"the Ray cluster at {address} does not answer ({reason} from {host}:{port} within "
                          f"{timeout:g} s); start it with `ray start --head` or check `ray_address`") from None


@dataclass
class RayExecutor:
    """``address``: None starts (or joins, with ``RAY_ADDRESS``) a local instance; ``auto`` or
    ``ray://host:port`` joins a cluster. ``shared_fs``: None detects it."""

    address: str | None = None
    cpus_per_job: int = 1
    max_retries: int = DEFAULT_RETRIES
    shared_fs: bool | None = None
    name: str = "ray"
    #: after a run: the id of the node each job ran on (jobs done on the driver are absent)
    placements: dict[str, str] = field(default_factory=dict)

    def run(self, jobs: Sequence[Job], workspace: Workspace, data: DataCache, device: torch.device, *,
            on_start: Callable | None = None, on_epoch=None,
            on_job_done: Callable[[Job, bool], None] | None = None) -> dict[str, Any]:
        ray = _import_ray()
        # Ray prints worker failures ("(raylet) A worker died …") on stdout, which carries
        # --json documents: send whatever it prints while the audit runs to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            return self._run_with_ray(ray, jobs, workspace, data, device, on_job_done)

    def _run_with_ray(self, ray, jobs, workspace, data, device, on_job_done) -> dict[str, Any]:
        with self._session(ray):
            return self._run(ray, jobs, workspace, data, device, on_job_done)

    @contextlib.contextmanager
    def _session(self, ray):
        """Ray started (or joined) for the duration, and shut down after if this call started it."""
        started = not ray.is_initialized()
        if started:
            check_reachable(self.address or os.environ.get("RAY_ADDRESS"))
            env = {k: v for k, v in os.environ.items() if k.startswith("PRIVAUDIT_")}
            try:
                ray.init(address=self.address, runtime_env={"env_vars": env}, include_dashboard=False,
                         log_to_driver=False, configure_logging=False)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ConfigError(f"cannot start or join Ray at {self.address or 'a local instance'}: "
                                  f"{brief(exc)}") from None
        try:
            yield
        finally:
            if started:
                ray.shutdown()

    def map(self, fn: Callable, calls: Sequence[tuple], label: Callable[[int], str]) -> Iterator[tuple[int, Any]]:
        """``fn(*call)`` for every call as Ray tasks of ``cpus_per_job`` CPUs; yields (index,
        result) as each finishes. For independent work outside the job graph (the
        hidden-state reproduction's cells): ``fn`` and its arguments must be picklable and the
        workers must see any path among them. Failures as for jobs (module docstring)."""
        ray = _import_ray()
        with contextlib.redirect_stdout(sys.stderr), self._session(ray):
            task = ray.remote(fn).options(num_cpus=self.cpus_per_job, max_retries=self.max_retries,
                                          retry_exceptions=False)
            running = {task.remote(*call): i for i, call in enumerate(calls)}
            try:
                while running:
                    ready, _ = ray.wait(list(running), num_returns=1)
                    i = running.pop(ready[0])
                    yield i, self._get(ray, ready[0], label(i))
            finally:
                for ref in running:
                    ray.cancel(ref, force=True)

    def _shared(self, ray, workspace: Workspace) -> bool:
        if self.shared_fs is not None:
            return self.shared_fs
        token = secrets.token_hex(16)
        marker = (workspace.attacks / f".ray-probe-{token}").resolve()
        marker.write_text(token)
        try:
            return bool(ray.get(ray.remote(num_cpus=0)(_probe).remote(str(marker), token)))
        finally:
            marker.unlink(missing_ok=True)

    def _run(self, ray, jobs, workspace, data, device, on_job_done) -> dict[str, Any]:
        self.placements = {}
        shared = self._shared(ray, workspace)
        task = ray.remote(_worker_job).options(
            num_cpus=self.cpus_per_job, num_gpus=1 if device.type == "cuda" else 0,
            max_retries=self.max_retries, retry_exceptions=False)
        root = str(workspace.root.resolve())
        results: dict[str, Any] = {}
        pending = {job.id: job for job in jobs}
        running: dict[Any, Job] = {}

        def finish(job: Job, result: Any, reused: bool) -> None:
            results[job.id] = result
            if on_job_done:
                on_job_done(job, reused)

        try:
            while pending or running:
                while ready := [j for j in pending.values() if all(d in results for d in j.deps)]:
                    for job in ready:  # a job finished here on the driver can make more jobs ready
                        del pending[job.id]
                        if job.kind == "report" or is_done(job, workspace):
                            finish(job, run_job(job, workspace, data, device), job.kind != "report")
                            continue
                        inputs = None if shared else ray.put(pack(workspace, job.inputs))
                        ref = task.remote(job, root if shared else None, inputs, data.data_dir and str(data.data_dir),
                                          data.download, str(device), self.cpus_per_job)
                        running[ref] = job
                if not running:
                    if pending:  # nothing runnable and nothing running: a dependency is missing
                        raise PrivauditError(f"job graph is stuck at {sorted(pending)[0]}")
                    continue
                ready, _ = ray.wait(list(running), num_returns=1)
                job = running.pop(ready[0])
                result, outputs, worker_root, node = self._get(ray, ready[0], job.label)
                self.placements[job.id] = node
                if outputs is not None:
                    unpack(workspace, outputs)
                    result = _rebase(result, worker_root, workspace)
                finish(job, result, False)
        finally:
            for ref in running:
                ray.cancel(ref, force=True)
        return results

    def _get(self, ray, ref, label: str):
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, PrivauditError):
                raise type(cause)(f"{label}: {cause}") from None
            raise PrivauditError(f"{label} failed on a worker: {type(cause).__name__}: {brief(cause)}") from None
        except ray.exceptions.RayError as exc:
            first = brief(exc, 200)
            raise PrivauditError(f"{label}: the worker failed {self.max_retries + 1} times "
                                 f"({type(exc).__name__}: {first})") from None
