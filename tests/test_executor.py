"""The audit as a job graph, run locally and on a local Ray instance (2 CPUs): identical
tables, a worker killed mid-job, an interrupted driver, failures that are not retried."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.core.config import make_config
from privaudit.errors import ArtifactError, ConfigError
from privaudit.executor import LocalExecutor, audit_jobs, make_executor
from privaudit.executor.auditing import AuditHooks, audit_plan, run_audit
from privaudit.executor.bundle import pack, unpack
from privaudit.executor.jobs import FAULT_ENV, is_done
from privaudit.files.integrity import write_manifest
from privaudit.pipeline.attacking import AttackPlan
from privaudit.pipeline.runs import DataCache
from privaudit.pipeline.workspace import Workspace

CPU = torch.device("cpu")
ATTACKS = AttackPlan.from_choices(["shadow", "lira", "one-run"], 4)
DIGITS_SHAPES = {"digits": ((1, 8, 8), 1797)}


def _plan(seed: int = 0, epochs: int = 3):
    return audit_plan(make_config(model="mlp", dataset="digits", epochs=epochs, seed=seed), [0.5], [1.0])


def _audit(root: Path, executor=None, seed: int = 0, hooks=None, attacks=ATTACKS, epochs: int = 3):
    ws = Workspace(root).ensure_writable()
    return run_audit(_plan(seed, epochs), ws, DataCache(), CPU, hooks, attacks, executor=executor)


# ---------------------------------------------------------------- the graph (no Ray needed)

def test_job_graph_dependencies_and_order():
    jobs = audit_jobs(_plan(), ATTACKS, DIGITS_SHAPES)
    ids = [j.id for j in jobs]
    assert len(ids) == len(set(ids))
    position = {j.id: i for i, j in enumerate(jobs)}
    for job in jobs:
        assert all(position[d] < position[job.id] for d in job.deps)      # dependencies first
    kinds = [j.kind for j in jobs]
    assert kinds.count("attack") == 3 and kinds.count("logits") == 3 and kinds[-1] == "report"
    attack = next(j for j in jobs if j.id.startswith("attack:target-mlp-digits-k0.5"))
    dep_kinds = sorted(position[d] for d in attack.deps)
    assert len(dep_kinds) == 3                          # the stacked run of target and shadow, the canaries', logits
    # every model trains in exactly one job: the small digits MLPs of one schedule stacked,
    # whatever their setting and role (the 449-member models of both non-private settings:
    # 2 targets, 2 shadows, 8 references; of DP-SGD: 1 + 1 + 4; the canary models, 673 members)
    trained = [c.run_name for j in jobs if j.kind == "train" for c in j.configs]
    assert len(trained) == len(set(trained)) == 3 * (1 + 1 + 4 + 1)
    sizes = sorted((len(j.configs), j.configs[0].defence.dp) for j in jobs if j.kind == "train")
    assert sizes == [(1, True), (2, False), (6, True), (12, False)]
    big = next(j for j in jobs if j.kind == "train" and len(j.configs) == 12)
    assert {c.role for c in big.configs} == {"target", "shadow", "reference"}
    assert {c.defence.kappa for c in big.configs} == {0.0, 0.5}
    assert big.label == "train mlp ×12 stacked (2 settings: target, shadow, reference)"
    logits = next(j for j in jobs if j.kind == "logits" and "plain" in j.id)
    assert len(logits.inputs) == 4 and logits.outputs[0].startswith("attacks/pools/")
    assert logits.deps == (big.id,)


@pytest.mark.slow
def test_side_by_side_training_gives_the_one_by_one_models_bit_for_bit(tmp_path):
    """The local executor trains the stacked runs on two threads at once (one intra-op thread
    each): the same models, byte for byte, and the same table as one run after another (a
    race on torch's global generator, which seeds each model's initial weights, would show)."""
    tables, weights = [], []
    for workers in (1, 2):
        root = tmp_path / f"w{workers}"
        done = []
        _audit(root, LocalExecutor(workers=workers),
               hooks=AuditHooks(on_job_done=lambda j, r, done=done: done.append(j)))
        assert sum(1 for j in done if j.kind == "train" and len(j.configs) > 1) >= 2
        tables.append((root / "reports" / "tradeoff.csv").read_bytes())
        weights.append({p.parent.name: p.read_bytes() for p in (root / "models").glob("[!.]*/weights.npz")})
    assert tables[0] == tables[1]
    assert weights[0].keys() == weights[1].keys() and weights[0] == weights[1]


def test_bundle_round_trip_and_refuses_escapes(tmp_path):
    src = Workspace(tmp_path / "a").ensure_writable()
    (src.models / "m1" / "sub").mkdir(parents=True)
    (src.models / "m1" / "config.json").write_text("{}")
    (src.models / "m1" / "sub" / "w.bin").write_bytes(b"\x00\x01")
    bundle = pack(src, ["models/m1", "models/missing"])
    assert set(bundle) == {"models/m1"} and bundle["models/m1"]["sub/w.bin"] == b"\x00\x01"
    dst = Workspace(tmp_path / "b").ensure_writable()
    unpack(dst, bundle)
    assert (dst.models / "m1" / "sub" / "w.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(ArtifactError):
        unpack(dst, {"../outside": {"x": b""}})
    with pytest.raises(ArtifactError):
        unpack(dst, {"models/m2": {"../../x": b""}})


@pytest.mark.slow
def test_local_executor_resumes_after_an_interrupted_driver(tmp_path):
    finished = []

    def stop_after_five(job, reused):
        finished.append(job.id)
        if len(finished) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _audit(tmp_path, hooks=AuditHooks(on_job_done=stop_after_five))
    ws = Workspace(tmp_path)
    jobs = {j.id: j for j in audit_jobs(_plan(), ATTACKS, DIGITS_SHAPES)}
    assert all(is_done(jobs[i], ws) for i in finished if jobs[i].kind == "train")
    stamps = {p: p.stat().st_mtime_ns for p in ws.models.glob("[!.]*/weights.npz")}  # not .partial-*
    rerun = []
    _audit(tmp_path, hooks=AuditHooks(on_job_done=lambda job, reused: rerun.append((job.id, reused))))
    reused = {i for i, r in rerun if r}
    assert set(finished) <= reused                                         # nothing finished is redone
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())


def test_ray_missing_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)                            # import ray → ImportError
    with pytest.raises(ConfigError, match=r'pip install "privaudit\[ray\]"'):
        make_executor("ray")
    result = CliRunner().invoke(app, ["audit", "--dataset", "digits", "--executor", "ray", "--workdir", str(tmp_path)])
    assert result.exit_code == 2 and 'pip install "privaudit[ray]"' in result.output
    assert "Traceback" not in result.output
    bad = CliRunner().invoke(app, ["audit", "--dataset", "digits", "--executor", "dask", "--workdir", str(tmp_path)])
    assert bad.exit_code == 2 and "--executor" in bad.output


@pytest.mark.slow
def test_a_ray_address_that_does_not_answer_is_one_line(tmp_path):
    """ray.init retries an address nobody listens on for minutes; privaudit probes it first."""
    import socket

    from privaudit.executor.ray_backend import check_reachable

    with socket.socket() as listening:                   # an address that answers
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        check_reachable(f"127.0.0.1:{listening.getsockname()[1]}")
        check_reachable(f"ray://127.0.0.1:{listening.getsockname()[1]}")
    with socket.socket() as s:                           # a port nobody listens on any more
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(ConfigError, match="does not answer"):
            check_reachable(address)
    with pytest.raises(ConfigError, match="host:port"):
        check_reachable("head-node")
    check_reachable(None), check_reachable("auto")        # left to Ray
    result = CliRunner().invoke(app, ["audit", "--dataset", "digits", "--executor", "ray", "--ray-address",
                                      f"127.0.0.1:{port}", "--workdir", str(tmp_path)])
    assert result.exit_code == 2 and "does not answer" in result.output and "Traceback" not in result.output
    assert not list((tmp_path / "models").glob("*/weights*"))  # nothing trained


# ---------------------------------------------------------------- on a local Ray instance

FAULT_SEED = 7  # only the audit with this seed has the job the fault targets


@pytest.fixture(scope="module")
def ray_instance(tmp_path_factory):
    ray = pytest.importorskip("ray")
    marker = tmp_path_factory.mktemp("fault") / "killed"
    target = _plan(FAULT_SEED, epochs=6)[1].validated()                     # the κ = 0.5 target
    job = next(j for j in audit_jobs(_plan(FAULT_SEED, epochs=6), AttackPlan(), DIGITS_SHAPES)
               if j.kind == "train" and target in j.configs)                # its stacked run
    env = {FAULT_ENV: f"{job.id}@{marker}"}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": env})
    yield marker
    ray.shutdown()


@pytest.fixture(scope="module")
def local_table(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    _audit(root, LocalExecutor())
    return (root / "reports" / "tradeoff.csv").read_bytes()


def _ray(shared_fs=None, cpus=1):
    from privaudit.executor.ray_backend import RayExecutor
    return RayExecutor(cpus_per_job=cpus, shared_fs=shared_fs)


@pytest.mark.parametrize("shared_fs", [None, False])
@pytest.mark.slow
def test_ray_gives_the_local_table(ray_instance, local_table, tmp_path, shared_fs):
    done = []
    result = _audit(tmp_path, _ray(shared_fs), hooks=AuditHooks(on_job_done=lambda j, r: done.append(j.id)))
    assert (tmp_path / "reports" / "tradeoff.csv").read_bytes() == local_table
    assert len(done) == len(audit_jobs(_plan(), ATTACKS, DIGITS_SHAPES))
    assert all(str(t.path).startswith(str(tmp_path)) for t in result.targets)  # paths in the driver's workspace
    assert not list(tmp_path.glob("attacks/.ray-probe-*"))


@pytest.mark.slow
def test_ray_survives_a_killed_worker(ray_instance, tmp_path):
    marker = ray_instance
    local = tmp_path / "local"
    _audit(local, LocalExecutor(), seed=FAULT_SEED, epochs=6, attacks=AttackPlan())
    assert not marker.exists()
    _audit(tmp_path / "ray", _ray(), seed=FAULT_SEED, epochs=6, attacks=AttackPlan())
    assert marker.exists()                                  # a worker really died in the middle of a job
    assert ((tmp_path / "ray" / "reports" / "tradeoff.csv").read_bytes()
            == (local / "reports" / "tradeoff.csv").read_bytes())


@pytest.mark.slow
def test_ray_resumes_after_an_interrupted_driver(ray_instance, tmp_path):
    finished = []

    def stop(job, reused):
        finished.append(job.id)
        if len(finished) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _audit(tmp_path, _ray(), hooks=AuditHooks(on_job_done=stop))
    stamps = {p: p.stat().st_mtime_ns for p in Workspace(tmp_path).models.glob("[!.]*/weights.npz")}  # not .partial-*
    assert stamps
    rerun = []
    _audit(tmp_path, _ray(), hooks=AuditHooks(on_job_done=lambda job, reused: rerun.append((job.id, reused))))
    assert {i for i in finished if i.startswith(("train:", "logits:"))} <= {i for i, r in rerun if r}
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())


@pytest.mark.slow
def test_ray_deterministic_failure_fails_once_with_its_message(ray_instance, tmp_path):
    _audit(tmp_path, LocalExecutor(), attacks=AttackPlan())
    ws = Workspace(tmp_path)
    shadow = next(ws.models.glob("shadow-mlp-digits-k0.5-*"))
    (shadow / "weights.npz").write_bytes(b"not an archive")                  # corrupt, but present
    write_manifest(shadow)  # its checksums match the damage: only loading it, in the attack job on a worker, fails
    for folder in ws.attacks.iterdir():
        if folder.is_dir():
            for f in folder.iterdir():
                f.unlink()
            folder.rmdir()
    with pytest.raises(ArtifactError) as info:
        _audit(tmp_path, _ray(), attacks=AttackPlan())
    assert "attack target-mlp-digits-k0.5" in str(info.value)
    assert "Traceback" not in str(info.value) and "\n" not in str(info.value).strip()


@pytest.mark.slow
def test_cli_audit_on_ray(ray_instance, tmp_path):
    result = CliRunner().invoke(app, ["audit", "--dataset", "digits", "--kappas", "0.5", "--sigmas", "none",
                                      "--epochs", "2", "--attacks", "shadow", "--executor", "ray",
                                      "--cpus-per-job", "1", "--workdir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["executor"] == "ray"                  # stdout is the JSON alone
    assert (tmp_path / "reports" / "index.html").is_file()
    bad = CliRunner().invoke(app, ["audit", "--dataset", "digits", "--ray-address", "auto", "--workdir", str(tmp_path)])
    assert bad.exit_code == 2 and "--executor ray" in bad.output
