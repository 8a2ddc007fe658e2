"""Flow `pipeline`: every stage in DVC order, each followed by its quality gate."""

from __future__ import annotations

from collections.abc import Sequence

from prefect import flow

from flows.common import load, run_stage
from flows.stages import STAGES


@flow(name="pipeline")
def pipeline_flow(
    params_file: str = "params.yaml", profile: str | None = None, overrides: Sequence[str] = (), until: str | None = None
) -> None:
    """Run the stages in order; `until` stops after the named stage."""
    params, paths = load(params_file, profile, overrides)
    for name, (stage, gate) in STAGES.items():
        run_stage(stage, gate, params, paths)
        if name == until:
            break


if __name__ == "__main__":
    pipeline_flow()
