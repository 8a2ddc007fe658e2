"""Run Great Expectations suites over in-memory frames and turn a failure into a readable error.

A gate is a set of named checks, each a DataFrame plus the expectations it must meet. The full
validation result is written (atomically) to `reports/validation/<gate>.json` (`Paths.validation`),
pass or fail, so a failed stage leaves the evidence of why it failed. It is a git-tracked DVC output,
so the run-time markers GX adds (`RUN_MARKERS`: load and validation times, the run's and each
expectation's random ids) are dropped first: the same data gives the same bytes on any machine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from skillrag.errors import UserError
from skillrag.files import write_json

MAX_EXAMPLES = 5
RUN_MARKERS = (("batch_markers", "ge_load_time"), ("run_id", "run_time"), ("validation_time",), ("validation_id",))
"""Paths under a result's `meta` that differ from run to run on the same data (GX 1.24)."""


class GateFailed(UserError):
    """A quality gate did not pass; str() is a summary naming each failed expectation."""


@dataclass(frozen=True)
class Check:
    """A frame and the expectations it must meet; `label`: the column that names a row (a run, a
    question), so a failure says which rows failed, not only their values."""

    frame: pd.DataFrame
    expectations: Sequence[Any]  # great_expectations.expectations.Expectation
    label: str | None = None


@cache
def _context() -> Any:
    import great_expectations as gx  # deferred: ~5 s import, only stages that gate pay it

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = {"globally": False}
    return context


def _validate(gate: str, name: str, check: Check) -> dict[str, Any]:
    import great_expectations as gx

    context = _context()
    key = f"{gate}.{name}"
    source = context.data_sources.add_or_update_pandas(key)
    asset = source.add_dataframe_asset(name)
    batch = asset.add_batch_definition_whole_dataframe("all")
    suite = gx.ExpectationSuite(name=key, expectations=list(check.expectations))
    suite = context.suites.add_or_update(suite)
    definition = context.validation_definitions.add_or_update(gx.ValidationDefinition(name=key, data=batch, suite=suite))
    result = definition.run(batch_parameters={"dataframe": check.frame}, result_format="SUMMARY")
    return without_run_markers(result.to_json_dict())


def without_run_markers(result: dict[str, Any]) -> dict[str, Any]:
    """`result` (a suite's validation result as JSON) without `RUN_MARKERS` and the expectations'
    random `id`s; everything else, `pandas_data_fingerprint` included, is deterministic."""
    meta = result.get("meta", {})
    for *parents, key in RUN_MARKERS:
        holder = meta
        for parent in parents:
            holder = holder.get(parent) or {}
        holder.pop(key, None)
    for item in result.get("results", []):
        item.get("expectation_config", {}).pop("id", None)
    return result


def _summarise(gate: str, results: Mapping[str, dict[str, Any]], checks: Mapping[str, Check]) -> str:
    lines = [f"quality gate '{gate}' failed:"]
    for name, result in results.items():
        for item in result["results"]:
            if item["success"]:
                continue
            config = item["expectation_config"]
            kwargs = {k: v for k, v in config["kwargs"].items() if k != "batch_id"}
            detail = item.get("result", {})
            count = detail.get("unexpected_count")
            examples = (detail.get("partial_unexpected_list") or [])[:MAX_EXAMPLES]
            observed = detail.get("observed_value")
            line = f"  - [{name}] {config['type']} {kwargs}"
            if count is not None:
                line += f": {count} of {detail.get('element_count')} rows fail, e.g. {examples}"
                label, rows = checks[name].label, (detail.get("partial_unexpected_index_list") or [])[:MAX_EXAMPLES]
                if label is not None and rows:
                    line += f" ({label}: {', '.join(str(checks[name].frame[label].iloc[row]) for row in rows)})"
            elif observed is not None:
                line += f": observed {observed}"
            if item.get("exception_info", {}).get("raised_exception"):
                line += f": error {item['exception_info'].get('exception_message')}"
            lines.append(line)
    return "\n".join(lines)


def run_gate(gate: str, checks: Mapping[str, Check], result_path: str | Path) -> dict[str, Any]:
    """Validate every check, write all results to `result_path`, raise GateFailed if any failed."""
    results = {name: _validate(gate, name, check) for name, check in checks.items()}
    success = all(result["success"] for result in results.values())
    report = {"gate": gate, "success": success, "checks": results}
    write_json(result_path, report)
    if not success:
        raise GateFailed(_summarise(gate, results, checks) + f"\n  full result: {result_path}")
    return report
