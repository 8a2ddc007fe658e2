"""The errors a user can fix: bad configuration, bad input data, a missing or unusable artifact.

The command line shows a `UserError` as one line (its message says what to fix) and lets every
other exception keep its traceback: a bug is not a user error, even when it is a ValueError.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; the message says what and how."""


class ConfigError(UserError, ValueError):
    """A params file, profile, override or command option that cannot be used; the message says
    which and why."""


class DataError(UserError, ValueError):
    """Input data that cannot be used; the message names the file (and line) at fault."""


class ArtifactError(UserError):
    """A stage's output that is missing, altered, or built for another model; the message names
    the command that (re)builds it."""
