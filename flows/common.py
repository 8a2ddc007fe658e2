"""What every flow shares: loading params the way the CLI does, and running a stage and its
gate as two Prefect tasks around the library functions in `skillrag.stages`."""

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

StageFn = Callable[[Params, Paths], Any]


def load(params_file: str | Path, profile: str | None, overrides: Sequence[str]) -> tuple[Params, Paths]:
    params_file = Path(params_file)
    return load_params(params_file, profile, list(overrides)), Paths.for_profile(params_file.resolve().parent, profile)


def run_stage(stage: StageFn, gate: StageFn | None, params: Params, paths: Paths) -> Any:
    """Run `stage` then its quality gate as tasks. No Prefect caching: DVC decides what is stale."""
    result = task(stage, name=stage.__name__, cache_policy=NO_CACHE)(params, paths)
    if gate is not None:
        task(gate, name=gate.__name__, cache_policy=NO_CACHE)(params, paths)
    return result
