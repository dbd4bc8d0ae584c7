"""What a job graph will cost before it runs: time and disk, from measurements on this machine.

The estimate of a job is built from rates measured here, in this process, on the job's own
code paths, and cached per machine (:func:`cache_path`), so a second plan measures nothing:

* **training**: each recipe family (architecture and width, input shape, DP-SGD or not, MG
  noise or not, batch size, precision, augmentation, engine; for the stacked engine, the
  number of models trained together; the intra-op threads it will train on: one for the
  stacked runs the local executor puts side by side, see
  :class:`~privaudit.executor.preview.Lanes`) is timed by the trainer itself, on those threads, after a one-batch
  warm-up (kernels, buffers), three epochs at each of two part sizes: a small one (two
  batches) and one sized to take about :data:`EPOCH_TARGET` seconds an epoch (at most
  :data:`SLICE` samples and the model's part), so a slow recipe is measured on less data and
  every family costs about the same few seconds (a recipe whose two batches already take it:
  twice the small one). The two best epochs give an epoch's cost
  as a line in its members, ``a + b × members`` (``a``: what an epoch pays at any size, such
  as shuffling and the optimiser's step set-up; ``b``: the cost of a member), and a model
  costs

      epochs × (a + b × members) + set-up + evaluation,

  where set-up is the measured run's time outside its epochs and evaluation is the clean
  inference on the model's members and non-members.
* **inference** (evaluation, pool logits, attack queries): seconds per sample of each
  architecture, timed on inputs sized to take about :data:`EPOCH_TARGET` a pass (256 to
  :data:`INFER_SLICE` random inputs).
* **attack numerics** (the shadow attack's classifier, LiRA and RMIA with their
  leave-one-out calibration, the bootstrap intervals): the attack code itself, run on
  random logits of the job's shapes at :data:`ATTACK_SLICE` samples a side, scaled linearly to
  the part size (every step is linear in the samples for a fixed pool).
* **report**: a fixed part and a part per attacked target, in seconds of the machine on which
  they were measured (:data:`REPORT_SECONDS`), scaled by this machine's measured speed on a
  fixed NumPy workload against that machine's (:data:`REFERENCE_NUMPY_SECONDS`).

**A busy machine.** A shared machine runs a measurement slower while another process holds a
core (PyTorch's threads then wait for each other, the more the smaller the operations;
docs/performance.md), and a rate measured then would price every later plan. So each
measurement is framed by a speed probe (:func:`speed_probe`: small PyTorch products on the
run's threads, the most sensitive kind), kept with the rate; the machine's fastest probe is
kept too. A rate whose probe ran more than :data:`BUSY` times slower than the fastest was
measured on a busy machine, and the next plan made while the machine is quiet measures it
again. A plan made while the machine is busy, or priced by rates measured while it was, says
so in its notes, and which way the load moves it (the load of the moment is not extrapolated).
Measuring on the threads the run uses keeps most of the distortion out in the first place: a
single-threaded run barely slows while another process holds the other core, and most of an
audit's small models train that way, side by side.

Not measured but counted: a job whose artifacts exist costs nothing (it is reused), and the
process's start-up (import, data) is the one this process paid. After a run the ratio of its
actual to its estimated time is kept in the cache, and later estimates of the same command
on the same recipes on this machine (:func:`~privaudit.executor.preview.recipe_key`), and
only those, are multiplied by the median of the last :data:`HISTORY` ratios (shown as the
correction; ``benchmarks/bench_estimate.py`` measures the estimate without it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import numpy as np

from privaudit.core.config import RunConfig
from privaudit.executor.plan import Job
from privaudit.files.atomic import write_json

#: environment variable naming the folder of the cost cache (default: the user cache folder)
CACHE_ENV = "PRIVAUDIT_CACHE_DIR"
CACHE_SCHEMA = 5
SLICE = 2_048          # samples a part of a calibration run at most
INFER_SLICE = 2_048    # inputs of the inference calibration at most
EPOCH_TARGET = 0.3     # seconds an epoch of the larger calibration run is sized to take
ATTACK_SLICE = 512     # members (and as many non-members) of the attack calibration
HISTORY = 5            # runs whose actual/estimated ratio corrects later estimates
BUSY = 1.5             # a probe this much slower than the machine's fastest: the machine is busy
#: the report's cost on the machine the constants were measured on (AMD EPYC, 2 cores):
#: seconds fixed, and per attacked target
REPORT_SECONDS = (3.0, 0.45)
#: :func:`numpy_seconds` on that machine (best of 5)
REFERENCE_NUMPY_SECONDS = 0.060
#: bytes of a model folder beside its weights (config, metrics, manifest), and of a report
MODEL_EXTRA_BYTES = 4_096
REPORT_BYTES = (400_000, 40_000)

#: what a measurement returns: seconds, or a list of rates (training_rates)
_Rate = TypeVar("_Rate", float, list[float])


def cache_path() -> Path:
    """The cost cache: ``$PRIVAUDIT_CACHE_DIR/costs.json``, else the user's cache folder
    (``$XDG_CACHE_HOME/privaudit`` or ``~/.cache/privaudit``)."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(base) / "privaudit")
    return Path(root) / "costs.json"


def machine_key(device) -> str:
    """What a measured rate belongs to: processor, core and thread counts, torch and its
    device. Another machine (or another torch) measures again."""
    import torch

    from privaudit.core.provenance import cpu_name

    cpu = cpu_name()
    dev = str(device)
    if getattr(device, "type", "") == "cuda":
        dev = torch.cuda.get_device_name(device)
    text = f"{cpu}|{os.cpu_count()}|{torch.get_num_threads()}|{torch.__version__}|{dev}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def numpy_seconds() -> float:
    """A fixed NumPy workload like the attacks' (sorts, cumulative sums, elementwise
    maths on 200,000 values), best of 5: how fast this machine runs the report's and the
    attacks' kind of work."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(200_000)
    best = math.inf
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(4):
            order = np.argsort(x)
            np.cumsum(np.exp(-x[order] ** 2))
            np.log1p(np.abs(x)).sum()
        best = min(best, time.perf_counter() - t)
    return best


def speed_probe() -> float:
    """Seconds of a fixed PyTorch workload (ten 256 × 256 matrix products on the process's
    threads), best of 3: how fast this machine runs now. Another process holding a core slows
    it more than it slows any training (docs/performance.md), which makes it a sensitive sign
    of a busy machine, not a measure of how much slower the work runs."""
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 256, generator=g), torch.randn(256, 256, generator=g)
    torch.mm(a, b)  # kernels created
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(10):
            torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return best


def shortened(group: Sequence[RunConfig], part: int, epochs: int) -> list[RunConfig]:
    """``group``'s configs with parts of ``part`` samples and ``epochs`` epochs: a timing run."""
    return [replace(c, data=replace(c.data, part_size=part)).with_epochs(epochs).validated() for c in group]


def timing_parts(cfg: RunConfig, samples: int) -> tuple[int, int]:
    """(the largest part a timing run of ``cfg`` uses, its part of two batches): at most the
    model's part, :data:`SLICE` and a quarter of the data set's ``samples``."""
    cap = max(2, min(cfg.data.part_size, SLICE, samples // 4))
    return cap, max(2, min(cap, 2 * cfg.train.batch_size))


@contextmanager
def thread_count(threads: int) -> Iterator[None]:
    """Torch on ``threads`` intra-op threads inside the block, restored after it."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def other_cores(window: float = 0.25) -> float | None:
    """How many cores the machine's other processes keep busy now: the machine's busy CPU
    time over ``window`` seconds during which this process sleeps (``/proc/stat``), in cores;
    None where ``/proc/stat`` cannot be read (not Linux)."""

    def busy_total() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
        return sum(fields[:8]) - idle, sum(fields[:8])

    try:
        busy_0, total_0 = busy_total()
        time.sleep(window)
        busy_1, total_1 = busy_total()
    except (OSError, ValueError, IndexError):
        return None
    if total_1 <= total_0:
        return None
    return (busy_1 - busy_0) / (total_1 - total_0) * (os.cpu_count() or 1)


@dataclass(frozen=True)
class JobCost:
    """A job's estimate: seconds, bytes it writes, whether it is reused as it stands, and
    (a train job) the run names of its models already in the workspace."""

    job: Job
    seconds: float
    disk_bytes: int
    reused: bool
    present: frozenset[str] = frozenset()


class CostModel:
    """Rates measured on this machine (module docstring), cached in :func:`cache_path`.

    ``data`` is the run's :class:`~privaudit.pipeline.runs.DataCache` (datasets are loaded once, as the
    run would load them), ``device`` its device."""

    def __init__(self, data, device, path: Path | None = None, log: Callable[[str], None] | None = None):
        self.data = data
        self.device = device
        self.path = path or cache_path()
        self.key = machine_key(device)
        self.log = log or (lambda line: None)
        self.measured_seconds = 0.0  # calibration time spent by this process
        self._slowdown: float | None = None
        self._measured: set[str] = set()  # keys this cost model measured (never twice)
        self.busy_rates: set[str] = set()  # timed keys it used that were measured on a busy machine
        self._store = self._read()
        self.rates: dict = self._store["machines"].setdefault(self.key, {"rates": {}, "history": {}})

    # -- the cache --------------------------------------------------------------------
    def _read(self) -> dict:
        try:
            store = json.loads(self.path.read_text())
            if store.get("schema") == CACHE_SCHEMA and isinstance(store.get("machines"), dict):
                return store
        except (OSError, ValueError):
            pass
        return {"schema": CACHE_SCHEMA, "machines": {}}

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json(self.path, self._store)
        except OSError:  # a read-only home: estimates are measured again next time
            pass

    def probe(self) -> float:
        """Run :func:`speed_probe` now; the machine's fastest probe is kept in the cache."""
        seconds = max(speed_probe(), 1e-9)
        self.rates["probe_best"] = min(self.rates.get("probe_best", math.inf), seconds)
        return seconds

    def slowdown(self) -> float:
        """How much slower the speed probe runs now than at its fastest here (1: as fast);
        probed once per cost model."""
        if self._slowdown is None:
            now = self.probe()
            self._save()
            self._slowdown = now / self.rates["probe_best"]
        return self._slowdown

    def _rate(self, key: str, measure: Callable[[], _Rate], timed: bool = True) -> _Rate:
        """The cached value of ``key``, measured first if absent. A ``timed`` value (seconds)
        is stored with the speed probe around its measurement (the faster of before and
        after), and measured again (by a later cost model) if that probe was slow and the machine
        is quiet now."""
        table = self.rates["rates"]
        entry = table.get(key)
        if (timed and entry is not None and key not in self._measured
                and entry["probe"] > BUSY * self.rates["probe_best"] and self.slowdown() < BUSY):
            entry = None  # measured while the machine was busy, and it is quiet now
        if entry is None:
            t = time.perf_counter()
            if timed:
                before = self.probe()
                value = measure()
                entry = {"value": value, "probe": min(before, self.probe())}
            else:
                entry = measure()
            table[key] = entry
            self._measured.add(key)
            self.measured_seconds += time.perf_counter() - t
            self._save()
        if timed and entry["probe"] > BUSY * self.rates["probe_best"]:
            self.busy_rates.add(key)
        return entry["value"] if timed else entry

    # -- measured rates ----------------------------------------------------------------
    def timed(self, key: str, measure: Callable[[], _Rate]) -> _Rate:
        """What ``measure`` times (seconds, or a list of them) for the work ``key`` names,
        cached per machine as every rate is: measured once, and again when it was measured
        on a busy machine and the machine is quiet now (the reproductions' cost models)."""
        return self._rate(key, measure)

    def numpy_speed(self) -> float:
        """This machine's time for :func:`numpy_seconds` over the reference machine's."""
        return float(self._rate("numpy", numpy_seconds)) / REFERENCE_NUMPY_SECONDS

    def inference_seconds(self, cfg: RunConfig) -> float:
        """Seconds per sample of a clean forward pass of ``cfg``'s architecture."""
        images = self.data.images(cfg)
        key = f"infer|{cfg.model.name}|{cfg.model.width}|{cfg.model.args}|{images.input_shape}|{images.num_classes}"

        def measure() -> float:
            import torch

            from privaudit.models import build_model
            from privaudit.training.results import predict_logits

            torch.manual_seed(0)
            model = build_model(cfg.model.name, images.input_shape, images.num_classes, width=cfg.model.width,
                                dp=cfg.defence.dp, args=cfg.model.args).to(self.device).eval()
            x = torch.randn(INFER_SLICE, *images.input_shape, device=self.device)
            predict_logits(model, x[:64])  # kernels created
            t = time.perf_counter()
            predict_logits(model, x[:256])
            first = (time.perf_counter() - t) / 256
            # a slow architecture is timed on fewer samples: about EPOCH_TARGET a pass
            n = min(INFER_SLICE, max(256, int(EPOCH_TARGET / max(first, 1e-12))))
            best = first * n if n == 256 else math.inf
            for _ in range(1 if n == 256 else 2):
                t = time.perf_counter()
                predict_logits(model, x[:n])
                best = min(best, time.perf_counter() - t)
            return best / n

        return float(self._rate(key, measure))

    def training_rates(self, group: Sequence[RunConfig], threads: int | None = None) -> tuple[float, float, float]:
        """(seconds per member and epoch, seconds per epoch at any size, set-up seconds), each
        per model, of training ``group``: one model, or a stacked run of ``len(group)`` models,
        on ``threads`` intra-op threads (default: the process's), as the run will train it."""
        import torch

        from privaudit.training.results import resolve_engine

        threads = threads or torch.get_num_threads()
        cfg = group[0]
        images = self.data.images(cfg)
        t, d, m = cfg.train, cfg.defence, cfg.model
        key = (f"train|{m.name}|{m.width}|{m.args}|{images.input_shape}|{images.num_classes}|dp={d.dp}|"
               f"{d.mechanism if d.dp else ''}|mg={d.kappa > 0}|b={t.batch_size}|{t.precision}|{t.augment}|"
               f"{resolve_engine()}|k={len(group)}|t={threads}" + (f"|{d.method}" if d.method else ""))
        rates = self._rate(key, lambda: self._measure_training(group, images, threads))
        return float(rates[0]), float(rates[1]), float(rates[2])

    def _measure_training(self, group: Sequence[RunConfig], images, threads: int) -> list[float]:
        from privaudit.analysis.accounting import not_accounted

        with thread_count(threads), not_accounted():  # the accounting is priced apart (accounting_seconds)
            return self._time_training(group, images)

    def _time_training(self, group: Sequence[RunConfig], images) -> list[float]:
        import torch

        from privaudit.training.stacked import member_count, train_stacked
        from privaudit.training.trainer import train_model

        def run(part: int, epochs: int) -> tuple[float, float, float, int]:
            """(best epoch after the first, set-up outside the epochs, seconds, members)."""
            small = shortened(group, part, epochs)
            ends: list[float] = []
            tick = lambda e, n, loss: ends.append(time.perf_counter())  # noqa: E731
            t0 = time.perf_counter()
            if len(small) > 1:
                train_stacked(small, images, self.device, on_epoch=tick)
            else:
                train_model(small[0], images, self.device, on_epoch=tick)
            t_end = time.perf_counter()
            best = min((b - a for a, b in zip(ends, ends[1:])), default=ends[-1] - t0)
            evaluation = 2 * part * self.inference_seconds(group[0]) * len(group)
            setup = max(0.0, ends[0] - t0 - best) + max(0.0, t_end - ends[-1] - evaluation)
            return best, setup, t_end - t0, member_count(small[0], len(images.y))

        cap, small = timing_parts(group[0], len(images.y))
        self.log(f"estimate: timing {group[0].model.name} {group[0].defence.label} training"
                 f"{f' (×{len(group)} stacked)' if len(group) > 1 else ''}")
        # torch.optim's first use in a process imports torch._dynamo, and a recipe's first
        # steps create its kernels and buffers: paid once, in a short run outside the
        # measurement, as a run pays them once
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
        run(max(2, min(cap, group[0].train.batch_size)), 1)
        epoch_1, setup, _, members_1 = run(small, 3)
        per = epoch_1 / members_1
        large = min(cap, max(2 * small, int(EPOCH_TARGET / max(per, 1e-9))))
        if large <= small:  # the model's part is the small slice: its mean rate prices it
            return [per / len(group), 0.0, setup / len(group)]
        # a recipe whose small epoch already takes EPOCH_TARGET is timed at twice its size: its
        # epoch may hold a fixed part (DP-SGD's noise, a slow first step) that the mean rate of
        # two batches would charge to every member
        epoch_2, setup, _, members_2 = run(large, 3)
        slope = (epoch_2 - epoch_1) / (members_2 - members_1)
        if slope <= 0:  # timing noise larger than the slice's growth: the larger run's mean rate
            return [epoch_2 / members_2 / len(group), 0.0, setup / len(group)]
        fixed = max(0.0, epoch_1 - slope * members_1)
        return [slope / len(group), fixed / len(group), setup / len(group)]

    def side_by_side_factor(self, groups: Sequence[Sequence[RunConfig]], threads: int) -> float:
        """How much longer stacked runs take side by side, one per worker thread, than each
        alone (at least 1): the workers share Python's interpreter lock, the memory bus, and
        the cores with whatever else runs. ``groups``: the runs that start together (the
        longest two of a plan). Timed on a short run of each (two batches, two epochs), alone
        and all at once, best of two: the sum of their times together over the sum alone.
        Cached like a rate."""
        images = self.data.images(groups[0][0])

        def family(group) -> str:
            t, d, m = group[0].train, group[0].defence, group[0].model
            return f"{m.name}|{m.width}|dp={d.dp}|mg={d.kappa > 0}|b={t.batch_size}|k={len(group)}"

        key = f"parallel|{images.input_shape}|{'+'.join(family(g) for g in groups)}|t={threads}"

        def measure() -> float:
            from concurrent.futures import ThreadPoolExecutor

            from privaudit.analysis.accounting import not_accounted
            from privaudit.training.stacked import train_stacked

            runs = [shortened(g, timing_parts(g[0], len(images.y))[1], 2) for g in groups]

            def once(run) -> float:
                start = time.perf_counter()
                train_stacked(run, images, self.device)
                return time.perf_counter() - start

            with thread_count(threads), not_accounted():
                alone = sum(min(once(r), once(r)) for r in runs)  # the first of each creates its kernels
                with ThreadPoolExecutor(len(runs)) as pool:
                    together = min(sum(pool.map(once, runs)) for _ in range(2))
            return max(1.0, together / max(alone, 1e-9))

        return float(self._rate(key, measure))

    def accounting_seconds(self) -> float:
        """Seconds the privacy accountants take for one new DP-SGD history
        (:func:`privaudit.analysis.accounting.accounting_seconds`): each DP-SGD setting's
        first model pays them once per process (later ones read the process's cache)."""
        from privaudit.analysis.accounting import accounting_seconds

        return float(self._rate("accounting", accounting_seconds))

    def attack_numerics_seconds(self, target: RunConfig, pool_size: int, pool_attacks: Sequence[str],
                                shadow: bool) -> float:
        """Seconds of an attack's computation on outputs (no model queries) at
        :data:`ATTACK_SLICE` samples a side; :meth:`job_seconds` scales it to the part."""
        images = self.data.images(target)
        queries = 2 if target.train.augment == "flip" else 1
        key = (f"attack|C={images.num_classes}|P={pool_size}|A={queries}|{','.join(pool_attacks)}|"
               f"shadow={shadow}|replicates")  # named: a rate timed without the jackknife is timed again

        def measure() -> float:
            from privaudit.attacks.pool_attacks import (
                QUANTILE_ATTACK,
                evaluate_scores,
                leave_one_out,
                pair_jackknife,
                pool_scores,
                quantile_scores,
            )
            from privaudit.attacks.registry import PER_SAMPLE_ATTACKS, POOL_BASELINES
            from privaudit.pipeline.attacking import run_attacks

            rng = np.random.default_rng(0)
            n, c = ATTACK_SLICE, images.num_classes

            def side() -> tuple:
                logits = rng.standard_normal((n, c)).astype(np.float32)
                return logits, rng.integers(0, c, n), rng.standard_normal((n, c)).astype(np.float32), \
                    rng.integers(0, c, n)

            t = time.perf_counter()
            if shadow:
                run_attacks(side(), side(), data_free=0.5)
            if pool_attacks:
                from privaudit.data.splits import pool_keep

                keep = pool_keep(pool_size, 2 * n, 0)
                labels, pop_labels = rng.integers(0, c, 2 * n), rng.integers(0, c, 2 * n)
                logits = rng.standard_normal((pool_size, 2 * n, queries, c)).astype(np.float32)
                pop = rng.standard_normal((pool_size, 2 * n, queries, c)).astype(np.float32)
                t_logits = rng.standard_normal((2 * n, queries, c)).astype(np.float32)
                t_pop = rng.standard_normal((2 * n, queries, c)).astype(np.float32)
                from_refs = tuple(a for a in pool_attacks if a != QUANTILE_ATTACK)
                per_target, loo = leave_one_out(logits, pop, keep, labels, pop_labels,
                                                attacks=from_refs + POOL_BASELINES, delta=1e-5)
                pair_jackknife(logits, pop, keep, labels, pop_labels, per_target, delta=1e-5,  # the replicates
                               attacks=tuple(a for a in from_refs if a in PER_SAMPLE_ATTACKS))
                scores = pool_scores(t_logits, t_pop, labels, pop_labels, logits, pop, keep, attacks=from_refs)
                member = np.repeat([1, 0], n).astype(np.int8)
                for name, s in scores.items():
                    evaluate_scores(member, s, keep.astype(int).ravel(), loo[name].ravel(), delta=1e-5)
                if QUANTILE_ATTACK in pool_attacks:  # two fits: the target's and the calibration model's
                    x = rng.integers(0, 256, (2 * n, *images.input_shape)).astype(np.uint8)
                    for _ in range(2):
                        quantile_scores(x, labels, rng.standard_normal(2 * n), x, pop_labels,
                                        rng.standard_normal(2 * n), seed=0)
            return time.perf_counter() - t

        return float(self._rate(key, measure))

    # -- jobs -------------------------------------------------------------------------
    def model_bytes(self, cfg: RunConfig) -> int:
        """Bytes of a saved model folder: float32 weights and buffers, the normaliser, the
        metadata files."""
        images = self.data.images(cfg)
        key = f"params|{cfg.model.name}|{cfg.model.width}|{cfg.model.args}|{images.input_shape}|" \
              f"{images.num_classes}|dp={cfg.defence.dp}"

        def measure() -> float:
            from privaudit.models import build_model

            model = build_model(cfg.model.name, images.input_shape, images.num_classes, width=cfg.model.width,
                                dp=cfg.defence.dp, args=cfg.model.args)
            return float(sum(p.numel() for p in model.state_dict().values()))

        numel = float(self._rate(key, measure, timed=False))
        return int(4 * (numel + 2 * int(np.prod(images.input_shape)))) + MODEL_EXTRA_BYTES

    def job_cost(self, job: Job, reused: bool, present: frozenset[str] = frozenset(),
                 threads: int | None = None) -> JobCost:
        """The estimate of ``job``: ``reused`` says whether it is reused as it stands,
        ``present`` (a train job) which of its models the workspace already holds, ``threads``
        (a train job) the intra-op threads it will train on (default: the process's)."""
        if job.kind == "train":
            disk = 0 if reused else sum(self.model_bytes(c) for c in job.configs)
            return JobCost(job, 0.0 if reused else self._train_seconds(job, present, threads), disk, reused, present)
        if job.kind == "logits":
            cfg = job.configs[0]
            images = self.data.images(cfg)
            queries = 2 if cfg.train.augment == "flip" else 1
            samples = 4 * cfg.data.part_size * queries * job.pool_size  # pool (2 parts) and population (2 parts)
            disk = samples * images.num_classes * 4
            return JobCost(job, 0.0 if reused else samples * self.inference_seconds(cfg), 0 if reused else disk,
                           reused)
        if job.kind == "attack":
            return self._attack_cost(job, reused)
        if job.kind == "report":
            fixed, per_target = REPORT_SECONDS
            targets = len(job.deps)
            disk = REPORT_BYTES[0] + REPORT_BYTES[1] * targets
            return JobCost(job, (fixed + per_target * targets) * self.numpy_speed(), disk, False)
        return JobCost(job, 0.0, 0, reused)

    def _train_seconds(self, job: Job, present: frozenset[str], threads: int | None) -> float:
        from privaudit.training.stacked import member_count

        if all(c.trained_as != c for c in job.configs):  # output-side defences: saved from trained weights
            return 0.0
        missing = [c for c in job.configs if c.run_name not in present]
        images = self.data.images(job.configs[0])
        evaluation = 2 * job.configs[0].data.part_size * self.inference_seconds(job.configs[0])
        if job.epochs_series:  # the longest missing model trains once; each missing one is evaluated
            longest = max(missing, key=lambda c: c.train.epochs)
            per, fixed, setup = self.training_rates([longest], threads)
            return (longest.train.epochs * (member_count(longest, len(images.y)) * per + fixed) + setup
                    + evaluation * len(missing))
        group = list(job.configs) if len(job.configs) > 1 else [job.configs[0]]
        per, fixed, setup = self.training_rates(group, threads)
        # a stacked run with any model missing trains whole (privaudit.pipeline.runs.ensure_models)
        trained = group if len(group) > 1 else missing
        return sum(c.train.epochs * (member_count(c, len(images.y)) * per + fixed) + setup + evaluation
                   for c in trained)

    def _attack_cost(self, job: Job, reused: bool) -> JobCost:
        cfg, plan = job.configs[0], job.attacks
        self.data.images(cfg)  # loaded (and checked against the config's fingerprint) even when reused
        part = cfg.data.part_size
        queries = 2 if cfg.train.augment == "flip" else 1
        if reused:
            return JobCost(job, 0.0, 0, True)
        assert plan is not None  # an attack job always carries its plan (plan.audit_jobs)
        infer = self.inference_seconds(cfg)
        samples = 0
        if plan.shadow:  # target and shadow on their members and non-members, the data-free threshold's queries
            samples += 2 * part + 2 * part + 2 * part
        if plan.pool_attacks:  # the target on the pool and the population
            samples += 4 * part * queries
        if plan.one_run:  # the canary model on the canaries
            samples += part
        numerics = self.attack_numerics_seconds(cfg, plan.pool_size, plan.pool_attacks, plan.shadow)
        attacks = (3 if plan.shadow else 0) + len(plan.pool_attacks)
        disk = (attacks + 1) * 2 * part * 8 + 30_000
        return JobCost(job, samples * infer + numerics * part / ATTACK_SLICE, disk, False)

    # -- the history correction ---------------------------------------------------------
    def correction(self, recipe: str) -> tuple[float, int]:
        """(median actual/estimated ratio of the last runs of ``recipe`` here, their count);
        (1, 0) when there are none. ``recipe``: a command and what it trains
        (:func:`~privaudit.executor.preview.recipe_key`)."""
        ratios = self.rates["history"].get(recipe, [])[-HISTORY:]
        if not ratios:
            return 1.0, 0
        return float(min(4.0, max(0.25, statistics.median(ratios)))), len(ratios)

    def record(self, recipe: str, estimated: float, actual: float) -> None:
        """Keep a finished run's actual/estimated ratio (runs of under 5 estimated seconds, or
        that reused nearly everything, say nothing of the model and are not kept)."""
        if estimated < 5.0 or actual <= 0:
            return
        history = self.rates["history"].setdefault(recipe, [])
        history.append(actual / estimated)
        del history[:-HISTORY]
        self._save()


def dp_history(cfg: RunConfig) -> tuple:
    """What a DP-SGD model's accounting depends on (its σ or target ε, δ, sample rate and
    steps, through the part size, batch size and epochs): models that share it share one
    computation of ε."""
    d, t = cfg.defence, cfg.train
    return (d.mechanism, d.noise_multiplier, d.target_epsilon, d.delta, cfg.data.dataset, cfg.data.part_size,
            t.batch_size, t.epochs)


def estimate_jobs(jobs: Iterable[Job], workspace, model: CostModel,
                  threads: Mapping[str, int] | None = None) -> list[JobCost]:
    """Every job's :class:`JobCost`, its reuse decided as the executor decides it (a train
    job: every model in the workspace; a pool: :func:`privaudit.executor.jobs.is_done`) and,
    for an attack, by whether its folder already holds every attack it asks for. ``threads``:
    the intra-op threads of the train jobs that will not run on the process's (by job id)."""
    threads = threads or {}
    histories: set[tuple] = set()  # DP-SGD histories already priced (the accountants' cache)
    from privaudit.executor.jobs import is_done

    def done(job: Job) -> bool:
        if job.kind == "logits":
            return is_done(job, workspace)
        if job.kind == "attack":
            metrics = workspace.root / job.outputs[0] / "metrics.json"
            if not metrics.is_file():
                return False
            try:
                saved = json.loads(metrics.read_text())
            except (OSError, ValueError):
                return False
            assert job.attacks is not None  # an attack job always carries its plan (plan.audit_jobs)
            wanted = set(job.attacks.pool_attacks) | ({"shadow", "loss", "confidence"} if job.attacks.shadow else set())
            return wanted <= set(saved) and (not job.attacks.one_run or
                                             (workspace.root / job.outputs[0] / "one_run.json").is_file())
        return False

    costs = []
    for job in jobs:
        if job.kind == "train":  # each model looked up once (has_model reads and checks its folder)
            present = frozenset(c.run_name for c in job.configs if workspace.has_model(c))
            cost = model.job_cost(job, len(present) == len(job.configs), present, threads.get(job.id))
            new = {dp_history(c) for c in job.configs
                   if c.defence.dp and c.run_name not in present and c.trained_as == c} - histories
            if new and not cost.reused:
                histories |= new
                cost = replace(cost, seconds=cost.seconds + len(new) * model.accounting_seconds())
            costs.append(cost)
        else:
            costs.append(model.job_cost(job, done(job)))
    return costs
