"""The workspace: ``models/``, ``attacks/`` and ``reports/`` under one folder.

Layout::

    models/<run_name>/config.json    every setting + provenance
    models/<run_name>/metrics.json   train/test accuracy, losses; σ, ε, δ for DP-SGD
    models/<run_name>/weights.npz    state dict + normalisation, tensors only
    attacks/<target_run>/config.json, metrics.json, scores.npz
    reports/tradeoff.csv, reports/index.html

A model folder is first written as a hidden ``.partial-*`` folder and renamed into place
when complete, so an interrupted run never leaves a half-written artifact; a folder whose
saved config hash differs from its name is ignored (never reused). Weights are a numpy
``.npz`` read with ``allow_pickle=False``: loading a model file cannot execute code.

Every committed folder also holds ``manifest.json``, the size and SHA-256 of each of its
files (:mod:`privaudit.files.integrity`). A folder is verified against it whenever it is reused
(:meth:`Workspace.has_model`, :meth:`Workspace.verify_model`, :meth:`Workspace.load_model`,
the pool and attack readers); a mismatch, or a ``config.json`` that cannot be read, raises
:class:`~privaudit.errors.DamagedArtifactError` naming the folder ("… is damaged: …; delete
the folder and rerun") instead of the folder being reused or silently replaced. The commands
that compute such a folder move it, kept, into ``.damaged/`` beside it
(:meth:`Workspace.set_aside_damaged`, :mod:`privaudit.api.repair`) and compute it again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from privaudit.core.config import MODELS, RunConfig, is_custom_model, model_tag
from privaudit.data import Normaliser
from privaudit.errors import ArtifactError, ConfigError, DamagedArtifactError, write_error
from privaudit.files.atomic import owner_tag, read_json, remove_orphans, shared_mode, write_bytes, write_json
from privaudit.files.integrity import (
    MANIFEST,
    check_incoming,
    damaged,
    settled,
    stat_key,
    verify_folder,
    write_manifest,
)
from privaudit.files.locks import artifact_lock
from privaudit.files.npfiles import npz_bytes
from privaudit.models import build_model
from privaudit.models.released import released
from privaudit.training.trace import FILE as TRACE_FILE

NORM_KEYS = ("norm/mean", "norm/std")
STATE_PREFIX = "state/"
MODEL_FILES = ("config.json", "metrics.json", "weights.npz")
PARTIAL_PREFIX = ".partial-"  # a folder being written: .partial-<pid>@<host>-<name>-…
def _count(items, noun: str) -> str:
    """``1 model folder``, ``3 model folders``."""
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


#: where attack and pool folders written before manifests are moved, kept (:meth:`Workspace.migrate_legacy`)
LEGACY_FOLDER = ".before-manifests"
#: where a damaged model, attack or pool folder is moved, kept, before it is computed again
#: (:meth:`Workspace.set_aside_damaged`): ``models/.damaged/<name>-<UTC time>``
DAMAGED_FOLDER = ".damaged"
_legacy_ok: set[tuple] = set()  # weights of manifest-less model folders that loaded (stat keys)


def folder_kind(parent: Path) -> str:
    """What the folders under ``parent`` are, for messages: model, pool or attack."""
    return {"models": "model", "pools": "pool", "attacks": "attack"}.get(Path(parent).name, "artifact")


@dataclass
class LoadedModel:
    name: str
    config: RunConfig
    model: nn.Module
    normaliser: Normaliser
    metrics: dict


def save_weights(path: Path, model: nn.Module, normaliser: Normaliser) -> None:
    """Write the state dict and normaliser as an uncompressed ``.npz`` (tensors only)."""
    arrays = {STATE_PREFIX + k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    arrays[NORM_KEYS[0]] = normaliser.mean
    arrays[NORM_KEYS[1]] = normaliser.std
    write_bytes(path, npz_bytes(arrays))


def _check_npz_sizes(path: Path) -> None:
    """Refuse an archive whose array headers declare more data than the members hold, before
    numpy allocates it (a 200-byte file must not ask for terabytes)."""
    if not zipfile.is_zipfile(path):
        return  # np.load reports what it is
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if dtype.hasobject or declared > info.file_size:
                raise ValueError(f"member {info.filename} declares {declared} bytes in {info.file_size}")


#: what reading a damaged, truncated or foreign ``.npz`` raises (numpy, zipfile, the size check)
WEIGHTS_FILE_ERRORS = (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, MemoryError)


def load_weights(path: Path, config: RunConfig, input_shape: tuple[int, int, int],
                 num_classes: int = 10) -> tuple[nn.Module, Normaliser]:
    """Rebuild the model of ``config`` and load ``path`` into it, refusing anything else. The
    model comes back as its queries see it: behind its defence's output transform, if any
    (:func:`privaudit.models.released.released`).

    Raises :class:`ArtifactError` for a missing, corrupted, truncated or foreign file
    (wrong keys or shapes) or one that holds pickled objects.
    """
    try:
        _check_npz_sizes(path)
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive")
        with loaded as npz:
            arrays = {k: npz[k] for k in npz.files}
    except FileNotFoundError as exc:
        raise ArtifactError(f"weights file {path} is missing") from exc
    except WEIGHTS_FILE_ERRORS as exc:
        raise ArtifactError(f"weights file {path} is corrupted or not a privaudit weights file ({exc})") from exc
    if not all(k in arrays for k in NORM_KEYS):
        raise ArtifactError(f"weights file {path} is not a privaudit weights file (no normalisation)")
    model = build_model(config.model.name, input_shape, num_classes, width=config.model.width, dp=config.defence.dp,
                        args=config.model.args)
    expected = model.state_dict()
    state = {k[len(STATE_PREFIX):]: v for k, v in arrays.items() if k.startswith(STATE_PREFIX)}
    if set(state) != set(expected):
        raise ArtifactError(f"weights file {path} does not match a {config.model.name} model "
                            f"(keys differ: {sorted(set(state) ^ set(expected))[:3]}...)")
    for k, v in state.items():
        if tuple(v.shape) != tuple(expected[k].shape) or v.dtype.kind not in "fiub":
            raise ArtifactError(f"weights file {path}: tensor {k} has shape {v.shape}, "
                                f"expected {tuple(expected[k].shape)}")
    model.load_state_dict({k: torch.from_numpy(np.array(v)).to(expected[k].dtype) for k, v in state.items()})
    mean, std = arrays[NORM_KEYS[0]], arrays[NORM_KEYS[1]]
    if mean.shape != tuple(input_shape) or std.shape != tuple(input_shape) or not np.all(std > 0):
        raise ArtifactError(f"weights file {path} has invalid normalisation statistics")
    model.eval()
    return released(model, config.defence).eval(), Normaliser(mean.astype(np.float32), std.astype(np.float32))


class Workspace:
    """The folders an audit writes into, rooted at ``root`` (default: the current folder)."""

    def __init__(self, root: str | Path = "."):
        self.root = Path(root)
        self.models = self.root / "models"
        self.attacks = self.root / "attacks"
        self.reports = self.root / "reports"

    # -- writing --------------------------------------------------------------------------
    def ensure_writable(self, log: Callable[[str], None] | None = None) -> Workspace:
        """Create the three folders, check files can be written there, and bring folders that
        an earlier privaudit wrote before checksummed manifests under this version's checks
        (:meth:`migrate_legacy`; ``log`` gets its notes)."""
        for folder in (self.models, self.attacks, self.reports):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
                os.close(fd)
                os.unlink(probe)
            except OSError as exc:
                raise write_error(f"workspace {self.root} is not writable: {folder}: {exc.strerror or exc}",
                                  exc) from exc
        for note in self.migrate_legacy():
            (log or (lambda line: None))(note)
        return self

    def legacy_folders(self) -> dict[str, list[Path]]:
        """The committed folders without ``manifest.json`` (written by a privaudit from before
        checksummed manifests), by kind: ``model``, ``attack`` and ``pool``."""

        def without_manifest(parent: Path, skip: tuple[str, ...] = ()) -> list[Path]:
            if not parent.is_dir():
                return []
            return [p for p in sorted(parent.iterdir())
                    if p.is_dir() and not p.name.startswith(".") and p.name not in skip
                    and not (p / MANIFEST).is_file() and any((p / f).is_file() for f in ("config.json", "pool.json"))]

        return {"model": without_manifest(self.models), "attack": without_manifest(self.attacks, ("pools",)),
                "pool": without_manifest(self.attacks / "pools")}

    def migrate_legacy(self) -> list[str]:
        """Model folders written before checksummed manifests, never trusted blindly: each is
        verified (its files exist and its weights load into the model of its config,
        :meth:`verify_model`; a damaged one raises :class:`DamagedArtifactError` naming it) and
        gets its manifest: its weights are kept, and from now on it is checked like any other.
        Returns the note that says so (none when nothing was found). Attack and pool folders
        of that age: :meth:`set_aside_legacy_results`, :meth:`refuse_legacy_results`."""
        models = self.legacy_folders()["model"]
        for folder in models:
            self.verify_model(folder.name)
            write_manifest(folder)
        if not models:
            return []
        return [f"note: {_count(models, 'model folder')} in {self.models} had no checksums (written by an earlier "
                "privaudit): their weights were verified to load into their configs' models and now carry a "
                f"manifest; they were trained by that version's code (delete one to retrain it, e.g. "
                f"{models[0].name})"]

    def set_aside_legacy_results(self, log: Callable[[str], None] | None = None) -> list[Path]:
        """Attack and pool folders written before checksummed manifests hold numbers that an
        earlier version's code computed, which this version may compute differently: each is
        moved aside, kept, into ``attacks/.before-manifests/`` (:data:`LEGACY_FOLDER`), so that
        the commands that compute them (``audit``, ``reproduce``, ``attack``) compute them
        again. Returns where they went; ``log`` gets a note."""
        found = self.legacy_folders()
        derived = found["attack"] + found["pool"]
        moved = []
        for folder in derived:
            target = self.attacks / LEGACY_FOLDER / (("pools-" if folder.parent.name == "pools" else "") + folder.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            n = 1
            while target.exists():
                n += 1
                target = target.with_name(f"{target.name.split('~')[0]}~{n}")
            os.replace(folder, target)
            moved.append(target)
        if moved and log:
            log(f"note: {_count(moved, 'attack or pool folder')} had no checksums (written by an earlier privaudit, "
                f"whose attack code may differ from this version's): moved aside to {self.attacks / LEGACY_FOLDER}; "
                "`privaudit audit` or `privaudit attack` computes them again")
        return moved

    def refuse_legacy_results(self) -> None:
        """Raise :class:`ArtifactError` when attack or pool folders written before checksummed
        manifests are present (a command that reads results without computing them, such as
        ``report``, would otherwise show an earlier version's numbers as this one's), naming
        the command that computes them again."""
        found = self.legacy_folders()
        derived = found["attack"] + found["pool"]
        if derived:
            archs = sorted({self.read_model_config(n).model.name for n in self.model_names("target")}) or ["mlp"]
            commands = " and ".join(f"`privaudit attack --target {a} --workdir {self.root}`" for a in archs)
            raise ArtifactError(f"{_count(derived, 'attack or pool folder')} in {self.attacks} had no checksums "
                                f"(written by an earlier privaudit, e.g. {derived[0].name}): run {commands} to "
                                "compute them with this version (the old ones are kept aside), then report")

    def damaged_parent(self, kind: str) -> Path | None:
        """The folder that holds the ``kind`` folders (model, attack, pool), or None."""
        return {"model": self.models, "attack": self.attacks, "pool": self.attacks / "pools"}.get(kind)

    def set_aside_damaged(self, exc: DamagedArtifactError) -> Path | None:
        """Move the folder that ``exc`` reports damaged, kept, into ``.damaged/`` beside it
        (:data:`DAMAGED_FOLDER`, the name suffixed with the UTC time), so that the run that
        needs it computes it again; returns where it went. None when there is nothing of this
        workspace to move: a folder of another kind, one that is gone, or one that is whole
        when checked again under the artifact's ``commit`` lock (another process replaced
        it, or it arrived damaged in transit and was never committed)."""
        parent = self.damaged_parent(exc.kind)
        name = Path(exc.folder).name
        if parent is None or not name or name.startswith("."):
            return None
        folder = parent / name
        with artifact_lock(parent, name, "commit"):  # no commit swaps the folder while it moves
            if not folder.is_dir() or not self._still_damaged(exc.kind, name):
                return None
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            target, n = parent / DAMAGED_FOLDER / f"{name}-{stamp}", 1
            while target.exists():
                n += 1
                target = target.with_name(f"{name}-{stamp}~{n}")
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(folder, target)
        return target

    def _still_damaged(self, kind: str, name: str) -> bool:
        """Whether the ``kind`` folder ``name`` fails its checks now."""
        try:
            if kind == "model":
                self.read_model_config(name)
                self.verify_model(name)
                self.read_model_metrics(name)
            else:
                parent = self.damaged_parent(kind)
                assert parent is not None
                verify_folder(parent / name, kind)
        except DamagedArtifactError:
            return True
        except ArtifactError:  # another run's config under this name: not damage, left as it is
            return False
        return False

    def commit_folder(self, parent: Path, name: str, write) -> Path:
        """Build ``parent/name`` in a hidden temporary folder via ``write(tmp_path)``, then
        rename it into place atomically. An existing complete folder is replaced. The swap holds
        the artifact's ``commit`` lock (:mod:`privaudit.files.locks`), so concurrent writers of one
        name take turns. Before the rename the folder gets its ``manifest.json``
        (:mod:`privaudit.files.integrity`); a folder that ``write`` filled with a manifest of its own
        (a shipped bundle) is checked against it instead, and refused when it does not match."""
        final = parent / name
        parent.mkdir(parents=True, exist_ok=True)
        remove_orphans(parent, PARTIAL_PREFIX)
        tmp = Path(tempfile.mkdtemp(prefix=f"{PARTIAL_PREFIX}{owner_tag()}-{name}-", dir=parent))
        backup: Path | None = None
        try:
            shared_mode(tmp, folder=True)
            write(tmp)
            if (tmp / MANIFEST).is_file():
                check_incoming(tmp, folder_kind(parent), str(final))
            else:
                write_manifest(tmp)
            with artifact_lock(parent, name, "commit"):  # another process may commit the same name
                if final.exists():
                    backup = Path(tempfile.mkdtemp(prefix=f"{PARTIAL_PREFIX}{owner_tag()}-old-{name}-", dir=parent))
                    os.replace(final, backup / name)
                os.replace(tmp, final)
        except BaseException:
            if backup is not None and (backup / name).exists() and not final.exists():
                os.replace(backup / name, final)  # put the earlier artifact back
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            if backup is not None:
                shutil.rmtree(backup, ignore_errors=True)
        return final

    def save_model(self, config: RunConfig, model: nn.Module, normaliser: Normaliser,
                   metrics: dict, provenance: dict,
                   loss_trace: tuple[np.ndarray, np.ndarray] | None = None) -> Path:
        """Commit a trained model's folder; ``loss_trace`` (trace (epochs, members), the members'
        dataset indices) is saved beside it when the engine recorded one
        (:mod:`privaudit.training.trace`)."""
        def write(tmp: Path) -> None:
            save_weights(tmp / "weights.npz", model, normaliser)
            if loss_trace is not None:
                write_bytes(tmp / TRACE_FILE, npz_bytes({"trace": np.asarray(loss_trace[0], dtype=np.float16),
                                                         "indices": np.asarray(loss_trace[1], dtype=np.int64)}))
            write_json(tmp / "metrics.json", metrics)
            write_json(tmp / "config.json", {**config.to_dict(), "run_name": config.run_name,
                                             "config_hash": config.config_hash, "provenance": provenance})

        return self.commit_folder(self.models, config.run_name, write)

    def derive_model(self, config: RunConfig, base: str, provenance: dict) -> Path:
        """Save ``config``'s model as the weights of the saved model ``base`` (an output-side
        defence's model: :attr:`RunConfig.trained_as`): the weights file linked (copied where
        links are not possible), the metrics those of ``base`` with ``trained_as`` naming it."""
        source = self.model_dir(base)
        self.verify_model(base)

        def write(tmp: Path) -> None:
            try:
                os.link(source / "weights.npz", tmp / "weights.npz")
            except OSError:
                shutil.copyfile(source / "weights.npz", tmp / "weights.npz")
            write_json(tmp / "metrics.json", {**self.read_model_metrics(base), "trained_as": base})
            write_json(tmp / "config.json", {**config.to_dict(), "run_name": config.run_name,
                                             "config_hash": config.config_hash,
                                             "provenance": {**provenance, "trained_as": base}})

        return self.commit_folder(self.models, config.run_name, write)

    # -- reading --------------------------------------------------------------------------
    def model_dir(self, name: str) -> Path:
        return self.models / name

    def read_loss_trace(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The loss trace saved with model ``name``: (trace float16 (epochs, members), the
        members' dataset indices), or None when the model has none (trained before traces were
        recorded, by an engine that records none, or an output-side defence's derived folder).
        The folder is verified against its manifest first."""
        folder = self.model_dir(name)
        if not (folder / TRACE_FILE).is_file():
            return None
        verify_folder(folder, "model")
        try:
            with np.load(folder / TRACE_FILE, allow_pickle=False) as npz:
                trace, indices = npz["trace"], npz["indices"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise damaged("model", folder, f"{TRACE_FILE} cannot be read ({exc})") from exc
        if trace.ndim != 2 or indices.shape != (trace.shape[1],):
            raise damaged("model", folder, f"{TRACE_FILE} holds a trace of shape {trace.shape} for "
                                           f"{indices.shape} indices")
        return trace, indices

    def read_model_config(self, name: str) -> RunConfig:
        """The config saved in model folder ``name``. A folder whose ``config.json`` is
        missing, not JSON or not a privaudit config raises :class:`DamagedArtifactError`
        naming the folder; one that holds another run's config (renamed or edited) a plain
        :class:`ArtifactError`."""
        folder = self.model_dir(name)
        path = folder / "config.json"
        if not path.is_file() and not folder.is_dir():
            raise ArtifactError(f"no model folder {folder}")
        try:
            raw = read_json(path)
        except ArtifactError as exc:
            cause = exc.__cause__
            if isinstance(cause, FileNotFoundError):
                why = "is missing"
            elif isinstance(cause, (ValueError, UnicodeDecodeError)):  # JSONDecodeError is a ValueError
                why = f"is not valid JSON ({cause})"
            else:
                why = f"cannot be read ({getattr(cause, 'strerror', None) or cause or exc})"
            raise damaged("model", folder, f"config.json {why}") from exc
        if not isinstance(raw, dict):
            raise damaged("model", folder, "config.json is not a privaudit config")
        try:
            cfg = RunConfig.from_dict(raw)
        except ConfigError as exc:
            raise damaged("model", folder, f"config.json is not a valid privaudit config ({exc})") from exc
        if cfg.run_name != name:
            raise ArtifactError(f"model folder {name} holds the config of {cfg.run_name}; it was renamed or edited")
        return cfg

    def has_model(self, config: RunConfig) -> bool:
        """True when a complete, undamaged model folder with exactly this config exists.

        No folder, or one that holds another config (renamed or edited, so its hash differs
        from its name): False, and a training run replaces it. A folder of this config that is
        damaged (a file that differs from its manifest, an unreadable ``config.json``, or, in a
        folder written before manifests, weights that do not load): raises
        :class:`DamagedArtifactError`, so that nothing is trained on top of it or reused.
        """
        folder = self.model_dir(config.run_name)
        if not folder.is_dir():
            return False
        try:
            if self.read_model_config(config.run_name) != config:
                return False
        except DamagedArtifactError:
            raise
        except ArtifactError:
            return False
        self.verify_model(config.run_name)
        return True

    def verify_model(self, name: str) -> None:
        """Check model folder ``name`` before it is reused; raises :class:`DamagedArtifactError`.

        With a manifest: every file matches its recorded size and SHA-256 (cached per process).
        Without one (written by privaudit before manifests existed) the folder is accepted
        when its three files exist and its weights load into the model of its config (the
        check is remembered per process while the files are unchanged); such a folder gets
        no manifest until it is written again.
        """
        folder = self.model_dir(name)
        if verify_folder(folder, "model"):
            return
        cfg = self.read_model_config(name)
        for f in MODEL_FILES:
            if not (folder / f).is_file():
                raise damaged("model", folder, f"{f} is missing")
        path = folder / "weights.npz"
        try:
            st = os.stat(path)
        except OSError as exc:
            raise damaged("model", folder, f"weights.npz cannot be read ({exc.strerror or exc})") from exc
        key = (stat_key(st), cfg.config_hash)
        if key in _legacy_ok:
            return
        try:
            load_weights(path, cfg, _saved_input_shape(path))
        except ArtifactError as exc:
            raise damaged("model", folder, str(exc)) from exc
        if settled(st):
            _legacy_ok.add(key)

    def read_model_metrics(self, name: str) -> dict:
        """The saved metrics of model folder ``name``; a damaged ``metrics.json`` raises
        :class:`DamagedArtifactError` naming the folder."""
        try:
            metrics = read_json(self.model_dir(name) / "metrics.json")
        except ArtifactError as exc:
            raise damaged("model", self.model_dir(name), f"metrics.json cannot be read ({exc})") from exc
        if not isinstance(metrics, dict):
            raise damaged("model", self.model_dir(name), "metrics.json is not a privaudit metrics file")
        return metrics

    def load_model(self, name: str, input_shape: tuple[int, int, int], num_classes: int = 10) -> LoadedModel:
        cfg = self.read_model_config(name)
        verify_folder(self.model_dir(name), "model")  # a folder without a manifest: loading checks it
        model, norm = load_weights(self.model_dir(name) / "weights.npz", cfg, input_shape, num_classes)
        return LoadedModel(name, cfg, model, norm, self.read_model_metrics(name))

    def model_names(self, role: str | None = None) -> list[str]:
        """Names of complete model folders (optionally of one role), sorted."""
        if not self.models.is_dir():
            return []
        names = []
        for p in sorted(self.models.iterdir()):
            if p.name.startswith(".") or not p.is_dir() or not (p / "config.json").is_file():
                continue
            if role is None or p.name.startswith(role + "-"):
                names.append(p.name)
        return names

    def resolve_targets(self, spec: str, dataset: str | None = None, seeds: list[int] | None = None) -> list[str]:
        """Target runs named by ``spec``: a run name, or an architecture (all its targets,
        ordered dataset, baseline, MG noise by κ, then DP-SGD by σ), only those trained on
        ``dataset`` and with a root seed in ``seeds`` when they are given."""
        names = self._resolve_targets(spec)
        if dataset is not None:
            names = [n for n in names if self.read_model_config(n).data.dataset == dataset]
            if not names:
                raise ArtifactError(f"no {spec} target trained on {dataset} in {self.models}; run "
                                    f"`privaudit train --dataset {dataset}` first, or drop `dataset`")
        if seeds is not None:
            names = [n for n in names if self.read_model_config(n).seed in seeds]
            if not names:
                raise ArtifactError(f"no {spec} target{' on ' + dataset if dataset else ''} trained with seed "
                                    f"{', '.join(map(str, seeds))} in {self.models}; train it with `seeds` first, "
                                    f"or drop `seeds`")
        return names

    def _resolve_targets(self, spec: str) -> list[str]:
        if spec in MODELS or is_custom_model(spec):
            configs = {}
            for name in self.model_names("target"):
                try:
                    cfg = self.read_model_config(name)
                except DamagedArtifactError:
                    if _architecture_of(name) == model_tag(spec):  # one of the asked-for targets: say which
                        raise
                    continue
                except ArtifactError:
                    continue
                if cfg.model.name == spec:
                    configs[name] = cfg
            names = sorted(configs, key=lambda n: _setting_order(configs[n]))
            if not names:
                raise ArtifactError(f"no trained {spec} target in {self.models}; run `privaudit train --model {spec}` "
                                    "first")
            return names
        if (self.model_dir(spec) / "config.json").is_file():
            cfg = self.read_model_config(spec)
            if cfg.role != "target":
                raise ArtifactError(f"{spec} is a {cfg.role} model, not a target")
            return [spec]
        raise ArtifactError(f"no target named {spec!r} in {self.models} "
                            f"(give a run name or one of {', '.join(MODELS)})")


def _architecture_of(run_name: str) -> str | None:
    """The architecture in a run name ``<role>-<model>-…`` (the longest model name that fits)."""
    role, _, rest = run_name.partition("-")
    fits = [m for m in MODELS if rest.startswith(m + "-")]
    if rest.startswith(("tv-", "mod-")):  # the user's own (config.model_tag): tv-<name>, mod-<callable>
        return "-".join(rest.split("-")[:2])
    return max(fits, key=len) if fits else None


def _saved_input_shape(path: Path) -> tuple[int, int, int]:
    """The input shape a weights file was saved for (its normaliser's shape), or a
    placeholder when it cannot be read (then :func:`load_weights` says what is wrong)."""
    try:
        _check_npz_sizes(path)
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            return (1, 1, 1)
        with loaded as npz:
            shape = tuple(int(n) for n in npz[NORM_KEYS[0]].shape)
        return shape if len(shape) == 3 else (1, 1, 1)  # type: ignore[return-value]
    except WEIGHTS_FILE_ERRORS:  # load_weights reports the damage
        return (1, 1, 1)


def _setting_order(cfg: RunConfig) -> tuple:
    d = cfg.defence
    return (cfg.data.dataset, d.dp, d.kappa, d.noise_multiplier or 0.0, -(d.target_epsilon or 0.0), cfg.seed)
