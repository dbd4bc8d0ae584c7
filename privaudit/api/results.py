"""What the result objects of the Python API share: a ``repr()`` of one short line, and
``to_dict()`` / ``to_json()`` (the command's ``--json`` as a dict, and as text).

A result holds whole tables (the trade-off table, a scan's rows per attack) and the
pipeline's objects; the dataclass ``repr()`` printed all of them. :class:`ShortRepr` names
each field with a summary instead (:func:`summary`): a table by its rows × columns, a path as
text, a long list by its length, a dict by its first entries."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: how many characters a text, and how many items a list or dict, ``repr()`` shows
TEXT_CHARS = 60
ITEMS = 3
SCALARS = (str, int, float, bool, type(None))


def summary(value: Any, seconds: bool = False) -> str:
    """``value`` as a result's ``repr()`` shows it: ``<table 24 rows × 9 columns>``,
    ``<array (20, 10)>``, ``'reports/index.html'``, ``[0, 1]``, ``[12 RunResult]``,
    ``{defense: 'dpsgd', delta: 1e-05, … 20 more}``, a number or a short text as itself;
    with ``seconds`` (a duration, or a dict of them), each number to 0.1 s (``384.8``)."""
    if seconds and isinstance(value, float):
        return f"{value:.1f}"
    if hasattr(value, "columns") and hasattr(value, "shape"):
        rows, cols = value.shape
        return f"<table {rows} rows × {cols} columns>"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"<array {tuple(value.shape)}>"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        return repr(value if len(value) <= TEXT_CHARS else value[:TEXT_CHARS] + "…")
    if isinstance(value, (list, tuple)):
        if len(value) <= ITEMS and all(isinstance(v, SCALARS) for v in value):
            return "[" + ", ".join(summary(v) for v in value) + "]"
        kinds = {type(v).__name__ for v in value}
        return f"[{len(value)} {kinds.pop() if len(kinds) == 1 else 'items'}]"
    if isinstance(value, dict):
        shown = [f"{k}: {summary(v, seconds)}" for k, v in value.items() if isinstance(v, SCALARS)][:ITEMS]
        rest = len(value) - len(shown)
        return "{" + ", ".join(shown + ([f"… {rest} more"] if rest else [])) + "}"
    text = repr(value)
    return text if len(text) <= TEXT_CHARS else f"<{type(value).__name__}>"


class ShortRepr:
    """Mixin of the result dataclasses (declared ``@dataclass(repr=False)``, so that this
    ``__repr__`` is theirs): ``ClassName(field=summary, …)`` over the fields shown in a repr,
    after the properties named in :attr:`repr_first` (an EpsilonResult's ``epsilon``). Each
    result defines :meth:`to_dict` (the document its command's ``--json`` prints); this
    class turns it into text (:meth:`to_json`), as pandas' ``to_json`` does."""

    repr_first: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The document the command's ``--json`` prints, as a dict."""
        raise NotImplementedError(f"{type(self).__name__} defines no to_dict()")

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text: standard JSON (NumPy numbers as numbers, paths as
        text, NaN and infinities as ``null``), ``indent`` as in :func:`json.dumps`."""
        from privaudit.files.atomic import plain_json

        return json.dumps(plain_json(self.to_dict()), indent=indent)

    def __repr__(self) -> str:
        shown = [(name, getattr(self, name)) for name in self.repr_first]
        # every subclass is a dataclass (the class docstring)
        shown += [(f.name, getattr(self, f.name)) for f in fields(cast("DataclassInstance", self)) if f.repr]
        return f"{type(self).__name__}(" + ", ".join(f"{name}={summary(v, name.endswith('seconds'))}"
                                                     for name, v in shown) + ")"
