"""The one way the library calls git: recording which commit made an artifact, and (for the runner)
committing finished work. Git may be absent (an unpacked archive, a container without it): a query
then answers None rather than failing the stage that asked."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path


class GitError(RuntimeError):
    """A git command that had to succeed did not; the message holds the command and git's stderr."""


def git(*args: str, cwd: str | Path, timeout: float = 60, check: bool = False) -> str | None:
    """Run `git *args` in `cwd` and return its stdout, stripped. When git is missing, times out or
    exits non-zero: None, or with `check` a GitError naming the command and git's message."""
    command = ["git", *args]
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        if check:
            raise GitError(f"`{' '.join(command)}` in {cwd}: {err}") from err
        return None
    if done.returncode != 0:
        if check:
            raise GitError(f"`{' '.join(command)}` in {cwd} failed: {(done.stderr or done.stdout).strip()}")
        return None
    return done.stdout.strip()


def head(cwd: str | Path, ignoring: Sequence[str] = ()) -> tuple[str, bool] | None:
    """The commit checked out at `cwd` and whether tracked files differ from it (untracked files and
    the paths `ignoring`, relative to the repository's top, do not count); None outside a git
    repository or without git."""
    commit = git("rev-parse", "HEAD", cwd=cwd)
    if commit is None:
        return None
    pathspec = [":(top)", *(f":(top,exclude){path}" for path in ignoring)]
    status = git("status", "--porcelain", "--untracked-files=no", "--", *pathspec, cwd=cwd)
    return commit, bool(status)
