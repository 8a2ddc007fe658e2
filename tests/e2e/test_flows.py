"""The Prefect flows run offline (temporary server via prefect_test_harness) and write exactly what
the DVC stage commands write."""

import pytest
from prefect.testing.utilities import prefect_test_harness

from flows.pipeline import pipeline_flow
from tests.e2e.conftest import make_project

pytestmark = pytest.mark.e2e


def test_pipeline_flow_matches_dvc_outputs(dvc_project, tmp_path):
    project = make_project(tmp_path / "flows")
    with prefect_test_harness():
        pipeline_flow(params_file=str(project / "params.yaml"))
    for relative in ["data/questions/train/nq.jsonl", "data/questions/eval/2wiki.jsonl", "data/corpus/part-00000.jsonl"]:
        assert (project / relative).read_bytes() == (dvc_project / relative).read_bytes(), relative
    assert (project / "data" / "index" / "lucene").is_dir()
