"""Flow `prepare`: sample the question splits, then the questions quality gate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import flow

from flows.common import load, run_stage
from skillrag import stages


@flow(name="prepare")
def prepare_flow(params_file: str | Path = "params.yaml", profile: str | None = None, overrides: Sequence[str] = ()) -> dict:
    return run_stage(stages.prepare, stages.gate_prepare, *load(params_file, profile, overrides))


if __name__ == "__main__":
    prepare_flow()
