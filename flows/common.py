"""What every flow shares: loading params the way the CLI does, and running a stage and its
gate as Prefect tasks around the library functions in `skillrag.stages`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from skillrag.config import Params, load_params
from skillrag.env import apply_offline_defaults
from skillrag.paths import Paths
from skillrag.stages import Stage

apply_offline_defaults()


def load(params_file: str | Path, profile: str | None, overrides: Sequence[str]) -> tuple[Params, Paths]:
    params_file = Path(params_file)
    return load_params(params_file, profile, list(overrides)), Paths.for_profile(params_file.resolve().parent, profile)


def run_stage(stage: Stage, params: Params, paths: Paths) -> Any:
    """Run the stage then its quality gate as tasks, and log the stage's closing line (the one the
    CLI prints). No Prefect caching: DVC decides what is stale."""
    result = task(stage.run, name=stage.name, cache_policy=NO_CACHE)(params, paths)
    if stage.gate is not None:
        task(stage.gate, name=f"gate-{stage.name}", cache_policy=NO_CACHE)(params, paths)
    get_run_logger().info(stage.summary(result, paths))
    return result
