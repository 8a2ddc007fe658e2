"""Stage `evaluate-<method>`: one method on every evaluation set (data/runs/<method>/); its
questions may be sharded across workers (`shards`, `map_shards`). `skillrag.pipeline.stages.summarize`
then gates every method's runs and writes the metrics.

no_retrieval and single_step store every generation they make (skillrag.eval.generations),
capturing the hidden states of all of `lm.layers`; the methods that start as they do
(`starts_from` in skillrag.registry) read them from those stages' outputs and are served from them (read-only) when
only what is captured differs, so each method is its own DVC stage and still makes no
generation twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillrag.config import Params
from skillrag.errors import ArtifactError
from skillrag.paths import Paths
from skillrag.pipeline.settings import run_settings
from skillrag.pipeline.stages.common import ShardMap, in_process, shard_of
from skillrag.registry import METHODS, check_methods, stores

if TYPE_CHECKING:
    from skillrag.methods import Components

GENERATIONS = "generations"  # data/runs/<method>/generations/: a stored stage's generations


def evaluate(
    params: Params,
    paths: Paths,
    datasets: Sequence[str] | None = None,
    shards: int = 1,
    map_shards: ShardMap = in_process,
    methods: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every method of `methods` (default `evaluate.methods`), the stored ones first: each as
    its `evaluate-<method>` stage runs it, the shards of the methods of one wave in one
    `map_shards` call (on Dask, independent methods run on separate workers at once). Returns
    method -> dataset -> {"answered", "reuse", "run_costs"} of this call.

    Traces go to data/runs/<method>/<dataset>.jsonl, beside them `<dataset>.run.json` (the LM
    results reused and the run's own costs, of the last call that answered a question).
    `datasets`: the evaluation sets (default `evaluate.datasets`; `skillrag evaluate --questions`
    passes its own). `shards` > 1 splits each run's unanswered questions into that many
    contiguous slices, one per `evaluate_shard` call, each writing its own part file; the parts
    are merged in question order (`skillrag.eval.runner.merge_parts`), so the files equal a
    single-process run's. The parts of an interrupted sharded run are merged first, so a rerun
    (with any number of shards) resumes it. A method's stage holds its own lock: two methods may
    run at once, one method only once."""
    from skillrag.files import exclusive, write_json

    datasets = list(params.evaluate.datasets if datasets is None else datasets)
    chosen = list(params.evaluate.methods if methods is None else methods)
    check_methods(chosen)
    check_inputs(params, paths, chosen)
    questions = eval_questions(params, paths, datasets)
    results: dict[str, dict[str, Any]] = {}
    waves = [[m for m in chosen if stores(m)], [m for m in chosen if not stores(m)]]
    for wave in filter(None, waves):
        with ExitStack() as locks:
            for method in wave:
                locks.enter_context(exclusive(paths.locks / f"evaluate-{method}.lock", f"`skillrag evaluate --method {method}`"))
                _merge(params, paths, method, datasets, questions)  # the parts an interrupted sharded run left
            calls = [(params, paths, method, datasets, shard, shards) for method in wave for shard in range(shards)]
            done = map_shards(evaluate_shard, calls)
            for method in wave:
                _merge(params, paths, method, datasets, questions)
                by_shard = [result for (_, _, m, *_), result in zip(calls, done, strict=True) if m == method]
                results[method] = {dataset: _total([s[dataset] for s in by_shard]) for dataset in datasets}
                for dataset, run in results[method].items():
                    if run["answered"]:
                        write_json(run_record(paths, method, dataset), {k: run[k] for k in ("reuse", "run_costs")})
    return results


def check_inputs(params: Params, paths: Paths, methods: Sequence[str]) -> None:
    """Stop in a second, naming the command that builds it, when a trained artifact one of
    `methods` opens is absent (the prober, Adaptive-RAG's classifier, a learned router) or the
    tuned thresholds do not read: before any model loads, not when that method's turn comes after
    the others' hours. (Each is checked in full, digests and model identity, when it opens.)"""
    from skillrag.methods import METHODS as CLASSES
    from skillrag.methods.complexity import REBUILD, RECORD
    from skillrag.methods.thresholds import load_thresholds
    from skillrag.probe.prober import BUILD_HINT

    check_methods(methods)
    load_thresholds(paths.thresholds)
    gated = [m for m in methods if CLASSES[m].needs_prober]
    if gated and not (paths.probe / "probe.json").is_file():
        raise ArtifactError(f"{', '.join(gated)} need the trained prober, absent at {paths.probe}: {BUILD_HINT}")
    classified = [m for m in methods if CLASSES[m].needs_classifier]
    if classified and not (paths.adaptive / RECORD).is_file():
        raise ArtifactError(f"{', '.join(classified)} need the query-complexity classifier, absent at {paths.adaptive}: run {REBUILD}")


def evaluate_method(params: Params, paths: Paths, method: str, shards: int = 1, map_shards: ShardMap = in_process) -> dict[str, Any]:
    """Stage `evaluate-<method>`: `evaluate` for that method alone, its wall time recorded in
    reports/timings/evaluate-<method>.json."""
    from skillrag.pipeline.timing import timed

    check_methods([method])  # before anything is timed or locked
    with timed(paths, f"evaluate-{method}"):
        return evaluate(params, paths, shards=shards, map_shards=map_shards, methods=[method])[method]


def run_record(paths: Paths, method: str, dataset: str) -> Path:
    """What a run records beside its traces: the LM results it reused and its own costs."""
    return paths.run_file(method, dataset).with_suffix(".run.json")


def evaluate_shard(
    params: Params, paths: Paths, method: str, datasets: Sequence[str], shard: int, shards: int
) -> dict[str, dict[str, Any]]:
    """One worker's part of `evaluate` for one method: shard `shard` of `shards` of every dataset's
    run, appended to the run file itself when unsharded, else to the shard's own part file
    (`skillrag.eval.runner.part_file`). Returns per dataset the questions answered, the
    `ReuseStats` and the run's own costs (`Method.run_costs`: a fresh method per dataset).

    Its ReusingLM is seeded with the generations of the stages it starts from (`starts_from`)
    made by the same model; a stored stage records every generation it computes, with all of
    `lm.layers` captured and the prober's layers kept (chunks `<dataset>.<shard>.<n>` under its
    `generations/` folder; skillrag.eval.generations)."""
    import logging

    from skillrag.eval.generations import load_generations, save_generations
    from skillrag.eval.runner import part_file, read_traces, run_method
    from skillrag.lm.base import resolve_layers
    from skillrag.lm.loading import resolve_device
    from skillrag.methods import METHODS as CLASSES
    from skillrag.methods import ReusingLM, build_method
    from skillrag.pipeline import runtime
    from skillrag.pipeline.runtime.components import open_components

    questions = eval_questions(params, paths, datasets)
    chosen = CLASSES[method]
    inner = runtime.open_lm(params)
    stored = stores(method)
    capture = resolve_layers(params.lm.layers, inner.num_layers) if stored else ()
    kept = _layers_read_later(paths) if stored else None
    lm = ReusingLM(inner, params.lm.reuse_cache, capture=capture, record=stored)
    components = open_components(
        params, paths, chosen.needs_prober, lm=lm, needs_classifier=chosen.needs_classifier, method=method
    )
    results: dict[str, dict[str, Any]] = {}
    for dataset in datasets:
        settings = _settings(params, paths, method, dataset)
        identity = {"model": settings["inputs"]["model"], "device": str(resolve_device(params.lm.device))}
        lm.seeds = {}
        for source in METHODS[method].starts_from if params.lm.reuse_cache else ():  # 0: no reuse at all
            found, foreign = load_generations(paths.runs / source / GENERATIONS, dataset, identity)
            lm.seeds |= found
            for chunk in foreign:
                logging.getLogger(__name__).warning("%s: made by another model, dtype or device; not reused", chunk)
        out_file, todo = paths.run_file(method, dataset), questions[dataset]
        if shards > 1:
            done = {t.question_id for t in read_traces(out_file) if t.termination != "error"}
            out_file, todo = part_file(out_file, shard), shard_of([q for q in todo if q.id not in done], shard, shards)
        done = {t.question_id for t in read_traces(out_file) if t.termination != "error"}
        answered = sum(q.id not in done for q in todo)
        runner = build_method(method, _keeping_states(method, components))
        before = lm.stats
        try:
            run_method(runner, todo, out_file, settings, concurrency=params.lm.concurrency, batch_size=params.lm.batch_size)
        finally:  # what an interrupted run made is kept too: the traces written before it may use it
            if stored:
                save_generations(paths.runs / method / GENERATIONS, f"{dataset}.{shard}", lm.made, identity, kept)
                lm.made.clear()
        results[dataset] = {"answered": answered, "reuse": lm.stats - before, "run_costs": runner.run_costs()}
    return results


def _layers_read_later(paths: Paths) -> list[int] | None:
    """The layers whose hidden states the methods starting from the stored generations read: the
    prober's (its gate scores them, skill_rag's state vector averages them); None (every captured
    layer) before a prober was trained."""
    record = paths.probe / "probe.json"
    return json.loads(record.read_text(encoding="utf-8"))["layers"] if record.exists() else None


def _total(by_shard: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures summed over its shards (each shard pays its own run costs)."""
    from skillrag.methods import Cost, ReuseStats

    return {
        "answered": sum(s["answered"] for s in by_shard),
        "reuse": sum((s["reuse"] for s in by_shard), ReuseStats()).as_dict(),
        "run_costs": asdict(sum((s["run_costs"] for s in by_shard), Cost())),
    }


def _merge(params: Params, paths: Paths, method: str, datasets: Sequence[str], questions: dict[str, list[Any]]) -> None:
    from skillrag.eval.runner import merge_parts

    for dataset in datasets:
        merge_parts(paths.run_file(method, dataset), questions[dataset], _settings(params, paths, method, dataset))


def _keeping_states(method: str, components: Components) -> Components:
    """A method that `keeps_states` (skill_rag) keeps each round's answer hidden vector (the mean
    over the prober's layers) for the failure-space analysis (stage `analyze`). Every gated answer captures those layers
    for the prober anyway, so this costs no model work and leaves the LM calls (and their reuse)
    unchanged; it only makes the traces larger."""
    from dataclasses import replace

    if not METHODS[method].keeps_states or components.prober is None:
        return components
    return replace(components, state_layers=tuple(components.prober.layers))


def eval_questions(params: Params, paths: Paths, datasets: Sequence[str]) -> dict[str, list[Any]]:
    """dataset -> the evaluation questions a run answers (the first `evaluate.limit`)."""
    from skillrag.data.splits import load_split

    found = load_split(paths.questions, "eval", params.prepare.max_question_chars)
    missing = [d for d in datasets if d not in found]
    if missing:
        raise ArtifactError(f"no evaluation questions for {', '.join(missing)} in {paths.questions / 'eval'}")
    return {dataset: found[dataset][: params.evaluate.limit] for dataset in datasets}


def _settings(params: Params, paths: Paths, method: str, dataset: str) -> dict[str, Any]:
    return run_settings(params, paths, method, [paths.question_file("eval", dataset)])
