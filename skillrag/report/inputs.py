"""What the report reads, loaded once: the evaluation's summaries, traces and run settings, the
prober's, router's, triggers' and Adaptive-RAG classifier's reports, the failure-space analysis
and the gates' results.

Traces are read as plain JSON rows (the `skillrag.methods.trace` schema), so the report needs
neither torch nor the methods. Methods and datasets are whatever `reports/metrics_detail.json`
holds, so a new method appears in every table without a change here; methods are listed in the
registry's order (the paper's comparison first), not the JSON's alphabetical one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillrag.errors import ArtifactError
from skillrag.files import read_jsonl
from skillrag.paths import Paths
from skillrag.registry import METHOD_NAMES


def in_method_order(methods: Iterable[str]) -> list[str]:
    """`methods` in the registry's order; a name it does not declare after those, by name."""
    rank = {name: i for i, name in enumerate(METHOD_NAMES)}
    return sorted(methods, key=lambda m: (rank.get(m, len(rank)), m))


@dataclass(frozen=True)
class Inputs:
    detail: dict[str, dict[str, dict[str, Any]]]  # method -> dataset -> summary (metrics_detail.json)
    traces: dict[str, dict[str, list[dict[str, Any]]]]  # method -> dataset -> trace rows
    settings: dict[str, dict[str, dict[str, Any]]]  # method -> dataset -> run settings sidecar
    probe: dict[str, Any]  # reports/probe_detail.json ({} when absent)
    probe_record: dict[str, Any]  # data/probe/probe.json ({} when absent)
    router: dict[str, Any]  # reports/router_metrics.json ({} when absent)
    analysis: dict[str, Any]  # reports/analysis.json ({} when absent)
    gates: dict[str, dict[str, Any]]  # gate name -> its validation result
    timings: dict[str, dict[str, Any]]  # DVC stage name -> reports/timings/<stage>.json (skillrag.pipeline.timing)
    thresholds: dict[str, Any] = field(default_factory=dict)  # reports/thresholds.json: the triggers' dev rates
    adaptive: dict[str, Any] = field(default_factory=dict)  # reports/adaptive_metrics.json: the classifier on dev

    @property
    def methods(self) -> list[str]:
        return in_method_order(self.detail)

    def datasets(self, order: list[str]) -> list[str]:
        """The evaluated datasets, in `order` first, then any other in name order."""
        seen = {d for by in self.detail.values() for d in by}
        return [d for d in order if d in seen] + sorted(seen - set(order))

    def all_traces(self, method: str) -> list[dict[str, Any]]:
        return [t for rows in self.traces.get(method, {}).values() for t in rows]


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def gate_result_files(paths: Paths) -> list[Path]:
    """Every gate's full result (reports/validation/<gate>.json, `Paths.validation`)."""
    return sorted(paths.validation("*").parent.glob("*.json"))


def load_inputs(paths: Paths) -> Inputs:
    """Everything the report reads; a missing file reads as empty (the report says what is missing)."""
    if not paths.metrics_detail.is_file():
        raise ArtifactError(f"{paths.metrics_detail} is missing: run `skillrag evaluate` first")
    detail = _json(paths.metrics_detail)
    traces: dict[str, dict[str, list[dict[str, Any]]]] = {}
    settings: dict[str, dict[str, dict[str, Any]]] = {}
    for method, by_dataset in detail.items():
        for dataset in by_dataset:
            run = paths.run_file(method, dataset)
            traces.setdefault(method, {})[dataset] = list(read_jsonl(run)) if run.is_file() else []
            # the runner's sidecar name (skillrag.eval.runner.settings_file)
            settings.setdefault(method, {})[dataset] = _json(run.with_name(f"{run.stem}.settings.json"))
    gates = {}
    for file in gate_result_files(paths):
        result = _json(file)
        gates[result.get("gate", file.stem)] = result
    records = sorted(map(_json, paths.timings.glob("*.json")), key=lambda r: r["finished"])
    timings = {record["stage"]: record for record in records}  # in the order the stages finished
    return Inputs(
        detail, traces, settings, _json(paths.probe_detail), _json(paths.probe / "probe.json"),
        _json(paths.router_metrics), _json(paths.analysis), gates, timings,
        _json(paths.thresholds_report), _json(paths.adaptive_metrics),
    )
