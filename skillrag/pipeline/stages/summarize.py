"""Stage `summarize`: every method's runs (the `evaluate-<method>` stages) gated, then merged into
reports/metrics.json (headline) and reports/metrics_detail.json (everything)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def summarize(params: Params, paths: Paths, datasets: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """The runs gate over every method of `evaluate.methods` on every dataset (default
    `evaluate.datasets`), and only once it passes (failed runs must not look measured), per
    (method, dataset) the headline numbers in reports/metrics.json and the full summary in
    reports/metrics_detail.json, returned, and every question's outcome in reports/outcomes.csv
    (in git, so a pull request's diff shows which questions changed): intervals, flexible scores, every per-question cost,
    counts, `reuse` (the LM results the run took from earlier calls) and `run_costs` (what the
    run itself paid, charged to no question: Skill-RAG's router calibration)."""
    from skillrag.eval.runner import read_traces
    from skillrag.eval.scoring import headline
    from skillrag.eval.scoring import summarize as summarize_traces
    from skillrag.files import write_json
    from skillrag.pipeline.stages.evaluate import eval_questions, run_record
    from skillrag.quality.runs_gate import gate_runs
    from skillrag.report.outcomes import write_outcomes

    datasets = list(params.evaluate.datasets if datasets is None else datasets)
    questions = eval_questions(params, paths, datasets)
    metrics: dict[str, dict[str, Any]] = {}
    for method in params.evaluate.methods:
        metrics[method] = {}
        for dataset in datasets:
            traced = {t.question_id: t for t in read_traces(paths.run_file(method, dataset))}
            run = [traced[q.id] for q in questions[dataset] if q.id in traced]
            record = run_record(paths, method, dataset)
            recorded = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
            metrics[method][dataset] = {**summarize_traces(run, params.methods.abstain_answer), **recorded}
    gate_runs(
        paths, params.evaluate.methods, datasets, params.evaluate.limit,
        params.evaluate.max_error_rate, params.evaluate.require_retrieval,
    )
    write_json(paths.metrics_detail, metrics)
    write_json(paths.metrics, {name: {d: headline(s) for d, s in by.items()} for name, by in metrics.items()})
    write_outcomes(paths.runs, paths.outcomes, params.evaluate.methods, datasets)
    return metrics
