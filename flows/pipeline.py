"""Flow `pipeline`: every stage in DVC order, each with its quality gate; transient failures are
retried, a gate's verdict is final (flows.common). Ends by publishing the report, the metrics
table and the Data Docs link as Prefect artifacts. `workers` > 1 or `dask_address` shards
`extract` and `evaluate` across Dask workers (same outputs as one process); `evaluate` runs every
method's stage (evaluate@<method>: no_retrieval and single_step, then the methods that start
from their generations, the methods of a wave on separate workers at once), then `summarize`
gates the runs and writes the metrics."""

from __future__ import annotations

from collections.abc import Sequence

from prefect import flow

from flows.artifacts import publish_artifacts
from flows.common import load, run_stage_on
from skillrag import interrupts
from skillrag.stages import STAGES


@flow(name="pipeline")
def pipeline_flow(
    params_file: str = "params.yaml",
    profile: str | None = None,
    overrides: Sequence[str] = (),
    until: str | None = None,
    workers: int = 1,
    dask_address: str | None = None,
) -> list[str]:
    """Run the stages in order; `until` stops after the named stage (CLI spelling, e.g.
    train-probe). Returns the keys of the artifacts published."""
    if until is not None and until not in STAGES:
        raise ValueError(f"unknown stage {until!r} (choose from {', '.join(STAGES)})")
    params, paths = load(params_file, profile, overrides)
    for name, stage in STAGES.items():
        run_stage_on(stage, params, paths, workers, dask_address)
        if name == until:
            break
    return publish_artifacts(paths)


if __name__ == "__main__":
    interrupts.install()
    pipeline_flow()
