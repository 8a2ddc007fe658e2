"""What a flow run shows in the Prefect UI: the report as a markdown artifact, the headline
metrics as a table artifact, and a link to the gates' Great Expectations Data Docs. Keys are
lower-case with dashes, as Prefect requires; each artifact is published only when its file exists
(a run stopped by `until` has no report yet)."""

from __future__ import annotations

import json
from typing import Any

from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from skillrag.paths import Paths
from skillrag.report.data_docs import data_docs_index


def metric_rows(metrics: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """reports/metrics.json as table rows: one per (method, dataset)."""
    return [{"method": method, "dataset": dataset, **numbers} for method, by in metrics.items() for dataset, numbers in by.items()]


def publish_artifacts(paths: Paths, key: str = "skillrag") -> list[str]:
    """Publish what exists of report, metrics and Data Docs under `<key>-report`, `<key>-metrics`,
    `<key>-data-docs`; returns the keys published."""
    published = []
    if paths.report.exists():
        create_markdown_artifact(paths.report.read_text(encoding="utf-8"), key=f"{key}-report", description=str(paths.report))
        published.append(f"{key}-report")
    if paths.metrics.exists():
        rows = metric_rows(json.loads(paths.metrics.read_text(encoding="utf-8")))
        create_table_artifact(rows, key=f"{key}-metrics", description=f"headline metrics ({paths.metrics})")
        published.append(f"{key}-metrics")
    docs = data_docs_index(paths)
    if docs.is_file():
        create_link_artifact(docs.resolve().as_uri(), "Great Expectations Data Docs", key=f"{key}-data-docs")
        published.append(f"{key}-data-docs")
    return published
