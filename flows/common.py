"""What every flow shares: loading params the way the CLI does, and wrapping library calls as tasks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillrag.config import Params, load_params
from skillrag.env import apply_offline_defaults
from skillrag.paths import Paths

apply_offline_defaults()


def stage_task(fn: Callable[..., Any], name: str) -> Any:
    """A Prefect task around a library function. No Prefect caching: DVC decides what is stale."""
    return task(fn, name=name, cache_policy=NO_CACHE, log_prints=True)


def load(params_file: str | Path, profile: str | None, overrides: Sequence[str]) -> tuple[Params, Paths]:
    params_file = Path(params_file)
    return load_params(params_file, profile, list(overrides)), Paths(params_file.resolve().parent)
