r"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml).

- The command-line reference is generated at build time from the Typer app itself
  (``privaudit.cli.app``): every command and subcommand, its usage, its help text, and each
  argument and option with its help, default and environment variable. A page includes it
  by holding the marker ``<!-- privaudit-cli-reference -->``; the reference therefore never
  drifts from ``privaudit COMMAND --help``.
- Docstrings are written for Sphinx-style readers (``:func:`audit```); on the API page the
  role prefixes are dropped so that only the code span shows.
- In a table, a pipe inside a code span is written ``\|`` (as GitHub needs it); Python-Markdown
  keeps the backslash there, so the rendered code spans get a plain ``|``.
- A notebook's Markdown links to other pages (``../reading-a-report.md``, which work in
  Jupyter) are rewritten to the pages' URLs, and a link to a page that does not exist is a
  warning, so that ``mkdocs build --strict`` fails on it as on a Markdown page's.

Nothing here reaches the network.
"""

from __future__ import annotations

import html
import logging
import posixpath
import re

MARKER = "<!-- privaudit-cli-reference -->"
_EXTRA_KEYS = ("default:", "env var:", "required", "deprecated")
_HREF = re.compile(r'href="([^"#:?]+\.(?:md|ipynb))(#[^"]*)?"')
log = logging.getLogger("mkdocs.hooks.privaudit")
_CODE = re.compile(r"<code>(.*?)</code>", re.DOTALL)
_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj):(?=<code)")


def _is_argument(param) -> bool:
    """A positional argument (Click's and Typer's alike; recent Typer vendors its own Click)."""
    return getattr(param, "param_type_name", "") == "argument"


def _is_group(command) -> bool:
    return hasattr(command, "list_commands")


def _text(value: str) -> str:
    """Help text (rich markup, as the app writes it) as plain text."""
    return " ".join(value.replace("\\[", "[").split())


def _md(value: str) -> str:
    """Plain text made safe inside a Markdown table cell."""
    value = html.escape(value, quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", value)


def _split_extras(help_text: str) -> tuple[str, dict[str, str]]:
    """``"Text.  [default: 1; env var: X]"`` → ``("Text.", {"default": "1", "env var": "X"})``."""
    extras: dict[str, str] = {}
    match = re.search(r"\s{2}\[([^\[\]]*)\]\s*$", help_text)
    if match and any(part.strip().startswith(_EXTRA_KEYS) for part in match.group(1).split(";")):
        help_text = help_text[:match.start()]
        for part in match.group(1).split(";"):
            key, _, val = part.strip().partition(":")
            extras[key.strip()] = _text(val)
    return help_text.strip(), extras


def _usage(command, ctx, path: str) -> str:
    pieces = ["[OPTIONS]"]
    for param in command.get_params(ctx):
        if _is_argument(param):
            name = (param.name or "ARG").upper()
            pieces.append(name if param.required else f"[{name}]")
    if _is_group(command):
        pieces.append("COMMAND [ARGS]...")
    return f"{path} {' '.join(pieces)}"


def _params_table(command, ctx) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:  # an argument of plain Click: no help record
            record = ((param.name or "").upper(), getattr(param, "help", "") or "")
        names, help_text = record
        if _is_argument(param):
            names = (param.name or "").upper() + names[len(param.name or ""):]
        help_text, extras = _split_extras(help_text or "")
        help_text = _text(help_text)
        notes = []
        if "required" in extras:
            notes.append("required")
        if extras.get("default"):
            notes.append(f"default: `{extras['default']}`")
        if extras.get("env var"):
            notes.append(f"env: `{extras['env var']}`")
        option = ", ".join(f"`{n.strip()}`" for n in _text(names).split(", "))
        rows.append(f"| {option} | {_md(help_text)} | {'; '.join(notes)} |")
    if not rows:
        return []
    return ["| argument or option | what it does | default |", "| --- | --- | --- |", *rows, ""]


def _command(command, ctx, path: str, depth: int) -> list[str]:
    lines = [f"{'#' * min(depth, 6)} `{path}`", ""]
    lines += ["```text", _usage(command, ctx, path), "```", ""]
    if command.help:
        lines += [_md(_text(command.help)), ""]
    lines += _params_table(command, ctx)
    if _is_group(command):
        subcommands = command.list_commands(ctx)
        if depth > 1:
            lines += ["Subcommands: " + ", ".join(f"`{name}`" for name in subcommands) + ".", ""]
        for name in subcommands:
            sub = command.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
            lines += _command(sub, sub_ctx, f"{path} {name}", depth + 1)
    return lines


def cli_reference() -> str:
    """The reference of every command of ``privaudit``, as Markdown."""
    import typer

    from privaudit.cli import app

    root = typer.main.get_command(app)
    ctx = root.make_context("privaudit", [], resilient_parsing=True)
    return "\n".join(_command(root, ctx, "privaudit", 2))


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return markdown


def _notebook_links(content: str, page, files) -> str:
    base = posixpath.dirname(page.file.src_uri)

    def fix(match: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(base, match.group(1)))
        found = files.get_file_from_path(target)
        if found is None:
            log.warning("Doc file '%s' contains a link to '%s', which is not found in the documentation files.",
                        page.file.src_uri, match.group(1))
            return match.group(0)
        return f'href="{found.url_relative_to(page.file)}{match.group(2) or ""}"'

    return _HREF.sub(fix, content)


def on_page_content(content: str, page, config, files) -> str:
    content = _CODE.sub(lambda m: "<code>" + m.group(1).replace("\\|", "|") + "</code>", content)
    if page.file.src_uri.startswith("reference/"):
        content = _ROLE.sub("", content)
    if page.file.src_uri.endswith(".ipynb"):
        content = _notebook_links(content, page, files)
    return content
