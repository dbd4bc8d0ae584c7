"""A damaged workspace folder set aside and computed again, instead of the whole run stopped.

The commands that compute what they reuse (``train``, ``audit``, ``attack``, ``reproduce
mg-noise``) are wrapped in :func:`computes_damage_again`: when a folder the run reuses fails
its checks (:class:`~privaudit.errors.DamagedArtifactError`: a file that differs from its
manifest, an unreadable ``config.json``, weights that do not load), the folder is moved,
kept, into ``.damaged/`` beside it (:meth:`~privaudit.pipeline.workspace.Workspace.set_aside_damaged`),
one note line says so, and the call runs again as a rerun of the command would: everything
else is reused, and what was set aside is computed again. That is safe because each of these
folders is a function of settings the run holds: a model of its config and seed (bit for
bit, :mod:`privaudit.core.seeding`), a pool's logits and an attack's scores of those models.

``attack`` reads its targets from the workspace rather than from its options: a damaged
target is trained again from its own ``config.json`` (whose hash is the folder's name, so
the settings are the ones it was trained with) before the attack runs again; a target whose
config cannot be read cannot be trained again here, and stays a one-line refusal. So does a
folder reported damaged a second time (the disk keeps damaging it) and anything that is not
a model, attack or pool folder of this workspace (a data cache, the user's own files).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from privaudit.errors import ArtifactError, DamagedArtifactError

if TYPE_CHECKING:
    from privaudit.core.config import RunConfig
    from privaudit.pipeline.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])


def computes_damage_again(fn: F) -> F:
    """Wrap a command's API function (keyword arguments ``workdir``, ``log``, ``dry_run``)
    so that a damaged folder it reuses is set aside and the call runs again (module
    docstring). A dry run moves nothing."""
    return _repairing(fn, targets_in_workspace=False)


def computes_damage_again_with_targets(fn: F) -> F:
    """:func:`computes_damage_again` for a function whose targets are read from the
    workspace (``attack``; also ``data_dir``, ``download``, ``device``, ``on_start``,
    ``on_epoch``): a damaged target is trained again from its saved config first."""
    return _repairing(fn, targets_in_workspace=True)


def _repairing(inner: F, targets_in_workspace: bool) -> F:
    @functools.wraps(inner)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("dry_run"):
            return inner(*args, **kwargs)
        seen: set[tuple[str, str]] = set()
        while True:
            try:
                return inner(*args, **kwargs)
            except DamagedArtifactError as exc:
                _set_aside(exc, seen, kwargs, targets_in_workspace)

    return cast(F, call)


def _set_aside(exc: DamagedArtifactError, seen: set[tuple[str, str]], kwargs: dict[str, Any],
               targets_in_workspace: bool) -> None:
    """Set aside the folder ``exc`` names (and, for ``attack``, train a damaged target again),
    or raise: ``exc`` itself where nothing can be set aside, the refusal where a target's
    settings cannot be read."""
    from privaudit.pipeline.workspace import Workspace

    ws = Workspace(kwargs.get("workdir", "."))
    key = (exc.kind, exc.folder)
    if key in seen or ws.damaged_parent(exc.kind) is None:
        raise exc
    seen.add(key)
    target = None
    if targets_in_workspace and exc.kind == "model":
        target = _target_config(ws, exc)
    moved = ws.set_aside_damaged(exc)
    if moved is None:
        return  # whole again (another process replaced it): run again, once
    again = "trained again" if exc.kind == "model" else "computed again"
    say = kwargs.get("log") or (lambda line: None)
    say(f"note: {exc.kind} folder {exc.folder} is damaged ({exc.problem or 'see its manifest'}): set aside as "
        f"{moved}, {again}")
    if target is not None:
        _train_target(ws, target, kwargs)


def _target_config(ws: Workspace, exc: DamagedArtifactError) -> RunConfig | None:
    """The config of the damaged model folder ``exc`` names when it is a target (None for a
    shadow, reference or canary model, which the attack trains itself); raises the one-line
    refusal when its config cannot be read."""
    name = Path(exc.folder).name
    try:
        cfg = ws.read_model_config(name)
    except ArtifactError:
        if not name.startswith("target-"):
            return None
        raise DamagedArtifactError(
            f"{exc.kind} folder {exc.folder} is damaged: {exc.problem}; without its settings attack cannot train "
            "it again: rerun the `privaudit train` or `privaudit audit` that trained it (it sets the folder aside "
            "and trains it again)", kind=exc.kind, folder=exc.folder, problem=exc.problem) from exc
    return cfg if cfg.role == "target" else None


def _train_target(ws: Workspace, cfg: RunConfig, kwargs: dict[str, Any]) -> None:
    """Train the target of ``cfg`` again into ``ws``, as ``privaudit train`` trained it."""
    from privaudit.pipeline.runs import DataCache, ensure_model
    from privaudit.training import resolve_device

    ensure_model(cfg, ws, DataCache(kwargs.get("data_dir"), kwargs.get("download", False)),
                 resolve_device(kwargs.get("device", "auto")), on_start=kwargs.get("on_start"),
                 on_epoch=kwargs.get("on_epoch"))
