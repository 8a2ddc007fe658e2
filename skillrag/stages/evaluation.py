"""Stage `evaluate`: every method on every evaluation set (data/runs/), gated before the metrics
files are published; its questions may be sharded across workers (`shards`, `map_shards`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from skillrag.config import Params
from skillrag.errors import ArtifactError
from skillrag.paths import Paths
from skillrag.stages.common import ShardMap, in_process, shard_of
from skillrag.stages.settings import run_settings

if TYPE_CHECKING:
    from skillrag.methods import Components


def evaluate(
    params: Params,
    paths: Paths,
    datasets: Sequence[str] | None = None,
    shards: int = 1,
    map_shards: ShardMap = in_process,
) -> dict[str, Any]:
    """Every method on every evaluation set: traces in data/runs/<method>/<dataset>.jsonl; then the
    runs gate, and only once it passes, per (method, dataset) the headline numbers in
    reports/metrics.json and the full summary (intervals, flexible scores, all costs, counts, and
    `reuse`: the LM results this run took from earlier methods' calls) in
    reports/metrics_detail.json, returned.

    `datasets`: the evaluation sets (default `evaluate.datasets`; `skillrag evaluate --questions`
    passes its own). `shards` > 1 splits each run's unanswered questions into that many
    contiguous slices, one per `map_shards` call (`evaluate_shard`), each writing its own part
    file; the parts are then merged in question order (`skillrag.eval.runner.merge_parts`), so
    the files equal a single-process run's. Workers never share a file, and the parent writes
    only while no worker runs; the parts of an interrupted sharded run are merged first, so a
    rerun (with any number of shards) resumes it."""
    from skillrag.eval.runner import merge_parts
    from skillrag.eval.summary import headline, summarize
    from skillrag.files import write_json
    from skillrag.methods import ReuseStats

    datasets = list(params.evaluate.datasets if datasets is None else datasets)
    questions = _questions(params, paths, datasets)

    def merged() -> dict[tuple[str, str], list[Any]]:
        return {
            (name, dataset): merge_parts(
                paths.run_file(name, dataset), questions[dataset], _settings(params, paths, name, dataset)
            )
            for dataset in datasets
            for name in params.evaluate.methods
        }

    merged()  # the parts an interrupted sharded run left
    reuse = map_shards(evaluate_shard, [(params, paths, datasets, shard, shards) for shard in range(shards)])
    traces = merged()
    metrics: dict[str, dict[str, Any]] = {name: {} for name in params.evaluate.methods}
    for (name, dataset), run in traces.items():
        stats = [by_run[name][dataset] for by_run in reuse]
        total = ReuseStats(sum(s.lookups for s in stats), sum(s.hits for s in stats))
        metrics[name][dataset] = {**summarize(run, params.methods.abstain_answer), "reuse": total.as_dict()}
    gate_evaluate(params, paths, datasets)  # before the metrics are published: failed runs must not look measured
    write_json(paths.metrics_detail, metrics)
    write_json(paths.metrics, {name: {d: headline(s) for d, s in by.items()} for name, by in metrics.items()})
    return metrics


def evaluate_shard(
    params: Params, paths: Paths, datasets: Sequence[str], shard: int, shards: int
) -> dict[str, dict[str, Any]]:
    """One worker's part of `evaluate`: shard `shard` of `shards` of every (dataset, method) run,
    appended to the run file itself when unsharded, else to the shard's own part file
    (`skillrag.eval.runner.part_file`). Returns the `ReuseStats` per method and dataset.

    Datasets run one after another, every method on each, so a dataset's closed-book and
    single-step answers are still remembered (`lm.reuse_cache`) when the gated methods reach
    them; `lm.concurrency` questions run at once (skillrag.eval.runner)."""
    from skillrag import runtime
    from skillrag.eval.runner import part_file, read_traces, run_method
    from skillrag.methods import METHODS, ReusingLM, build_method
    from skillrag.runtime.components import open_components

    questions = _questions(params, paths, datasets)
    chosen_methods = [METHODS[name] for name in params.evaluate.methods]
    needs_prober = any(method.needs_prober for method in chosen_methods)
    needs_classifier = any(method.needs_classifier for method in chosen_methods)
    lm = ReusingLM(runtime.open_lm(params), params.lm.reuse_cache)
    parts = open_components(params, paths, needs_prober, lm=lm, needs_classifier=needs_classifier)
    methods = {name: build_method(name, _keeping_states(name, parts)) for name in params.evaluate.methods}
    reuse: dict[str, dict[str, Any]] = {name: {} for name in methods}
    for dataset in datasets:
        for name, method in methods.items():
            out_file, chosen = paths.run_file(name, dataset), questions[dataset]
            if shards > 1:
                done = {t.question_id for t in read_traces(out_file) if t.termination != "error"}
                out_file, chosen = part_file(out_file, shard), shard_of([q for q in chosen if q.id not in done], shard, shards)
            before = lm.stats
            run_method(
                method, chosen, out_file, _settings(params, paths, name, dataset),
                concurrency=params.lm.concurrency, batch_size=params.lm.batch_size,
            )
            reuse[name][dataset] = lm.stats - before
    return reuse


def _keeping_states(method: str, parts: Components) -> Components:
    """skill_rag's rounds keep their answer's hidden vector (the mean over the prober's layers)
    for the failure-space analysis (stage `analyze`). Every gated answer captures those layers
    for the prober anyway, so this costs no model work and leaves the LM calls (and their reuse)
    unchanged; it only makes the traces larger."""
    from dataclasses import replace

    if method != "skill_rag" or parts.prober is None:
        return parts
    return replace(parts, state_layers=tuple(parts.prober.layers))


def _questions(params: Params, paths: Paths, datasets: Sequence[str]) -> dict[str, list[Any]]:
    """dataset -> the evaluation questions a run answers (the first `evaluate.limit`)."""
    from skillrag.data.splits import load_split

    found = load_split(paths.questions, "eval", params.prepare.max_question_chars)
    missing = [d for d in datasets if d not in found]
    if missing:
        raise ArtifactError(f"no evaluation questions for {', '.join(missing)} in {paths.questions / 'eval'}")
    return {dataset: found[dataset][: params.evaluate.limit] for dataset in datasets}


def _settings(params: Params, paths: Paths, method: str, dataset: str) -> dict[str, Any]:
    return run_settings(params, paths, method, [paths.question_file("eval", dataset)])


def gate_evaluate(params: Params, paths: Paths, datasets: Sequence[str] | None = None) -> dict[str, Any]:
    from skillrag.quality.runs import gate_runs

    return gate_runs(
        paths,
        params.evaluate.methods,
        params.evaluate.datasets if datasets is None else datasets,
        params.evaluate.limit,
        params.evaluate.max_error_rate,
        params.evaluate.require_retrieval,
    )
