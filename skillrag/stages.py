"""One function per pipeline stage and one per quality gate, each taking (params, paths).

The DVC commands (`skillrag <stage>`) and the Prefect flows call exactly these, so both paths
produce byte-identical outputs. Heavy libraries are imported inside each function: a stage
pays only for what it uses.
"""

from __future__ import annotations

from typing import Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.paths import Paths


def prepare(params: Params, paths: Paths) -> dict[str, dict[str, int]]:
    """Sample the question splits into data/questions/<split>/<dataset>.jsonl; returns counts."""
    from skillrag.data.prepare import prepare_questions

    return prepare_questions(params.prepare, paths.questions)


def gate_prepare(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_questions

    return gate_questions(paths.questions, params.prepare)


def index(params: Params, paths: Paths) -> Any:
    """Corpus -> data/corpus (JsonCollection) + data/index/{lucene,bm25s}; returns IndexStats."""
    from skillrag.data.corpus import read_corpus
    from skillrag.retrieval import build_indexes

    passages = read_corpus(params.index.corpus_file, params.index.max_passages)
    return build_indexes(
        passages, paths.corpus, paths.index, params.index.threads, params.retrieval.k1, params.retrieval.b
    )


def gate_index(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_index as run

    return run(paths.corpus, paths.index, params.index, params.retrieval.k1, params.retrieval.b)


def extract(params: Params, paths: Paths) -> dict[str, Any]:
    """Answer the train+dev questions per strategy with state capture into data/states/."""
    from skillrag.data.prepare import load_split
    from skillrag.probe.extract import extract_states, resolve_layers

    questions = [q for split in ("train", "dev") for qs in load_split(paths.questions, split, params.prepare.max_question_chars).values() for q in qs]
    retriever = runtime.open_retriever(params, paths) if "single_step" in params.extract.strategies else None
    lm = runtime.open_lm(params)
    return extract_states(
        lm,
        retriever,
        questions,
        paths.states,
        strategies=params.extract.strategies,
        layers=resolve_layers(params.lm.layers, lm.num_layers),
        k=params.retrieval.k,
        max_new_tokens=params.lm.max_new_tokens,
        batch_size=params.lm.batch_size,
        shard_size=params.extract.shard_size,
    )


def gate_extract(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_states

    return gate_states(paths.states)


def train_probe(params: Params, paths: Paths) -> dict[str, Any]:
    """Per-layer probers -> data/probe/, dev metrics -> reports/probe_metrics.json + plot."""
    from skillrag.probe.fit import fit_probe

    return fit_probe(paths.states, paths.probe, paths.probe_metrics, paths.figures / "probe_reliability.png", params.probe)


def gate_train_probe(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_probe

    return gate_probe(paths.probe_metrics, params.probe.min_dev_auroc)


def run_settings(params: Params, paths: Paths, method: str) -> dict[str, Any]:
    """Everything that shapes a method's traces, recorded beside them (skillrag.eval.runner):
    not the device, threads or batch size, which change speed only."""
    from importlib import resources

    from skillrag.files import digest
    from skillrag.methods import METHODS

    prompts = sorted(p for p in resources.files("skillrag.prompts").iterdir() if p.name.endswith(".txt"))
    settings: dict[str, Any] = {
        "method": method,
        "lm": params.lm.model_dump(include={"model", "dtype", "max_new_tokens", "layers"}),
        "retrieval": params.retrieval.model_dump(),
        "methods": params.methods.model_dump(),
        "prompts": digest(*prompts),
    }
    if METHODS[method].needs_prober:
        settings["probe"] = digest(*sorted(paths.probe.glob("*.*")))
        settings["probe_threshold"] = params.probe.threshold  # read at load time, not trained in
        if params.methods.router == "learned":
            settings["router"] = digest(*sorted(paths.router.glob("*.*")))
    return settings


def train_router(params: Params, paths: Paths) -> dict[str, Any]:
    """The learned router: skill_rag with the exploration router (every query skill gets tried)
    on the first `train_router.train_questions` train questions, recording failure states
    (traces in data/router_traces/, resumable), then a logistic regression from failure
    state to the skill that worked (data/router/). Its cross-validated accuracy against the
    majority skill goes to reports/router_metrics.json."""
    from skillrag.data.prepare import load_split
    from skillrag.eval.runner import run_method
    from skillrag.files import write_json
    from skillrag.methods import Components, build_method
    from skillrag.skills import ExplorationRouter, build_router_dataset
    from skillrag.skills.learned_router import cross_validate_router, fit_router, record_untrained

    train = [q for qs in load_split(paths.questions, "train", params.prepare.max_question_chars).values() for q in qs]
    train = sorted(train, key=lambda q: q.id)[: params.train_router.train_questions]
    lm = runtime.open_lm(params)
    prober = runtime.open_prober(params, paths, lm)
    parts = Components.from_params(
        params, lm, runtime.open_retriever(params, paths), prober, router=ExplorationRouter(), record_states=True
    )
    settings = {**run_settings(params, paths, "skill_rag"), "router": "exploration", "record_states": True}
    traces = run_method(build_method("skill_rag", parts), train, paths.router_traces, settings)
    try:
        x, labels = build_router_dataset(traces)
    except ValueError as err:
        record_untrained(paths.router, f"{err} ({len(traces)} questions run)")
        report = {"questions": len(traces), "examples": 0, "by_skill": {}, "cv_folds": 0, "cv_accuracy": None}
    else:
        fit_router(x, labels, prober.layers, params.train_router.c).save(paths.router)
        report = {"questions": len(traces), **cross_validate_router(x, labels, params.train_router.c)}
    write_json(paths.router_metrics, report)
    return report


def evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    """Every method on every evaluation set: traces in data/runs/<method>/<dataset>.jsonl and
    per (method, dataset) metrics and costs in reports/metrics.json."""
    from skillrag.data.prepare import load_split
    from skillrag.eval.runner import run_method
    from skillrag.eval.summary import summarize
    from skillrag.files import write_json
    from skillrag.methods import METHODS, build_method

    questions = load_split(paths.questions, "eval", params.prepare.max_question_chars)
    needs_prober = any(METHODS[name].needs_prober for name in params.evaluate.methods)
    parts = runtime.open_components(params, paths, needs_prober)
    metrics: dict[str, dict[str, Any]] = {}
    for name in params.evaluate.methods:
        method = build_method(name, parts)
        for dataset in params.evaluate.datasets:
            chosen = questions[dataset][: params.evaluate.limit]
            traces = run_method(method, chosen, paths.run_file(name, dataset), run_settings(params, paths, name))
            metrics.setdefault(name, {})[dataset] = summarize(traces)
    write_json(paths.metrics, metrics)
    return metrics


def gate_evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_runs

    return gate_runs(paths, params.evaluate.methods, params.evaluate.datasets, params.evaluate.limit)
