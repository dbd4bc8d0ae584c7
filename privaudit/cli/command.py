"""How every command shows its options: one spelling each, and a flag as a flag.

An option declared with several long spellings (``typer.Option("--sigma",
"--noise-multiplier")``, from the table of :mod:`privaudit.cli.options`) shows its first in
``--help`` and in error messages; the others still parse, unlisted: the older names a script or a note may still use.
A flag (``--dry-run``, ``--json``, ``--help``) shows no value type (Typer would print
``<bool>``, as if it took one).

Typer builds each option itself (it takes no option class), so :class:`Command` and
:class:`Group` give the options they are built with the class :class:`Option` (the same
object, its class swapped for this subclass that only adds methods)."""

from __future__ import annotations

from typing import cast

from typer.core import TyperCommand, TyperGroup, TyperOption


class Option(TyperOption):
    """A Typer option whose first spelling is the one shown; ``aliases`` parse too."""

    aliases: tuple[str, ...] = ()

    @classmethod
    def adopt(cls, param) -> None:
        """Make the Typer option ``param`` an :class:`Option`: its first long spelling shown
        (with a short one such as ``-h``), the other long ones kept as hidden ``aliases``
        (arguments and other parameters stay as they are)."""
        if isinstance(param, TyperOption) and not isinstance(param, cls):
            param.__class__ = cls
            option = cast(Option, param)  # the same object, now of this class
            option.aliases = tuple(o for o in option.opts if o.startswith("--"))[1:]
            option.opts = [o for o in option.opts if o not in option.aliases]

    def add_to_parser(self, parser, ctx) -> None:
        """Register every spelling with the parser: the shown one and the hidden aliases."""
        shown = self.opts
        self.opts = [*shown, *self.aliases]
        try:
            super().add_to_parser(parser, ctx)
        finally:
            self.opts = shown

    def display_type_rich(self, ctx):
        """The value type ``--help`` shows: none for a flag, which takes no value."""
        return None if self.is_flag else super().display_type_rich(ctx)


class _ShowsOptions:
    """What :class:`Command` and :class:`Group` share: their options and ``--help`` become
    :class:`Option` objects."""

    params: list  # click's Command (TyperCommand, TyperGroup) beside which this is mixed in

    def _adopt_params(self) -> None:
        for param in self.params:
            Option.adopt(param)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        Option.adopt(option)
        return option


class Command(_ShowsOptions, TyperCommand):
    """A command (``app.command(cls=Command)``) whose options show one spelling each."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._adopt_params()


class Group(_ShowsOptions, TyperGroup):
    """A group of commands (``typer.Typer(cls=Group)``) whose own options show one spelling each."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._adopt_params()
