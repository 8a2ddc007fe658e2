"""The runs gate (in `evaluate`, before the metrics are published): one trace per question and
method, known terminations, explained errors, an error-rate cap, and every method meant to
retrieve retrieving at least once per dataset (a baseline whose trigger never fires is a
closed-book run under another name)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.quality.gate import Check, run_gate

log = logging.getLogger(__name__)


def error_share(traces: Sequence[Mapping[str, Any]], max_rate: float) -> str:
    """"ok" when at most `max_rate` of `traces` are error traces, else a line naming the share and
    the most common error (by exception type, with an example message) and its count."""
    errors = [str(t.get("error") or "") for t in traces if t["termination"] == "error"]
    if not traces or len(errors) <= max_rate * len(traces):
        return "ok"
    kind, count = Counter(e.partition(":")[0] for e in errors).most_common(1)[0]
    example = next(e for e in errors if e.partition(":")[0] == kind)
    return (
        f"{len(errors)} of {len(traces)} traces are errors (cap evaluate.max_error_rate={max_rate}); "
        f"most common: {kind} x{count}, e.g. {example[:160]!r}"
    )


def retrieval_check(method: str, settings: Mapping[str, Any] | None, traces: Sequence[Mapping[str, Any]]) -> str:
    """"ok" unless the run's `settings` say `method` is meant to retrieve (`retrieves`) and none
    of its answered traces retrieved; then a line naming what decides its retrieval (`trigger`).
    The gate reads the run's data, not the method's code (skillrag.pipeline.settings.run_settings)."""
    answered = [t for t in traces if t["termination"] != "error"]
    if not answered:
        return "ok"
    if settings is None or "retrieves" not in settings:
        return "no run settings say whether it is meant to retrieve: re-run its evaluate stage"
    if not settings["retrieves"] or any(t["totals"]["retrievals"] for t in answered):
        return "ok"
    return (
        f"0 retrievals over {len(answered)} questions, though {method} is meant to retrieve: "
        f"check {settings['trigger']}"
    )


def gate_runs(
    paths: Any,
    methods: Sequence[str],
    datasets: Sequence[str],
    limit: int | None,
    max_error_rate: float,
    require_retrieval: bool = True,
) -> dict[str, Any]:
    """The gate after `evaluate`: every evaluation question has exactly one trace per method,
    each with a known termination, an error trace carries its message, no run (method, dataset)
    holds more than `max_error_rate` error traces (a rerun retries them), and every run of a
    retrieving method retrieved at least once (`retrieval_check`; with `require_retrieval` off,
    as on profiles with two questions per dataset, a run that never retrieved is logged only)."""
    import json

    from skillrag.data.splits import load_split
    from skillrag.eval.runner import read_trace_rows, settings_file
    from skillrag.methods.trace import TERMINATIONS

    expected = {dataset: [q.id for q in qs[:limit]] for dataset, qs in load_split(paths.questions, "eval").items()}
    rows, counts = [], []
    for method in methods:
        for dataset in datasets:
            run_file, sidecar = paths.run_file(method, dataset), settings_file(paths.run_file(method, dataset))
            traces = read_trace_rows(run_file)  # a torn last line (a run in flight, a kill) is not counted
            settings = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else None
            ids = [t["question_id"] for t in traces]
            counts.append(
                {
                    "run": f"{method}/{dataset}",
                    "traced": len(set(ids) & set(expected[dataset])),
                    "expected": len(expected[dataset]),
                    "errors": f"{method}/{dataset}: {error_share(traces, max_error_rate)}",
                    "retrieval": f"{method}/{dataset}: {retrieval_check(method, settings, traces)}",
                }
            )
            rows += [
                {
                    "key": f"{method}/{t['question_id']}",
                    "termination": t["termination"],
                    "explained": t["termination"] != "error" or bool(t.get("error")),
                }
                for t in traces
            ]
    if not require_retrieval:
        for line in (c["retrieval"] for c in counts if not c["retrieval"].endswith(": ok")):
            log.warning("%s (not required: evaluate.require_retrieval is false)", line)
    checks = {
        "coverage": Check(
            pd.DataFrame(counts, columns=["run", "traced", "expected", "errors", "retrieval"]),
            [
                gxe.ExpectColumnPairValuesToBeEqual(column_A="traced", column_B="expected"),
                gxe.ExpectColumnValuesToMatchRegex(column="errors", regex=": ok$"),
                *([gxe.ExpectColumnValuesToMatchRegex(column="retrieval", regex=": ok$")] if require_retrieval else []),
            ],
            label="run",
        ),
        "traces": Check(
            pd.DataFrame(rows, columns=["key", "termination", "explained"]),
            [
                gxe.ExpectColumnValuesToBeUnique(column="key"),
                gxe.ExpectColumnValuesToBeInSet(column="termination", value_set=list(TERMINATIONS)),
                gxe.ExpectColumnValuesToBeInSet(column="explained", value_set=[True]),
            ],
            label="key",
        ),
    }
    return run_gate("runs", checks, paths.validation("runs"))
