"""The flows' retry policy and artifacts, called directly (no Prefect server): transient failures
are retried, a gate's verdict and bad input never; the metrics table has one row per run."""

from __future__ import annotations

import pytest
from prefect.states import Failed

from flows.artifacts import metric_rows
from flows.common import is_transient, retried, run_stage_on
from skillrag.config import ConfigError
from skillrag.files import DataError
from skillrag.pipeline.repro import StageFailed
from skillrag.pipeline.stages import STAGES
from skillrag.quality import GateFailed


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (OSError("disk hiccup"), True),
        (MemoryError(), True),
        (type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory"), True),
        (GateFailed("quality gate 'runs' failed"), False),
        (DataError("x.jsonl:3: malformed JSON"), False),
        (ConfigError("bad key"), False),
        (FileNotFoundError("data/probe"), False),
        (TypeError("a bug"), False),
        (StageFailed("extract", -9), True),  # a stage command killed by the out-of-memory killer
        (StageFailed("extract", 137), True),  # the same, as the shell reports it
        (StageFailed("summarize", 1), False),  # the stage's own error (its gate's verdict included)
    ],
)
def test_only_transient_errors_are_retried(error, transient):
    stage = retried(STAGES["evaluate"].run, "evaluate")
    assert stage.retries >= 1  # a transient failure gets another attempt at all
    assert stage.retry_condition_fn(stage, None, Failed(data=error)) is transient
    assert is_transient(error) is transient


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="workers=0"):
        run_stage_on(STAGES["evaluate"], None, None, workers=0)


def test_metric_rows_one_per_method_and_dataset():
    metrics = {"skill_rag": {"nq": {"acc": 0.5}, "hotpotqa": {"acc": 0.25}}, "no_retrieval": {"nq": {"acc": 0.1}}}
    assert metric_rows(metrics) == [
        {"method": "skill_rag", "dataset": "nq", "acc": 0.5},
        {"method": "skill_rag", "dataset": "hotpotqa", "acc": 0.25},
        {"method": "no_retrieval", "dataset": "nq", "acc": 0.1},
    ]


def test_artifacts_are_published_for_what_exists_under_dash_keys(tmp_path, monkeypatch):
    import json
    import re

    from flows import artifacts
    from skillrag.paths import Paths
    from skillrag.report.data_docs import data_docs_index

    made = {}
    monkeypatch.setattr(artifacts, "create_markdown_artifact", lambda text, key, description: made.update({key: text}))
    monkeypatch.setattr(artifacts, "create_table_artifact", lambda rows, key, description: made.update({key: rows}))
    monkeypatch.setattr(artifacts, "create_link_artifact", lambda link, text, key: made.update({key: link}))
    paths = Paths(tmp_path)
    assert artifacts.publish_artifacts(paths) == []  # a run stopped early has nothing to show
    paths.metrics.parent.mkdir(parents=True)
    paths.metrics.write_text(json.dumps({"skill_rag": {"nq": {"acc": 0.5}}}))
    paths.report.write_text("# Report\n")
    data_docs_index(paths).parent.mkdir(parents=True)
    data_docs_index(paths).write_text("<html></html>")
    keys = artifacts.publish_artifacts(paths)
    assert keys == ["skillrag-report", "skillrag-metrics", "skillrag-data-docs"] == list(made)
    assert all(re.fullmatch(r"[a-z0-9-]+", key) for key in keys)
    assert made["skillrag-report"] == "# Report\n"
    assert made["skillrag-metrics"] == [{"method": "skill_rag", "dataset": "nq", "acc": 0.5}]
    assert made["skillrag-data-docs"].startswith("file://") and made["skillrag-data-docs"].endswith("index.html")
