"""One Prefect flow per pipeline stage, named as the CLI names the stage (`train-probe`): the
stage's library function, then its quality gate, then the stage's one-line summary.

Run one with `python -m flows.stages <stage> [--profile tiny]`; `extract` and `evaluate` take
`--workers N` (shards on a local Dask cluster) and `--dask-address tcp://host:8786` (an existing
Dask scheduler, N shards); `evaluate --method NAME` (repeatable) runs those methods' stages only
(`evaluate-NAME`), the others every method of `evaluate.methods`. `summarize` then writes the
metrics.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import Flow, flow

from flows.common import load, run_stage_on
from skillrag import interrupts
from skillrag.pipeline.stages import STAGES, Stage


def stage_flow(stage: Stage) -> Flow:
    @flow(name=stage.command)
    def run(
        params_file: str = "params.yaml",
        profile: str | None = None,
        overrides: Sequence[str] = (),
        workers: int = 1,
        dask_address: str | None = None,
        methods: list[str] | None = None,
    ) -> Any:
        if methods is not None and stage.name != "evaluate":
            raise ValueError(f"methods: only the evaluate flow runs single methods, not {stage.name}")
        options = {"methods": methods} if methods is not None else None
        return run_stage_on(stage, *load(params_file, profile, overrides), workers, dask_address, options)

    return run


FLOWS: dict[str, Flow] = {stage.command: stage_flow(stage) for stage in STAGES.values()}


def main() -> None:
    parser = argparse.ArgumentParser(description="Run one skillrag stage as a Prefect flow.")
    parser.add_argument("stage", choices=list(FLOWS))
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="section.key=value")
    parser.add_argument("--workers", type=int, default=1, help="extract/evaluate: shards on this many Dask workers")
    parser.add_argument("--dask-address", default=None, help="extract/evaluate: an existing Dask scheduler")
    parser.add_argument("--method", dest="methods", action="append", default=None, help="evaluate: this method's stage only (repeatable)")
    args = parser.parse_args()
    interrupts.install()  # Ctrl-C drops the question in flight, as in the CLI
    FLOWS[args.stage](
        params_file=str(args.params), profile=args.profile, overrides=args.overrides,
        workers=args.workers, dask_address=args.dask_address, methods=args.methods,
    )


if __name__ == "__main__":
    main()
