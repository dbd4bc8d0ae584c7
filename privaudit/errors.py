"""Errors that the command line turns into one clear line and a non-zero exit."""


class PrivauditError(Exception):
    """An expected failure caused by the user's input or environment.

    The message is a complete sentence meant for the user; the CLI prints it on one
    line and exits with status 2. Anything else that escapes is a bug.
    """


class ConfigError(PrivauditError):
    """A setting is out of range or settings contradict each other."""


class DataError(PrivauditError):
    """A dataset cannot be found or read."""


class ArtifactError(PrivauditError):
    """A workspace artifact is missing, corrupted, foreign or unwritable."""
