"""Flow `pipeline`: every stage in DVC order, each followed by its quality gate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import flow

from flows.common import load, run_stage
from skillrag import stages

STAGES = (
    (stages.prepare, stages.gate_prepare),
    (stages.index, stages.gate_index),
)


@flow(name="pipeline")
def pipeline_flow(params_file: str | Path = "params.yaml", profile: str | None = None, overrides: Sequence[str] = ()) -> None:
    params, paths = load(params_file, profile, overrides)
    for stage, gate in STAGES:
        run_stage(stage, gate, params, paths)


if __name__ == "__main__":
    pipeline_flow()
