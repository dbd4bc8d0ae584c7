"""The report's Jinja2 templates, rendered with autoescaping (every value is escaped)."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    return Environment(loader=FileSystemLoader(Path(__file__).parent), autoescape=select_autoescape(default=True),
                       undefined=StrictUndefined, trim_blocks=False, lstrip_blocks=False, keep_trailing_newline=False)


def render(name: str, **context) -> str:
    """The template ``name`` of this folder rendered with ``context``."""
    return _environment().get_template(name).render(**context)


def macro(name: str, macro_name: str, *args, **kwargs) -> str:
    """The macro ``macro_name`` of the template ``name`` called with the arguments (escaped
    like the template itself)."""
    return str(getattr(_environment().get_template(name).module, macro_name)(*args, **kwargs))


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    """``report.css``, the one stylesheet of every page (inlined: the pages load nothing)."""
    return (Path(__file__).parent / "report.css").read_text(encoding="utf-8")
