"""A Griffe extension for the API reference: the fields of privaudit's result classes are
documented with trailing ``#:`` comments (``table: pd.DataFrame  #: the trade-off table``),
which Sphinx reads but Griffe does not. This turns such a comment into the attribute's
docstring when it has none. Loaded by mkdocs.yml (mkdocstrings' ``extensions`` option)."""

from __future__ import annotations

from typing import Any

from griffe import Attribute, Docstring, Extension


class CommentDocstrings(Extension):
    """``#:`` comments on an attribute's line become its docstring."""

    def on_attribute_instance(self, *, node: Any, attr: Attribute, agent: Any, **kwargs: Any) -> None:
        if attr.docstring is not None or attr.lineno is None:
            return
        try:
            line = attr.parent.module.lines[attr.lineno - 1]
        except (AttributeError, IndexError, TypeError):
            return
        _, sep, comment = line.partition("#:")
        if sep and comment.strip():
            attr.docstring = Docstring(comment.strip(), lineno=attr.lineno, endlineno=attr.lineno, parent=attr)
