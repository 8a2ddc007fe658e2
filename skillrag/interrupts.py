"""SIGINT and SIGTERM as a clean stop: finished work is kept, the work in flight is dropped.

`install()` (the CLI does it) makes both signals raise `Interrupted`, a BaseException: no
`except Exception` (a method's per-question handler, a library's retry loop) can record it as
data. Native code (torch, the JVM) may still turn the exception into an error of its own while
it unwinds, so the signal is also remembered: `check()` raises `Interrupted` when one arrived, and
the runners call it before writing a result, so a question cut short is never written.
Inside `deferred()` (writing one trace line, one checkpoint) a signal only sets the flag and is
raised when the block ends, so a result is written whole or not at all.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Interrupted(BaseException):
    """The run was stopped by a signal; `exit_code` is the shell's 128 + signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    received: int | None = None
    deferring: int = 0


_state = _State()


def _handle(signum: int, frame: FrameType | None) -> None:
    _state.received = signum
    if not _state.deferring:
        raise Interrupted(signum)


def install() -> None:
    """Route SIGINT and SIGTERM to `Interrupted` (main thread only, as Python requires)."""
    _state.received = None
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _handle)


def received() -> int | None:
    """The signal that arrived since `install()`, if any."""
    return _state.received


def check() -> None:
    """Raise `Interrupted` if a signal arrived, even one that native code swallowed."""
    if _state.received is not None:
        raise Interrupted(_state.received)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold a signal until the block is done, then raise it."""
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1
    if not _state.deferring:
        check()
