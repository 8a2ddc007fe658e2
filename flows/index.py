"""Flow `index`: corpus -> JsonCollection + Lucene and bm25s indexes, then the index quality gate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import flow

from flows.common import load, run_stage
from skillrag import stages


@flow(name="index")
def index_flow(params_file: str | Path = "params.yaml", profile: str | None = None, overrides: Sequence[str] = ()) -> Any:
    return run_stage(stages.index, stages.gate_index, *load(params_file, profile, overrides))


if __name__ == "__main__":
    index_flow()
