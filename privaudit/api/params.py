"""The one place that turns the options of every command into values: the command line passes
its option strings, the Python API its keyword arguments (strings as on the command line, or
numbers and lists), and both get the same checks and the same one-line
:class:`~privaudit.errors.ConfigError`, naming the option as the command line spells it. A
check the command line makes while parsing (:mod:`privaudit.cli.callbacks`) says the problem
found here (``*_problem``), as a usage error. The library below the API names a setting by its
field (```batch_size```); :func:`flag` is the one table from fields to options, and every
command's API function (:func:`options_named`) and the command line's error handler say the
field as the option (:func:`as_options`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from privaudit.api.recipe import model_args as model_args  # the --model-arg pairs, parsed where the recipe is
from privaudit.core.defaults import MAX_SEED
from privaudit.defences import DEFENCES
from privaudit.errors import FIELD, ArtifactError, ConfigError, DataError, PrivauditError

#: the ranges of the numbers several commands take, keyword → (low, high) or (low, high,
#: low_open): the command line's options (privaudit.cli.options) and the API's checks
#: (:func:`bounded`) both read them. κ and σ are MG noise's and DP-SGD's knobs, their ranges
#: the knobs' own with 0 (no mask) allowed for κ.
_KAPPA, _SIGMA = (knob for knob in (DEFENCES["mg"].knob, DEFENCES["dpsgd"].knob) if knob is not None)
RANGES: dict[str, tuple[Any, ...]] = {
    "kappa": (0.0, _KAPPA.high),
    "noise_multiplier": (_SIGMA.low, _SIGMA.high, _SIGMA.low_open),
    "l2": (0.0, 1e6),
    "max_grad_norm": (0.0, 1e6, True),
}

if TYPE_CHECKING:
    from privaudit.api.recipe import Recipe
    from privaudit.pipeline.attacking import AttackPlan
    from privaudit.pipeline.runs import DataCache

#: a grid of numbers: "0.5,1", "none", or a sequence of numbers
Grid = str | Sequence[float] | None
#: seeds: "0,1,2", one integer, or a sequence of integers
Seeds = str | int | Sequence[int] | None


def outside(value: float, low: float | None, high: float | None, low_open: bool) -> bool:
    """Whether ``value`` lies outside [low, high] (``low_open``: (low, high]); None = unbounded."""
    below = low is not None and (value <= low if low_open else value < low)
    return below or (high is not None and value > high)


def num(v: float) -> str:
    """A bound or value as a person writes it: ``100000``, ``0.5``, ``1e-05``."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e16 else f"{v:g}"


def range_problem(value: float, low: float | None, high: float | None, low_open: bool = False) -> str | None:
    """What is wrong with ``value`` as a number in [low, high] (``low_open``: (low, high]), in
    words that follow the option's name (``must be between 0 and 100 (got -1)``); None when
    nothing is. The command line's callbacks say it as a usage error, the API as a
    ConfigError (:func:`in_range`)."""
    if not math.isfinite(value):
        return f"must be a finite number (got {value})"
    if outside(value, low, high, low_open):
        return f"must be {range_text(low, high, low_open)} (got {num(value)})"
    return None


def in_range(value: float | None, option: str, low: float | None = None, high: float | None = None,
             low_open: bool = False) -> float | None:
    """``value`` when it is None or a finite number in [low, high] (``low_open``: (low, high]);
    else a ConfigError naming ``option``."""
    problem = None if value is None else range_problem(value, low, high, low_open)
    if problem:
        raise ConfigError(f"{option} {problem}")
    return value


def span(name: str) -> dict[str, Any]:
    """:data:`RANGES`' entry for ``name`` as :func:`grid`'s keywords (low, high, low_open)."""
    low, high, *rest = RANGES[name]
    return {"low": low, "high": high, "low_open": bool(rest and rest[0])}


def bounded(bounds: Mapping[str, tuple[Any, ...]], **values: float | None) -> None:
    """Each of ``values`` (None passes) within its range in ``bounds`` (keyword → ``(low, high)``
    or ``(low, high, low_open)``, the ranges the command line's options declare too), else a
    ConfigError naming its option (:func:`flag`)."""
    for name, value in values.items():
        in_range(value, flag(name), *bounds[name])


#: the keyword arguments and fields whose command-line option has another name (privaudit.cli.options)
OPTION_NAMES = {"references": "--pool-size", "noise_multiplier": "--sigma", "l2": "--weight-decay",
                "defence": "--defence", "defences": "--defences", "model_args": "--model-arg"}


def flag(name: str) -> str:
    """A keyword argument's or field's command-line option: ``local_steps`` → ``--local-steps``,
    ``references`` → ``--pool-size`` (:data:`OPTION_NAMES`)."""
    return OPTION_NAMES.get(name, "--" + name.replace("_", "-"))


def as_options(message: str) -> str:
    r"""``message`` with each setting it names as the library below the API names it, by its
    field in backticks (:data:`privaudit.errors.FIELD`: ``\`batch_size\` must be >= 1``), named
    as the command line's option instead (``--batch-size must be >= 1``, :func:`flag`)."""
    return FIELD.sub(lambda m: flag(m.group(1)), message)


F = TypeVar("F", bound=Callable[..., Any])


def options_named(fn: F) -> F:
    """``fn``, a command's API function, whose :class:`~privaudit.errors.PrivauditError` name
    each setting as the command line's option (:func:`as_options`), the same error object
    re-raised."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PrivauditError as exc:
            if exc.args and isinstance(exc.args[0], str):
                exc.args = (as_options(exc.args[0]), *exc.args[1:])
            raise

    return cast(F, call)


#: an empty path option, in words that follow its name (it would silently mean the current folder)
EMPTY_PATH = "must not be empty (give a folder, e.g. '.')"


@overload
def path(value: str | Path, option: str) -> Path: ...
@overload
def path(value: None, option: str) -> None: ...
@overload
def path(value: str | Path | None, option: str) -> Path | None: ...
def path(value: str | Path | None, option: str) -> Path | None:
    """``value`` as a Path (None stays None); an empty path is a ConfigError naming ``option``."""
    if value is None:
        return None
    if not str(value).strip():
        raise ConfigError(f"{option} {EMPTY_PATH}")
    return Path(value)


def require_workspace(workdir: str | Path, *, with_content: bool = True) -> Path:
    """``workdir`` when it exists (and, with ``with_content``, holds ``models/`` or
    ``attacks/``: it is a privaudit workspace); else an :class:`ArtifactError` naming it."""
    root = path(workdir, "--workdir")
    if not root.is_dir():
        raise ArtifactError(f"workspace {root} does not exist (give --workdir the folder that holds models/ "
                            "and attacks/, or run `privaudit audit` or `privaudit train` there first)")
    if with_content and not ((root / "models").is_dir() or (root / "attacks").is_dir()):
        raise ArtifactError(f"{root} is not a privaudit workspace: it holds neither models/ nor attacks/ "
                            "(run `privaudit audit` or `privaudit train` there first)")
    return root


def range_text(low: float | None, high: float | None, low_open: bool) -> str:
    if high is None:
        assert low is not None  # called for a value outside [low, high], so one bound is given
        return f"{'>' if low_open else '>='} {num(low)}"
    if low is None:
        return f"<= {num(high)}"
    if low_open:
        return f"> {num(low)} and <= {num(high)}"
    return f"between {num(low)} and {num(high)}"


def grid_text(values: Iterable[float]) -> str:
    """A grid as the command line writes it: ``0.5,1,2``."""
    return ",".join(f"{v:g}" for v in values)


def grid(value: Grid, option: str, *, low: float | None = None, low_open: bool = False,
         high: float | None = None) -> list[float]:
    """A comma-separated list of finite numbers ("none" = empty), or a sequence of numbers,
    each within [low, high] (``low_open``: above low) and given once (as :func:`seeds`
    refuses a seed twice), naming ``option`` in the error. An empty text is refused: an
    unset shell variable (``--kappas "$K"``) must not silently mean "none"."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ConfigError(f"{option} is empty: give comma-separated numbers, or none for no values")
        if text.lower() == "none":
            return []
        parts: Iterable[str | float] = text.split(",")
    elif isinstance(value, (int, float)):
        parts = [value]
    else:
        parts = list(value)
    values = []
    for part in parts:
        try:
            number = float(part)
        except (TypeError, ValueError):
            raise ConfigError(f"{option} expects comma-separated numbers, got {str(part).strip()!r}") from None
        if not math.isfinite(number):
            raise ConfigError(f"{option} expects finite numbers, got {str(part).strip()!r}")
        if outside(number, low, high, low_open):
            raise ConfigError(f"{option} values must be {range_text(low, high, low_open)} (got {num(number)})")
        if number in values:
            raise ConfigError(f"{option} lists {num(number)} twice")
        values.append(number)
    return values


def seeds(value: Seeds, seed: int = 0) -> list[int]:
    """``"0,1,2"``, ``[0, 1, 2]`` or ``3`` → a list of seeds (order kept, duplicates refused);
    None → ``[seed]``."""
    if value is None:
        value = [seed]
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [str(value)]
    else:
        # a bool (an int to the type system) is no sequence either: iterating it fails, as it did
        parts = [str(p).strip() for p in cast("Sequence[int]", value)]
    out: list[int] = []
    for part in parts:
        if not (part.isascii() and part.isdigit()) or int(part) > MAX_SEED:
            raise ConfigError(f"--seeds expects comma-separated integers from 0 to {MAX_SEED}, got {part!r}")
        if int(part) in out:
            raise ConfigError(f"--seeds lists {int(part)} twice")
        out.append(int(part))
    if not out:
        raise ConfigError("--seeds needs at least one seed")
    return out


def attacks(value: str | Sequence[str], pool_size: int, shadow_dataset: str | None = None) -> AttackPlan:
    """``"lira,rmia"``, ``["lira", "rmia"]`` or ``["lira,rmia"]`` → an AttackPlan."""
    from privaudit.pipeline.attacking import AttackPlan

    items = value.split(",") if isinstance(value, str) else [v for item in value for v in str(item).split(",")]
    return AttackPlan.from_choices([v.strip() for v in items if v.strip()], pool_size, shadow_dataset)


def normal_dataset(value: str) -> str | None:
    """A dataset known by name, or the user's own ``npz:PATH`` / ``folder:PATH`` with its path
    made absolute (the name a model's config records); None for anything else."""
    from privaudit.core.defaults import CUSTOM_DATASET_PREFIXES, NAMED_DATASETS

    if value in NAMED_DATASETS:
        return value
    if str(value).startswith(CUSTOM_DATASET_PREFIXES):
        kind, _, path = str(value).partition(":")
        if path.strip():
            return f"{kind}:{Path(path).expanduser().resolve()}"
    return None


def custom_dataset_problem(name: str) -> str | None:
    """Why the user's own data ``npz:PATH`` / ``folder:PATH`` cannot be read, judged from the
    file system and an archive's array headers alone (a missing path, a file where a folder
    is expected, a file that is not an .npz archive, an ``x`` that is not uint8 images), or
    None: so that ``--dataset`` is refused before torch loads."""
    from privaudit.files.npfiles import npz_problem

    kind, _, raw = str(name).partition(":")
    if kind not in ("npz", "folder"):
        return None
    where = Path(raw)
    if kind == "folder":
        if not where.exists():
            return f"folder:{where}: no such folder"
        return None if where.is_dir() else f"folder:{where}: a file, not a folder (expected one sub-folder per class)"
    if not where.exists():
        return f"npz:{where}: no such file"
    if where.is_dir():
        return f"npz:{where}: a folder, not an .npz file (for a folder of images give folder:PATH)"
    try:
        problem = npz_problem(where)
    except DataError as exc:
        return str(exc)
    if problem is None:
        from privaudit.data.custom import npz_images_problem

        problem = npz_images_problem(where)
    return f"npz:{where}: {problem}" if problem else None


def dataset_problem(value: str) -> str | None:
    """Why ``value`` is no dataset (neither a known name nor ``npz:PATH`` / ``folder:PATH``, or
    the user's own data that cannot be read: :func:`custom_dataset_problem`), in words that
    follow the option's name; None when it is one."""
    from privaudit.core.defaults import NAMED_DATASETS

    name = normal_dataset(value)
    if name is None:
        return f"{value!r} is not one of {', '.join(NAMED_DATASETS)}, npz:PATH or folder:PATH"
    return custom_dataset_problem(name)


def dataset_name(value: str, option: str = "--dataset") -> str:
    """:func:`normal_dataset`, or a ConfigError naming ``option`` (:func:`dataset_problem`)."""
    problem = dataset_problem(value)
    if problem:
        raise ConfigError(f"{option} {problem}")
    name = normal_dataset(value)
    assert name is not None  # dataset_problem found no problem: value names a dataset
    return name


def model_problem(value: str) -> str | None:
    """Why ``value`` is no architecture: neither a built-in one nor ``torchvision:NAME`` or
    ``module:MODULE:CALLABLE`` (checked for its form here; built, and so checked for real,
    when a model trains); None when it is one."""
    from privaudit.core.config import MODELS
    from privaudit.core.defaults import CUSTOM_MODEL_PREFIXES

    if value in MODELS:
        return None
    kind, _, rest = str(value).partition(":")
    if (kind == "torchvision" and rest.strip()) or (kind == "module" and ":" in rest
                                                    and all(p.strip() for p in rest.rpartition(":")[::2])):
        return None
    return (f"{value!r} is not one of {', '.join(MODELS)}, {' or '.join(p + '…' for p in CUSTOM_MODEL_PREFIXES)} "
            "(torchvision:NAME, module:MODULE:CALLABLE)")


def model_name(value: str) -> str:
    """``value`` when it names an architecture (:func:`model_problem`), else a ConfigError naming ``--model``."""
    problem = model_problem(value)
    if problem:
        raise ConfigError(f"--model {problem}")
    return value


def require_data(dataset: str, data_dir: str | Path | None, download: bool) -> None:
    """CIFAR-10 is in ``data_dir`` (or will be downloaded), else the :class:`DataError` its
    loader would raise, said before anything heavy loads (the folder is looked at, nothing read)."""
    if dataset != "cifar10" or download:
        return
    from privaudit.data.loaders import cifar10_missing, find_cifar10

    if find_cifar10(data_dir) is None:
        raise DataError(cifar10_missing(data_dir))


def writable_workdir(workdir: str | Path) -> Path:
    """``workdir`` as a Path when a workspace can be written there (a writable folder, or one
    that can be created), checked before anything is planned or loaded: a ``--dry-run`` is
    refused as the run would be. Else an error naming ``--workdir``
    (:func:`privaudit.files.atomic.check_output_folder`)."""
    from privaudit.files.atomic import check_output_folder

    return check_output_folder(path(workdir, "--workdir"), "--workdir")


def dataset_config(dataset: str, data_dir: str | Path | None,
                   download: bool) -> tuple[dict[str, Any], DataCache | None]:
    """(what :func:`~privaudit.core.config.make_config` needs beyond the dataset's name, the
    :class:`~privaudit.pipeline.runs.DataCache` that loaded it or None). Only the user's own data is
    read here (for its fingerprint and size); a dataset known by name loads when a model
    trains, so that a refused setting still answers before torch is imported (CIFAR-10's
    folder is looked for here: :func:`require_data`)."""
    from privaudit.core.config import is_custom_dataset

    require_data(dataset, data_dir, download)

    if not is_custom_dataset(dataset):
        return {}, None
    from privaudit.pipeline.runs import DataCache

    data = DataCache(data_dir, download)
    return data.config_kwargs(dataset), data


def recipe(given: Recipe | None, overrides: dict[str, Any]) -> Recipe:
    """The API's ``recipe=`` (default: :class:`~privaudit.api.recipe.Recipe`'s defaults) with
    its keyword ``overrides``, the dataset's name normalised (:func:`dataset_name`)."""
    from dataclasses import replace

    from privaudit.api.recipe import Recipe

    if given is not None and not isinstance(given, Recipe):
        raise ConfigError(f"recipe= takes a privaudit Recipe, not {type(given).__name__}")
    chosen = (given or Recipe()).with_overrides(overrides)
    if chosen.canaries:  # said before anything loads, as the command line's --canaries says it
        from privaudit.core.config import parse_canaries

        parse_canaries(chosen.canaries)
    return replace(chosen, dataset=dataset_name(chosen.dataset))


def one_of(value: str, option: str, *choices: str) -> str:
    if value not in choices:
        raise ConfigError(f"{option} {value!r} is not one of {', '.join(choices)}")
    return value


def defence_choice(defence: str | None, knob: float | None, *, kappa: float = 0.0, dp: bool = False,
                   noise_multiplier: float | None = None, target_epsilon: float | None = None) -> dict[str, Any]:
    """``train``'s defence options as :func:`privaudit.core.config.make_config` arguments.

    ``--defence mg --knob κ`` is ``--kappa κ``; ``--defence dpsgd|noisycgd`` is ``--dp`` with
    that mechanism, σ from ``--knob`` or ``--sigma`` (or ``--target-epsilon``);
    any other defence is its name and knob. A value given twice is an error."""
    from privaudit.defences import get

    out = {"kappa": kappa, "dp": dp, "noise_multiplier": noise_multiplier, "target_epsilon": target_epsilon}
    if defence is None:
        if knob is not None:
            raise ConfigError("--knob needs --defence NAME")
        return out
    chosen = get(defence)
    if chosen.name == "mg":
        if knob is not None and kappa:
            raise ConfigError("give MG noise's kappa once: --knob or --kappa")
        out["kappa"] = chosen.check_knob(knob if knob is not None else (kappa or None))
        return out
    if chosen.name in ("dpsgd", "noisycgd"):
        if knob is not None and (noise_multiplier is not None or target_epsilon is not None):
            raise ConfigError(f"give {chosen.name}'s sigma once: --knob, --sigma or --target-epsilon")
        if knob is not None:
            out["noise_multiplier"] = chosen.check_knob(knob)
        return {**out, "dp": True, "mechanism": chosen.name}
    if kappa or dp or noise_multiplier is not None or target_epsilon is not None:
        raise ConfigError(f"one defence a model: --defence {chosen.name} trains without --kappa and --dp")
    return {**out, "defense": chosen.name, "knob": knob}


def defence_grids(defences: str | Sequence[str] | None, knobs: Sequence[str] | dict[str, Any] | None = None
                  ) -> tuple[list[str] | None, list[tuple[str, list[float]]], set[str]]:
    """``audit``'s ``--defences`` and ``--knobs`` → (the names asked for, or None when
    ``--defences`` was not given; the other defences' grids, each (name, knob values); the
    names whose grid ``--knobs`` gave).

    ``--knobs`` entries are ``NAME=v1,v2`` (or a mapping name → values) and replace a
    defence's default grid (:attr:`privaudit.defences.Knob.grid`); MG noise and DP-SGD take
    their grids from ``--kappas`` and ``--sigmas``."""
    from privaudit.defences import FIELD_DEFENCES, get, parse

    chosen = None if defences is None else [d.name for d in parse(defences)]
    given: dict[str, list[float]] = {}
    items = list(knobs.items()) if isinstance(knobs, dict) else [_knob_item(k) for k in (knobs or [])]
    for name, values in items:
        d = get(name)
        if d.name in FIELD_DEFENCES:
            raise ConfigError(f"--knobs {d.name}=...: give MG noise's grid with --kappas and DP's with --sigmas")
        if d.knob is None:
            raise ConfigError(f"--knobs {d.name}=...: {d.name} takes no knob")
        if chosen is not None and d.name not in chosen:
            raise ConfigError(f"--knobs names {d.name}, which --defences does not include")
        vals = grid(values, f"--knobs {d.name}")
        given[d.name] = [d.check_knob(v) for v in vals]
    if chosen is None and given:
        raise ConfigError("--knobs sets the grids of --defences: give --defences too")
    grids = []
    for name in chosen or []:
        d = get(name)
        if d.name in FIELD_DEFENCES:
            continue
        grids.append((d.name, given.get(d.name, list(d.knob.grid) if d.knob is not None else [0.0])))
    return chosen, grids, set(given)


def _knob_item(text: str) -> tuple[str, str]:
    name, sep, values = str(text).partition("=")
    if not sep or not name.strip() or not values.strip():
        raise ConfigError(f"--knobs takes NAME=v1,v2 (e.g. mixup=0.2,0.5), not {text!r}")
    return name.strip(), values.strip()
