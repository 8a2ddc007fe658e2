"""What every stage shares: the (params, paths) signature, the per-workspace lock (which
`skillrag.pipeline.stages.Stage` takes for every stage), and how a sharded stage hands its shards to
workers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any

from skillrag.config import Params
from skillrag.files import exclusive as hold_lock
from skillrag.paths import Paths

StageFn = Callable[[Params, Paths], Any]

# Runs fn(*args) for each args tuple (one per shard) and returns the results in the same order:
# `in_process` here, or Prefect tasks on Dask workers (flows.common.dask_map).
ShardMap = Callable[[Callable[..., Any], Sequence[tuple[Any, ...]]], list[Any]]


def in_process(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """The single-process `ShardMap`: the shards one after another, here."""
    return [fn(*args) for args in calls]


def shard_of(items: Sequence[Any], shard: int, shards: int) -> Sequence[Any]:
    """The `shard`-th of `shards` contiguous, near-equal slices of `items` (their order kept)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards} does not exist")
    return items[len(items) * shard // shards : len(items) * (shard + 1) // shards]


def exclusive(stage: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`stage` holding the workspace lock of stage `name` (`.skillrag/locks/<name>.lock`) while it
    runs: a second run of the same stage on the same workspace stops at once, naming the process
    that holds it. Arguments after (params, paths) are passed through."""

    @wraps(stage)
    def locked(params: Params, paths: Paths, *args: Any, **kwargs: Any) -> Any:
        with hold_lock(paths.locks / f"{name}.lock", f"`skillrag {name}`"):
            return stage(params, paths, *args, **kwargs)

    return locked
