"""The error policy of a run: which exceptions end one question (recorded as an error trace, the
run goes on) and which are bugs that must stop the stage."""

from __future__ import annotations


def is_question_failure(err: BaseException) -> bool:
    """Whether `err` is a failure of one question at run time, recorded as an error trace:
    RuntimeError (torch's out-of-memory and kernel errors, a generation without hidden states),
    MemoryError, and OSError (a retriever's or the disk's I/O). Everything else is a bug in the
    code or the setup (TypeError, KeyError, AttributeError, AssertionError, NameError,
    IndexError, ImportError, ValueError, and NotImplementedError / RecursionError among the
    RuntimeErrors) and must stop the stage rather than become data."""
    return isinstance(err, (RuntimeError, MemoryError, OSError)) and not isinstance(
        err, (NotImplementedError, RecursionError)
    )
