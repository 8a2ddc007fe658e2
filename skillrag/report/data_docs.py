"""The gates' results as Great Expectations Data Docs: a file-backed GX context (data/data_docs/,
DVC-tracked: ~4 MB of HTML and static assets that git need not hold) whose validation-results
store receives every gate's stored result, rendered offline by GX's own site builder.

The gates validate with an ephemeral context and write each result as JSON to reports/validation/
(skillrag.quality.gate); this reads those files back, so the docs show exactly what the gates saw
and building them re-runs no check.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from skillrag.files import atomic_path
from skillrag.paths import Paths
from skillrag.report.inputs import gate_result_files

SITE = Path("gx") / "uncommitted" / "data_docs" / "local_site" / "index.html"


def data_docs_index(paths: Paths) -> Path:
    """The Data Docs' entry page (exists once `build_data_docs` ran)."""
    return paths.data_docs / SITE


def build_data_docs(paths: Paths) -> Path:
    """Rebuild the Data Docs from every gate result file; returns the index page."""
    import great_expectations as gx
    from great_expectations.core.expectation_validation_result import ExpectationSuiteValidationResultSchema
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    schema = ExpectationSuiteValidationResultSchema()
    with atomic_path(paths.data_docs) as tmp:
        context = gx.get_context(mode="file", project_root_dir=tmp)
        context.variables.progress_bars = {"globally": False}
        for file in gate_result_files(paths):
            report = json.loads(file.read_text())
            for name, result in report.get("checks", {}).items():
                meta = result.get("meta", {})
                run = meta.get("run_id") or {}
                key = ValidationResultIdentifier(
                    ExpectationSuiteIdentifier(result.get("suite_name") or f"{report.get('gate')}.{name}"),
                    RunIdentifier(run_name=run.get("run_name") or report.get("gate"), run_time=run.get("run_time")),
                    (meta.get("active_batch_definition") or {}).get("datasource_name") or name,
                )
                context.validation_results_store.set(key, schema.load(result))
        context.build_data_docs()
    return data_docs_index(paths)
