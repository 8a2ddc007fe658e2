"""The pipeline flow runs dvc.yaml's stages through `skillrag repro`'s runner, one Prefect task per
stage (a temporary Prefect server): dvc.lock records what it ran, each stage is one git commit,
and a second run finds nothing to do."""

from __future__ import annotations

import pytest

from skillrag.pipeline.repro import Runner
from tests.pipeline.test_repro import _environment, _messages, make_project  # noqa: F401  (_environment: autouse, git identity and PATH)

pytestmark = pytest.mark.slow  # a temporary Prefect server


def test_the_pipeline_flow_runs_each_stage_as_a_task_and_records_it_in_dvc_lock(tmp_path, prefect_server):
    from flows.pipeline import pipeline_flow

    project = make_project(tmp_path / "project")
    assert pipeline_flow(project=str(project), targets=["probe"]) == []  # no report, metrics or Data Docs here
    assert [step.state for step in Runner(project).plan()][:4] == ["done"] * 4
    assert [m.split(" (")[0] for m in _messages(project)[:4]] == [
        f"run: stage {s} finished" for s in ("probe", "extract", "index", "prepare")
    ]
    pipeline_flow(project=str(project))
    assert all(step.state == "done" for step in Runner(project).plan())
