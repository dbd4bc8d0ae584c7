"""Errors that the command line turns into one clear line and a non-zero exit, and
:func:`brief`: what another library's exception says, fit for that line."""

import errno
import re


class PrivauditError(Exception):
    """An expected failure caused by the user's input or environment.

    The message is a complete sentence meant for the user; the CLI prints it on one
    line and exits with :attr:`exit_code`: 2, bad input, unless the machine failed
    (:class:`UnwritableError`: 1, as the README says). Anything else that escapes is a bug.
    """

    exit_code = 2


class ConfigError(PrivauditError):
    """A setting is out of range or settings contradict each other."""


#: how a message from below :mod:`privaudit.api` names a setting: its field (the keyword a
#: Python caller gives) in backticks, ``\`batch_size\` must be >= 1``; the API and the command
#: line say it as the option, ``--batch-size`` (:func:`privaudit.api.params.as_options`). A
#: backticked phrase with spaces (a command to run, ``\`privaudit train --model mlp\```) is text.
FIELD = re.compile(r"`([a-z][a-z0-9_]*)`")


class DataError(PrivauditError):
    """A dataset cannot be found or read."""


class ArtifactError(PrivauditError):
    """A workspace artifact is missing, corrupted, foreign or unwritable."""


class UnwritableError(ArtifactError):
    """Files cannot be written where they must go: a full disk, a read-only file system, a
    folder without write permission. A failure of the machine, not of the input: exit
    status 1, as for any other :class:`OSError` the command line meets."""

    exit_code = 1


#: what an OSError says when the path itself is wrong (a file where a folder must be, a folder
#: that cannot be made where it was asked for, as under /proc): bad input
PATH_ERRNOS = frozenset({errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ENOENT})


def write_error(message: str, exc: OSError) -> ArtifactError:
    """The error for a write that ``exc`` refused, saying ``message``: an
    :class:`ArtifactError` (exit 2) when the path is wrong (:data:`PATH_ERRNOS`), an
    :class:`UnwritableError` (exit 1) when the machine refused (no space, read-only,
    permission)."""
    return (ArtifactError if exc.errno in PATH_ERRNOS else UnwritableError)(message)


class DamagedArtifactError(ArtifactError):
    """A workspace folder that was written complete but whose files no longer are what was
    written (changed, truncated, unreadable). The message names the folder and the way out;
    ``kind`` (model, attack, pool) and ``folder`` say which one, ``problem`` what is wrong."""

    def __init__(self, message: str, kind: str = "", folder: str = "", problem: str = ""):
        super().__init__(message)
        self.kind = kind
        self.folder = folder
        self.problem = problem

    def __reduce__(self):  # keeps kind, folder and problem across processes (Ray workers)
        return (type(self), (str(self), self.kind, self.folder, self.problem))


#: a terminal escape sequence (colour, bold: ``\x1b[1m``), as torch and Ray put in their messages
ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def plain(text) -> str:
    """``text`` on one line, without terminal escape sequences (:data:`ESCAPE`)."""
    return " ".join(ESCAPE.sub("", str(text)).split())


def brief(exc: BaseException, limit: int = 300) -> str:
    """What ``exc`` says, for one ``error:`` line: :func:`plain`, never empty (its type's name
    when it says nothing, so no message ends in ``()``), and at most ``limit`` characters:
    the whole sentences that fit, or the whole words with ``…``, never a word cut in two."""
    text = plain(exc) or type(exc).__name__
    if len(text) <= limit:
        return text
    head = text[:limit + 1]
    end = head.rfind(". ")
    if end >= limit // 2:
        return head[:end + 1]
    return head[:limit].rsplit(" ", 1)[0] + " …"
