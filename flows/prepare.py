"""Flow `prepare`: sample the question splits, then the questions quality gate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import flow

from flows.common import load, stage_task
from skillrag.data.prepare import prepare_questions
from skillrag.quality.suites import gate_questions

prepare_task = stage_task(prepare_questions, "prepare-questions")
gate_task = stage_task(gate_questions, "gate-questions")


@flow(name="prepare")
def prepare_flow(params_file: str | Path = "params.yaml", profile: str | None = None, overrides: Sequence[str] = ()) -> dict:
    params, paths = load(params_file, profile, overrides)
    counts = prepare_task(params.prepare, paths.questions)
    gate_task(paths.questions, params.prepare)
    return counts


if __name__ == "__main__":
    prepare_flow()
