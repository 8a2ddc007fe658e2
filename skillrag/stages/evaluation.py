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
    reports/metrics.json and the full summary (intervals, flexible scores, all costs, counts, and
    `reuse`: the LM results this run took from earlier methods' calls) in
    reports/metrics_detail.json, returned.

    Datasets run one after another, every method on each, so a dataset's closed-book and
    single-step answers are still remembered (`lm.reuse_cache`) when the gated methods reach
    them; `lm.concurrency` questions run at once (skillrag.eval.runner)."""
    from skillrag import runtime
    from skillrag.data.splits import load_split
    from skillrag.eval.runner import run_method
    from skillrag.eval.summary import headline, summarize
    from skillrag.files import write_json
    from skillrag.methods import METHODS, ReusingLM, build_method, open_components

    questions = load_split(paths.questions, "eval", params.prepare.max_question_chars)
    needs_prober = any(METHODS[name].needs_prober for name in params.evaluate.methods)
    lm = ReusingLM(runtime.open_lm(params), params.lm.reuse_cache)
    parts = open_components(params, paths, needs_prober, lm=lm)
    methods = {name: build_method(name, parts) for name in params.evaluate.methods}
    metrics: dict[str, dict[str, Any]] = {name: {} for name in methods}
    for dataset in params.evaluate.datasets:
        chosen = questions[dataset][: params.evaluate.limit]
        for name, method in methods.items():
            settings = run_settings(params, paths, name, [paths.question_file("eval", dataset)])
            before = lm.stats
            traces = run_method(
                method, chosen, paths.run_file(name, dataset), settings,
                concurrency=params.lm.concurrency, batch_size=params.lm.batch_size,
            )
            summary = summarize(traces, params.methods.abstain_answer)
            metrics[name][dataset] = {**summary, "reuse": (lm.stats - before).as_dict()}
    gate_evaluate(params, paths)  # before the metrics are published: failed runs must not look measured
    write_json(paths.metrics_detail, metrics)
    write_json(paths.metrics, {name: {d: headline(s) for d, s in by.items()} for name, by in metrics.items()})
    return metrics


def gate_evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.runs import gate_runs

    return gate_runs(
        paths, params.evaluate.methods, params.evaluate.datasets, params.evaluate.limit, params.evaluate.max_error_rate
    )
