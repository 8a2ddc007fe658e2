"""The Prefect pipeline flow runs offline (a temporary server, the prefect_server fixture) through
`skillrag repro`'s runner, writes what `dvc repro` writes (byte-identical files wherever the format
is deterministic; Lucene writes random segment ids, so its index is compared by document count
through the gate), leaves dvc.lock recording what it ran, and publishes the report, the metrics
table and the Data Docs link as artifacts."""

import json

import pandas as pd
import pytest
from prefect.artifacts import Artifact

from flows.pipeline import pipeline_flow
from skillrag.probe.state_store import read_rows
from tests.e2e.conftest import make_project, run
from tests.fakes import without_latency

pytestmark = pytest.mark.e2e


def test_pipeline_flow_matches_dvc_outputs_records_them_in_dvc_lock_and_publishes_artifacts(
    dvc_project, tmp_path, prefect_server
):
    project = make_project(tmp_path / "flows")
    run(["dvc", "init", "--no-scm", "-q"], project)
    published = pipeline_flow(project=str(project))
    artifacts = {key: Artifact.get(key) for key in published}
    assert "up to date" in run(["dvc", "status"], project).stdout.lower()  # dvc.lock records what Prefect ran
    for relative in [
        "data/questions/train/nq.jsonl",
        "data/questions/eval/2wiki.jsonl",
        "data/corpus/part-00000.jsonl",
        "data/index/bm25s/params.index.json",
    ]:
        assert (project / relative).read_bytes() == (dvc_project / relative).read_bytes(), relative
    metrics_file = "reports/metrics.json"  # equal but for wall time (latency_s)
    assert without_latency(json.loads((project / metrics_file).read_text())) == without_latency(
        json.loads((dvc_project / metrics_file).read_text())
    )
    columns = ["id", "strategy", "text", "answer", "acc"]
    pd.testing.assert_frame_equal(
        read_rows(project / "data" / "states")[columns], read_rows(dvc_project / "data" / "states")[columns]
    )
    assert (project / "data" / "probe" / "probe.json").exists()
    assert set(published) == {"skillrag-report", "skillrag-metrics", "skillrag-data-docs"}
    # Prefect 3 stores a link artifact as markdown: "[Great Expectations Data Docs](file://...)"
    assert artifacts["skillrag-data-docs"].data.startswith("[Great Expectations Data Docs](file://")
    assert "data_docs" in artifacts["skillrag-data-docs"].data
    assert artifacts["skillrag-report"].type == "markdown"
    assert artifacts["skillrag-report"].data == (project / "reports" / "report.md").read_text()
    assert artifacts["skillrag-metrics"].type == "table"
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    assert len(json.loads(artifacts["skillrag-metrics"].data)) == sum(len(by) for by in metrics.values())
