"""The Prefect flows run offline (a temporary server via prefect_test_harness) and write what the
DVC stage commands write: byte-identical files wherever the format is deterministic (Lucene
writes random segment ids, so its index is compared by document count through the gate)."""

import pandas as pd
import pytest
from prefect.testing.utilities import prefect_test_harness

from flows.pipeline import pipeline_flow
from skillrag.probe.states import read_rows
from tests.e2e.conftest import make_project

pytestmark = pytest.mark.e2e


def test_pipeline_flow_matches_dvc_outputs(dvc_project, tmp_path):
    project = make_project(tmp_path / "flows")
    with prefect_test_harness():
        pipeline_flow(params_file=str(project / "params.yaml"), until="train-probe")
    for relative in [
        "data/questions/train/nq.jsonl",
        "data/questions/eval/2wiki.jsonl",
        "data/corpus/part-00000.jsonl",
        "data/index/bm25s/params.index.json",
    ]:
        assert (project / relative).read_bytes() == (dvc_project / relative).read_bytes(), relative
    columns = ["id", "strategy", "text", "answer", "acc"]
    pd.testing.assert_frame_equal(
        read_rows(project / "data" / "states")[columns], read_rows(dvc_project / "data" / "states")[columns]
    )
    assert (project / "data" / "probe" / "probe.json").exists()
