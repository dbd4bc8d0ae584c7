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


class DamagedArtifactError(ArtifactError):
    """A workspace folder that was written complete but whose files no longer are what was
    written (changed, truncated, unreadable). The message names the folder and the way out;
    ``kind`` (model, attack, pool) and ``folder`` say which one."""

    def __init__(self, message: str, kind: str = "", folder: str = ""):
        super().__init__(message)
        self.kind = kind
        self.folder = folder

    def __reduce__(self):  # keeps kind and folder across processes (Ray workers)
        return (type(self), (str(self), self.kind, self.folder))
