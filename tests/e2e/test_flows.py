"""The Prefect pipeline flow runs offline (a temporary server, the prefect_server fixture) through
`skillrag repro`'s runner, writes what `dvc repro` writes, leaves dvc.lock recording what it ran,
and publishes the report, the metrics table and the Data Docs link as artifacts.

It re-runs the first stage and the last three of the tiny project `dvc repro` built (the
dvc_project fixture), not the whole pipeline a second time: that took 40 of CI's 90 minutes, and
running every stage as a Prefect task through the runner is tests/flows/test_pipeline.py's job.
What stays is the real thing: real stages, real DVC, a real Prefect server, byte-compared."""

import json
import shutil

import pytest
import yaml
from prefect.artifacts import Artifact

from flows.pipeline import pipeline_flow
from tests.e2e.conftest import run

pytestmark = pytest.mark.e2e

RERUN = ("prepare", "summarize", "analyze", "report")
WRITTEN = ["data/questions/train/nq.jsonl", "data/questions/eval/musique.jsonl", "reports/metrics.json",
           "reports/metrics_detail.json", "reports/outcomes.csv", "reports/analysis.json"]


def _lock(project):
    return yaml.safe_load((project / "dvc.lock").read_text())


def test_pipeline_flow_writes_what_dvc_repro_writes_records_it_in_dvc_lock_and_publishes_artifacts(
    dvc_project, tmp_path, prefect_server
):
    project = tmp_path / "flows"
    shutil.copytree(dvc_project, project, symlinks=True)
    lock = _lock(project)
    for stage in RERUN:  # never run here: the flow must run these four and nothing else
        del lock["stages"][stage]
    (project / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    for relative in [*WRITTEN, "reports/report.md"]:
        (project / relative).unlink()

    published = pipeline_flow(project=str(project))

    assert "up to date" in run(["dvc", "status"], project).stdout.lower()  # dvc.lock records what Prefect ran
    before, after = _lock(dvc_project)["stages"], _lock(project)["stages"]
    assert set(after) == set(before)
    assert {name: after[name] for name in after if name not in RERUN} == {
        name: before[name] for name in before if name not in RERUN
    }  # nothing else re-ran
    for relative in WRITTEN:
        assert (project / relative).read_bytes() == (dvc_project / relative).read_bytes(), relative
    artifacts = {key: Artifact.get(key) for key in published}
    assert set(published) == {"skillrag-report", "skillrag-metrics", "skillrag-data-docs"}
    # Prefect 3 stores a link artifact as markdown: "[Great Expectations Data Docs](file://...)"
    assert artifacts["skillrag-data-docs"].data.startswith("[Great Expectations Data Docs](file://")
    assert "data_docs" in artifacts["skillrag-data-docs"].data
    assert artifacts["skillrag-report"].type == "markdown"
    assert artifacts["skillrag-report"].data == (project / "reports" / "report.md").read_text()
    assert artifacts["skillrag-metrics"].type == "table"
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    assert len(json.loads(artifacts["skillrag-metrics"].data)) == sum(len(by) for by in metrics.values())
