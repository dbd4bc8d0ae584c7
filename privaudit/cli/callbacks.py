"""The Typer callbacks that check an option's value as it is parsed, so that a bad value is a
usage error naming the option before anything heavy loads (``benchmarks/bench_startup.py``
measures the start-up). Each says the problem that :mod:`privaudit.api.params` finds, the
check the Python API makes too."""

from __future__ import annotations

from pathlib import Path

import typer

from privaudit.api.params import EMPTY_PATH, dataset_problem, model_problem, normal_dataset, range_problem


def number(low: float | None = None, high: float | None = None, low_open: bool = False):
    """A Typer callback that refuses a value outside [low, high] (or (low, high] with
    ``low_open``), NaN and ±inf, as a usage error naming the option: every numeric option
    of every command declares its range this way (``tests/test_cli_finish.py`` checks)."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        problem = range_problem(value, low, high, low_open)
        if problem:
            raise typer.BadParameter(problem)
        return value

    return check


def one_of(*choices: str, hidden: tuple[str, ...] = ()):
    """A Typer callback that refuses a word outside ``choices`` (and the accepted but unlisted
    aliases ``hidden``) as a usage error naming the option (checked before anything heavy
    loads)."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing or value in choices or value in hidden:
            return value
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")

    return check


def refused(reason: str):
    """A Typer callback of an option a command declares only to refuse it, with ``reason``
    (why the command has no use for it), as a usage error naming the option."""

    def check(ctx: typer.Context, param: typer.CallbackParam, value):
        if value is None or ctx.resilient_parsing:
            return value
        raise typer.BadParameter(reason)

    return check


def path_option(value):
    """Typer callback of the path options: an empty path is refused (it would silently mean
    the current folder)."""
    if value is None:
        return None
    if not str(value).strip():
        raise typer.BadParameter(EMPTY_PATH)
    return Path(value)


def dataset_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """Typer callback of ``--dataset``: a dataset known by name, or the user's own data
    ``npz:PATH`` / ``folder:PATH`` that can be read, returned with its path made absolute (the
    name a model's config records); anything else is a usage error naming the option."""
    if value is None or ctx.resilient_parsing:
        return value
    problem = dataset_problem(value)
    if problem:
        raise typer.BadParameter(problem)
    return normal_dataset(value)


def canaries_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """Typer callback of ``--canaries``: ``KIND:N`` (:func:`privaudit.core.config.canaries_problem`),
    refused at parsing, before the data or torch load; an empty value too (it would silently
    mean no canaries)."""
    if value is None or ctx.resilient_parsing:
        return value
    from privaudit.core.config import canaries_problem

    problem = (canaries_problem(value) if value.strip()
               else "is empty: give KIND:N (e.g. mislabeled:50), or leave it out")
    if problem:
        raise typer.BadParameter(problem)
    return value


def model_option(ctx: typer.Context, param: typer.CallbackParam, value):
    """Typer callback of ``--model``: a built-in architecture, ``torchvision:NAME`` or
    ``module:MODULE:CALLABLE`` (checked for its form here; built, and so checked for real,
    when a model trains)."""
    if value is None or ctx.resilient_parsing:
        return value
    problem = model_problem(value)
    if problem:
        raise typer.BadParameter(problem)
    return value
