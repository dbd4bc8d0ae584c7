"""An audit on a Ray cluster of several nodes (``ray.cluster_utils.Cluster``: a head that runs
no task and two worker nodes of one CPU each, every raylet with its own temporary folder),
its artifacts travelling through Ray, not a shared folder: the same table as the local
executor, jobs on both nodes, a worker killed mid-job retried, every job finished once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_executor import ATTACKS, DIGITS_SHAPES, _audit, _plan

from privaudit.executor import LocalExecutor, audit_jobs
from privaudit.executor.auditing import AuditHooks
from privaudit.executor.jobs import FAULT_ENV
from privaudit.executor.ray_backend import PRIVATE_PREFIX, private_workspace
from privaudit.files.atomic import folder_owner, owner_tag
from privaudit.files.integrity import verify_folder
from privaudit.pipeline.workspace import Workspace

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    marker = tmp_path / "killed"
    nodes = {}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "env_vars": {"TMPDIR": _dir(tmp_path, "head")}})
    try:
        for name in ("a", "b"):
            # each worker node's processes make their private workspaces in its own folder, and
            # the first training job to finish an epoch, on whichever node, kills its worker once
            env = {"TMPDIR": _dir(tmp_path, name), FAULT_ENV: f"train:@{marker}"}
            nodes[name] = c.add_node(num_cpus=1, env_vars=env)
        c.wait_for_nodes()
        yield c, marker
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


def _dir(root: Path, name: str) -> str:
    path = root / f"node-{name}"
    path.mkdir()
    return str(path)


def test_audit_across_nodes_travels_through_ray(cluster, tmp_path):
    from privaudit.executor.ray_backend import RayExecutor

    c, marker = cluster
    local = tmp_path / "local"
    _audit(local, LocalExecutor())
    executor = RayExecutor(address=c.address, cpus_per_job=1, shared_fs=False)
    done: list[str] = []
    _audit(tmp_path / "ray", executor, hooks=AuditHooks(on_job_done=lambda job, reused: done.append(job.id)))
    jobs = audit_jobs(_plan(), ATTACKS, DIGITS_SHAPES)
    assert ((tmp_path / "ray" / "reports" / "tradeoff.csv").read_bytes()
            == (local / "reports" / "tradeoff.csv").read_bytes())
    assert marker.exists()                                  # a worker really died in the middle of a job
    assert sorted(done) == sorted(j.id for j in jobs)       # every job finished once, the killed one included
    assert len(set(executor.placements.values())) == 2      # both worker nodes ran jobs (the head runs none)
    assert len(executor.placements) == len(jobs) - 1        # all but the report, which the driver builds
    ws = Workspace(tmp_path / "ray")
    folders = [p for p in ws.models.iterdir() if not p.name.startswith(".")]
    assert not [p for p in folders if "partial" in p.name]
    for folder in folders:
        assert verify_folder(folder, "model")               # each written once, whole, as its manifest says
    for name in ("a", "b"):
        # every private workspace was removed, but the killed worker's where no later job ran on
        # its node; the next job there removes that one
        node = tmp_path / f"node-{name}"
        left = [p for p in os.listdir(node) if p.startswith(PRIVATE_PREFIX)]
        assert len(left) <= 1 and all(not _alive(folder_owner(p, PRIVATE_PREFIX)[0]) for p in left)
        fresh = private_workspace(str(node))
        assert [p for p in os.listdir(node) if p.startswith(PRIVATE_PREFIX)] == [Path(fresh).name]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_private_workspaces_of_dead_processes_on_this_host_are_removed(tmp_path):
    host = owner_tag().split("@", 1)[1]
    dead = tmp_path / f"{PRIVATE_PREFIX}999999999@{host}-ab12"
    other_host = tmp_path / f"{PRIVATE_PREFIX}999999999@elsewhere-ab12"
    live = tmp_path / f"{PRIVATE_PREFIX}{os.getppid()}@{host}-cd34"           # the parent process is alive
    for folder in (dead, other_host, live):
        folder.mkdir()
    fresh = Path(private_workspace(str(tmp_path)))
    assert folder_owner(fresh.name, PRIVATE_PREFIX) == (os.getpid(), host)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fresh.name, other_host.name, live.name])
    assert folder_owner("torchinductor_root", PRIVATE_PREFIX) is None
