"""What every stage shares: the (params, paths) signature and the per-workspace lock."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from skillrag.config import Params
from skillrag.files import exclusive as hold_lock
from skillrag.paths import Paths

StageFn = Callable[[Params, Paths], Any]


def exclusive(stage: StageFn) -> StageFn:
    """Run `stage` holding its workspace lock (`.skillrag/locks/<stage>.lock`): a second run of the
    same stage on the same workspace stops at once, naming the process that holds it."""

    @wraps(stage)
    def locked(params: Params, paths: Paths) -> Any:
        with hold_lock(paths.locks / f"{stage.__name__}.lock", f"`skillrag {stage.__name__.replace('_', '-')}`"):
            return stage(params, paths)

    return locked
