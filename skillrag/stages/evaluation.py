"""Stage `evaluate`: every method on every evaluation set (data/runs/), gated before the metrics
files are published."""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.stages.common import exclusive
from skillrag.stages.settings import run_settings


@exclusive
def evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    """Every method on every evaluation set: traces in data/runs/<method>/<dataset>.jsonl; then the
    runs gate, and only once it passes, per (method, dataset) the headline numbers in
    reports/metrics.json and the full summary (intervals, flexible scores, all costs, counts) in
    reports/metrics_detail.json, returned."""
    from skillrag.data.splits import load_split
    from skillrag.eval.runner import run_method
    from skillrag.eval.summary import headline, summarize
    from skillrag.files import write_json
    from skillrag.methods import METHODS, build_method, open_components

    questions = load_split(paths.questions, "eval", params.prepare.max_question_chars)
    needs_prober = any(METHODS[name].needs_prober for name in params.evaluate.methods)
    parts = open_components(params, paths, needs_prober)
    metrics: dict[str, dict[str, Any]] = {}
    for name in params.evaluate.methods:
        method = build_method(name, parts)
        for dataset in params.evaluate.datasets:
            chosen = questions[dataset][: params.evaluate.limit]
            settings = run_settings(params, paths, name, [paths.question_file("eval", dataset)])
            traces = run_method(method, chosen, paths.run_file(name, dataset), settings)
            metrics.setdefault(name, {})[dataset] = summarize(traces, params.methods.abstain_answer)
    gate_evaluate(params, paths)  # before the metrics are published: failed runs must not look measured
    write_json(paths.metrics_detail, metrics)
    write_json(paths.metrics, {name: {d: headline(s) for d, s in by.items()} for name, by in metrics.items()})
    return metrics


def gate_evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.runs import gate_runs

    return gate_runs(
        paths, params.evaluate.methods, params.evaluate.datasets, params.evaluate.limit, params.evaluate.max_error_rate
    )
