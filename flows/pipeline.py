"""Flow `pipeline`: every stage in DVC order, each with its quality gate."""

from __future__ import annotations

from collections.abc import Sequence

from prefect import flow

from flows.common import load, run_stage
from skillrag import interrupts
from skillrag.stages import STAGES


@flow(name="pipeline")
def pipeline_flow(
    params_file: str = "params.yaml", profile: str | None = None, overrides: Sequence[str] = (), until: str | None = None
) -> None:
    """Run the stages in order; `until` stops after the named stage (CLI spelling, e.g. train-probe)."""
    if until is not None and until not in STAGES:
        raise ValueError(f"unknown stage {until!r} (choose from {', '.join(STAGES)})")
    params, paths = load(params_file, profile, overrides)
    for name, stage in STAGES.items():
        run_stage(stage, params, paths)
        if name == until:
            break


if __name__ == "__main__":
    interrupts.install()
    pipeline_flow()
