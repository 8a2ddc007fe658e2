"""One Prefect flow per pipeline stage: the stage's library function, then its quality gate.

Run one with `python -m flows.stages <stage> [--profile tiny]`, or deploy them to workers
(see README: GPU stages on a GPU work pool, the rest on CPU).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import Flow, flow

from flows.common import StageFn, load, run_stage
from skillrag import stages

# DVC order; each entry: (stage, gate).
STAGES: dict[str, tuple[StageFn, StageFn | None]] = {
    "prepare": (stages.prepare, stages.gate_prepare),
    "index": (stages.index, stages.gate_index),
    "extract": (stages.extract, stages.gate_extract),
    "train_probe": (stages.train_probe, None),  # its gate runs inside, before it publishes
    "train_router": (stages.train_router, None),
    "evaluate": (stages.evaluate, stages.gate_evaluate),
}


def stage_flow(name: str) -> Flow:
    stage, gate = STAGES[name]

    @flow(name=name.replace("_", "-"))
    def run(params_file: str = "params.yaml", profile: str | None = None, overrides: Sequence[str] = ()) -> Any:
        return run_stage(stage, gate, *load(params_file, profile, overrides))

    return run


FLOWS: dict[str, Flow] = {name: stage_flow(name) for name in STAGES}


def main() -> None:
    parser = argparse.ArgumentParser(description="Run one skillrag stage as a Prefect flow.")
    parser.add_argument("stage", choices=list(FLOWS))
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="section.key=value")
    args = parser.parse_args()
    FLOWS[args.stage](params_file=str(args.params), profile=args.profile, overrides=args.overrides)


if __name__ == "__main__":
    main()
