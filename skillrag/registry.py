"""Where a method and a pipeline stage are declared, once; everything else looks them up.

A method's entry says what its class is (imported only when asked for: skillrag.methods.factory),
what its traces depend on (`reads`: the run settings record exactly these), whether it is meant to
retrieve and what decides when (the runs gate reads both from each run's settings), which stored
generations it starts from and whether its rounds keep their hidden state. A stage's entry says
what DVC needs to know: its command, the module it runs, its data, params and outputs.
`skillrag dvc-yaml` writes dvc.yaml from both (skillrag.pipeline.dvc_yaml), so the two cannot drift.

It imports no other skillrag module but the errors and the paths (every file it names is a
`skillrag.paths.Paths` property, written relative to the project root): config, the stages, the
runs gate and the report read it without importing any method's code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillrag.errors import ConfigError
from skillrag.paths import Paths

AT = Paths()  # the default workspace, the project root: every path below is derived from skillrag.paths


def _at(path: Path) -> str:
    """A project-relative path as dvc.yaml writes it."""
    return path.as_posix()

# What every answer depends on: the questions, the model, the prompt templates, how much it writes.
ANSWERS = ("questions", "model", "prompts", "lm.max_new_tokens", "lm.prompt_format")
# What a retrieving method adds: the index and every retrieval knob (the run settings keep only
# those the chosen backend reads: RetrievalParams.recorded).
RETRIEVAL = (
    "index", "retrieval.backend", "retrieval.k", "retrieval.k1", "retrieval.b", "retrieval.passage_words",
    "retrieval.fusion_k", "retrieval.fusion_depth",
)
# The prober-gated loop (skillrag.methods.checked).
CHECKED = (*ANSWERS, *RETRIEVAL, "prober", "probe.threshold", "methods.max_rounds", "methods.max_passages")
TUNED = "auto: data/thresholds/thresholds.json"  # what an `auto` trigger threshold resolves to
ADAPTIVE_REBUILD = "`skillrag train-adaptive` (or `dvc repro train_adaptive`)"


@dataclass(frozen=True)
class MethodEntry:
    """One QA method. `reads`: the inputs (questions, model, prompts, index, prober, router,
    thresholds, adaptive) and dotted params its traces depend on. `trigger`: what to check when a
    retrieving method never retrieved. `starts_from`: the methods whose stored generations it is
    seeded with. `keeps_states`: its rounds keep their answer's hidden vector (stage analyze).
    `studied`: the method the report's case studies and the failure-space analysis read."""

    name: str
    module: str  # under skillrag.methods
    cls: str
    reads: tuple[str, ...]
    retrieves: bool = True
    trigger: str = "nothing (it always retrieves): check the index and the retriever"
    starts_from: tuple[str, ...] = ()
    keeps_states: bool = False
    studied: bool = False


def _union(*reads: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(key for group in reads for key in group))


STORED = ("no_retrieval", "single_step")  # closed-book, then over the question's passages
_SINGLE_STEP = (*ANSWERS, *RETRIEVAL)
_IRCOT = (*ANSWERS, *RETRIEVAL, "methods.ircot")

# In the order runs, stages and reports list them.
METHODS: dict[str, MethodEntry] = {
    entry.name: entry
    for entry in (
        MethodEntry("no_retrieval", "simple", "NoRetrieval", ANSWERS, retrieves=False),
        MethodEntry("single_step", "simple", "SingleStep", _SINGLE_STEP),
        MethodEntry(
            "probing_rag", "probing_rag", "ProbingRAG", CHECKED, starts_from=STORED,
            trigger="probe.threshold (the prober accepted every closed-book answer)",
        ),
        MethodEntry(
            "skill_rag", "skill_rag", "SkillRAG",
            (*CHECKED, "router", "methods.router", "methods.exit_mode", "methods.abstain_answer"), starts_from=STORED,
            trigger="probe.threshold (the prober accepted every closed-book answer)", keeps_states=True, studied=True,
        ),
        MethodEntry("ircot", "ircot", "IRCoT", _IRCOT, starts_from=("single_step",)),  # its first step is single_step's call
        MethodEntry(
            "adaptive_rag", "adaptive_rag", "AdaptiveRAG", _union(ANSWERS, _SINGLE_STEP, _IRCOT, ("adaptive",)),
            starts_from=STORED,
            trigger=f"the query-complexity classifier (data/adaptive/, {ADAPTIVE_REBUILD}), which chose no_retrieval for every question",
        ),
        MethodEntry(
            "flare", "flare", "Flare", (*ANSWERS, *RETRIEVAL, "thresholds", "methods.flare"),
            trigger=f"methods.flare.theta ({TUNED}; no look-ahead token was below theta)",
        ),
        MethodEntry(
            "dragin", "dragin", "Dragin", (*ANSWERS, *RETRIEVAL, "thresholds", "methods.dragin"),
            trigger=f"methods.dragin.threshold ({TUNED}; no token's RIND exceeded it)",
        ),
        MethodEntry(
            "entropy_rag", "entropy_rag", "EntropyRAG",
            (*ANSWERS, *RETRIEVAL, "thresholds", "methods.entropy_rag", "methods.max_rounds", "methods.max_passages"), starts_from=STORED,
            trigger=f"methods.entropy_rag.cut ({TUNED}; every closed-book answer was at most the cut)",
        ),
    )
}
METHOD_NAMES = tuple(METHODS)


def check_methods(names: Iterable[str]) -> None:
    """Refuse a method name the registry does not know (a configuration error), naming the known ones."""
    unknown = [name for name in names if name not in METHODS]
    if unknown:
        raise ConfigError(f"unknown method {', '.join(map(repr, unknown))} (choose from {', '.join(METHODS)})")


def stores(method: str) -> bool:
    """Whether `method`'s stage stores every generation it makes (with all of `lm.layers`
    captured) for the methods that start from it."""
    return any(method in entry.starts_from for entry in METHODS.values())


def studied_method() -> str:
    """The method whose traces the case studies and the failure-space analysis read."""
    return next(name for name, entry in METHODS.items() if entry.studied)


@dataclass(frozen=True)
class Out:
    """A DVC output. `cache=False`: tracked in git (small, carries computed work); else in the
    DVC cache only, rebuilt on a new machine. `persist`: kept between runs (a resumable stage)."""

    path: str
    cache: bool = False
    persist: bool = False
    note: str = ""


@dataclass(frozen=True)
class StageEntry:
    """One DVC stage. `inputs`: the data it depends on (DVC deps). `needs`: cache-only paths it
    reads at run time but does not depend on (it depends on their fingerprint instead); the
    runner `skillrag repro` rebuilds a missing one by its producer. `methods`: the methods it
    builds by name, whose modules the import graph cannot see (skillrag.methods.factory)."""

    name: str
    command: str
    module: str
    inputs: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    outs: tuple[Out, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    note: str = ""

    @property
    def timing(self) -> str:
        """Its wall time (skillrag.pipeline.timing), tracked in git."""
        return _at(AT.timing(self.name))


def validation(gate: str) -> Out:
    """A Great Expectations result, stripped of run-time markers (skillrag.quality.gate)."""
    return Out(_at(AT.validation(gate)))


INDEX_FINGERPRINT = _at(AT.index_fingerprint)  # what consumers of the index depend on, not its bytes
INDEX = _at(AT.index)
ROWS, VECTORS = _at(AT.states_rows), _at(AT.states_vectors)
QUESTIONS, PROBE, ROUTER, ADAPTIVE = _at(AT.questions), _at(AT.probe), _at(AT.router), _at(AT.adaptive)
# The model and how it answers: every stage that generates reads these.
LM = ("lm.model", "lm.device", "lm.dtype", "lm.prompt_format", "lm.max_new_tokens")
# The data a method's `reads` names -> the stage output holding it.
METHOD_INPUTS = {
    "questions": QUESTIONS, "index": INDEX_FINGERPRINT, "prober": PROBE, "router": ROUTER,
    "thresholds": _at(AT.thresholds.parent), "adaptive": ADAPTIVE,
}
# Params every evaluate stage reads beyond its method's: the model, which questions, how answers are scored.
EVALUATE_PARAMS = (*LM, "prepare.max_question_chars", "evaluate.datasets", "evaluate.limit", "methods.abstain_answer")


def evaluate_stage(method: str) -> StageEntry:
    """`evaluate-<method>`: one method on every evaluation set, its traces resumable in git."""
    entry = METHODS[method]
    reads = [r for r in entry.reads if "." in r]
    inputs = [QUESTIONS, INDEX_FINGERPRINT]  # every method opens the index
    inputs += [METHOD_INPUTS[r] for r in entry.reads if r in METHOD_INPUTS and METHOD_INPUTS[r] not in inputs]
    inputs += [_at(AT.method_runs(source)) for source in entry.starts_from]
    if stores(method) and PROBE not in inputs:  # its stored generations keep only the prober's layers
        inputs.append(PROBE)
    return StageEntry(
        f"evaluate-{method}", f"evaluate --method {method}", "skillrag.pipeline.stages.evaluate",
        inputs=tuple(inputs), needs=(INDEX,),
        params=(*EVALUATE_PARAMS, *(["lm.layers"] if stores(method) else []), *(r for r in reads if r not in EVALUATE_PARAMS)),
        outs=(Out(_at(AT.method_runs(method)), persist=True, note="traces, settings and stored generations: resumable"),),
        methods=(method,),
    )


GATES = ("questions", "index", "states", "probe", "runs")


def before_first_reader(evaluations: Sequence[StageEntry], trainers: Sequence[StageEntry]) -> list[StageEntry]:
    """The evaluate stages in method order, each trainer placed just before the first of them
    that reads one of its outputs: `skillrag repro` runs dvc.yaml's order where the graph allows,
    so the first methods' results (the primary comparisons) never wait for a trainer that only
    later methods read."""
    placed, left = [], list(trainers)
    for stage in evaluations:
        ready = [t for t in left if any(out.path in stage.inputs for out in t.outs)]
        placed += [*ready, stage]
        left = [t for t in left if t not in ready]
    return placed + left


# In `dvc repro` order (train_router before train_probe: its retry rates set the after-evidence cuts;
# train_adaptive and tune_thresholds just before the first method that reads them).
STAGES: dict[str, StageEntry] = {
    stage.name: stage
    for stage in (
        StageEntry(
            "prepare", "prepare", "skillrag.pipeline.stages.prepare", inputs=("${prepare.local_dir}",), params=("prepare",),
            outs=(Out(QUESTIONS), validation("questions")),
        ),
        StageEntry(
            "index", "index", "skillrag.pipeline.stages.index", inputs=("${index.corpus_file}", QUESTIONS),
            params=("index.corpus_file", "index.max_passages", "index.question_evidence", "index.smoke_queries",
                    "retrieval.k1", "retrieval.b"),
            outs=(
                Out(_at(AT.corpus), cache=True), Out(INDEX, cache=True, note="lucene/, bm25s/ and their manifest"),
                Out(INDEX_FINGERPRINT, note="corpus digest, BM25 settings, versions, smoke queries' top-k"),
                validation("index"),
            ),
        ),
        StageEntry(
            "train_router", "train-router", "skillrag.pipeline.stages.train_router", inputs=(QUESTIONS, INDEX_FINGERPRINT),
            needs=(INDEX,),
            params=(*LM, "lm.layers", "retrieval", "train_router", "methods.router", "methods.exit_mode",
                    "methods.max_passages", "methods.abstain_answer", "prepare.max_question_chars"),
            outs=(Out(_at(AT.router_traces_dir), persist=True,
                      note="resumable traces; retries.json: what each gated method's own retry does to right and wrong answers"),
                  Out(ROUTER)),
            metrics=(_at(AT.router_metrics),), methods=("single_step", "probing_rag", "skill_rag"),
            note="explores every skill from failure states; the gated methods' own retries set the after-evidence cuts",
        ),
        StageEntry(
            "extract", "extract", "skillrag.pipeline.stages.extract", inputs=(QUESTIONS, INDEX_FINGERPRINT), needs=(INDEX,),
            params=(*LM, "lm.layers", "extract.strategies", "retrieval", "prepare.max_question_chars"),
            outs=(
                Out(ROWS, note="answers, labels, token log-probs and entropies"),
                Out(VECTORS, cache=True, note="hidden states: only train_probe reads them"),
                validation("states"),
            ),
        ),
        StageEntry(
            "train_probe", "train-probe", "skillrag.pipeline.stages.train_probe", inputs=(ROWS, VECTORS, _at(AT.router_traces_dir)),
            params=tuple(
                f"probe.{key}" for key in (
                    "recipe", "pooling", "cv_folds", "cv_c", "cv_hidden", "call_cost", "hidden", "lr", "epochs", "max_epochs",
                    "patience", "holdout_fraction", "batch_size", "weight_decay", "min_dev_auroc", "allow_below_entropy", "seed",
                )
            ),
            outs=(Out(PROBE), Out(_at(AT.probe_detail)), validation("probe")),
            metrics=(_at(AT.probe_metrics),),
            plots=(_at(AT.probe_reliability_figure), _at(AT.probe_learning_curve_figure)),
            note="every probe key but threshold, which only the stages that load the prober read",
        ),
        *before_first_reader(
            [evaluate_stage(method) for method in METHODS],
            [
                StageEntry(
                    "train_adaptive", "train-adaptive", "skillrag.pipeline.stages.train_adaptive", inputs=(QUESTIONS, ROWS, INDEX_FINGERPRINT),
                    needs=(INDEX,),
                    params=(*LM, "lm.layers", "retrieval", "methods.ircot", "methods.abstain_answer", "train_adaptive",
                            "prepare.max_question_chars"),
                    outs=(Out(_at(AT.adaptive_traces_dir), persist=True, note="resumable traces"), Out(ADAPTIVE)), metrics=(_at(AT.adaptive_metrics),),
                    methods=("ircot",), note="Adaptive-RAG's query-complexity classifier on silver labels",
                ),
                StageEntry(
                    "tune_thresholds", "tune-thresholds", "skillrag.pipeline.stages.tune_thresholds", inputs=(QUESTIONS, ROWS, PROBE),
                    params=(*LM, "probe.threshold", "methods.flare.max_iterations", "tune_thresholds", "prepare.max_question_chars"),
                    outs=(Out(_at(AT.thresholds.parent)),), metrics=(_at(AT.thresholds_report),),
                    note="the trigger thresholds of flare / dragin / entropy_rag, chosen on dev only",
                ),
            ],
        ),
        StageEntry(
            "summarize", "summarize", "skillrag.pipeline.stages.summarize",
            inputs=(QUESTIONS, *(_at(AT.method_runs(method)) for method in METHODS)),
            params=("evaluate", "methods.abstain_answer", "prepare.max_question_chars"),
            outs=(validation("runs"), Out(_at(AT.metrics_detail)),
                  Out(_at(AT.outcomes), note="one row per method x dataset x question")),
            metrics=(_at(AT.metrics),), note="every method's runs gated, then merged into the metrics",
        ),
        StageEntry(
            "analyze", "analyze", "skillrag.pipeline.stages.analyze",
            inputs=(_at(AT.method_runs(studied_method())), _at(AT.validation("runs"))), params=("analyze", "evaluate.datasets"),
            metrics=(_at(AT.analysis),),
            plots=(_at(AT.failure_space_figure), _at(AT.failure_separability_figure)),
            note="the failure space of the studied method's traces (paper 4.3, Fig. 2), once the runs gate passed",
        ),
    )
}
# The report reads every stage's timing and every gate's result, the summaries, traces and settings,
# and the side experiments it lists (skillrag.report.experiments).
STAGES["report"] = StageEntry(
    "report", "report", "skillrag.pipeline.stages.report",
    inputs=(
        *(stage.timing for stage in STAGES.values()), *(_at(AT.validation(gate)) for gate in GATES),
        PROBE, *map(_at, (AT.runs, AT.metrics, AT.metrics_detail, AT.probe_detail, AT.probe_metrics, AT.router_metrics,
                          AT.analysis, AT.thresholds_report, AT.adaptive_metrics, AT.experiments, AT.custom_data,
                          AT.custom_results)),
    ),
    params=("prepare.train_datasets", "report"),
    outs=(Out(_at(AT.data_docs), cache=True), Out(_at(AT.report))),
    plots=(_at(AT.accuracy_cost_figure), _at(AT.accuracy_overall_figure), _at(AT.eval_reliability_figure)),
    note="reports/report.md and its figures (in git) and the gates' Data Docs (cache only)",
)
