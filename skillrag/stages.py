"""One function per pipeline stage and one per quality gate, each taking (params, paths).

The DVC commands (`skillrag <stage>`) and the Prefect flows call exactly these, so both paths
produce byte-identical outputs. Heavy libraries are imported inside each function: a stage
pays only for what it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import wraps
from pathlib import Path
from typing import Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.files import exclusive as hold_lock
from skillrag.paths import Paths

StageFn = Callable[[Params, Paths], Any]


def exclusive(stage: StageFn) -> StageFn:
    """Run `stage` holding its workspace lock (`.skillrag/locks/<stage>.lock`): a second run of the
    same stage on the same workspace stops at once, naming the process that holds it."""

    @wraps(stage)
    def locked(params: Params, paths: Paths) -> Any:
        with hold_lock(paths.locks / f"{stage.__name__}.lock", f"`skillrag {stage.__name__.replace('_', '-')}`"):
            return stage(params, paths)

    return locked


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


@exclusive
def extract(params: Params, paths: Paths) -> dict[str, Any]:
    """Answer the train+dev questions per strategy with state capture into data/states/."""
    from skillrag.data.prepare import load_split
    from skillrag.probe.extract import extract_states, resolve_layers

    questions = [q for split in ("train", "dev") for qs in load_split(paths.questions, split, params.prepare.max_question_chars).values() for q in qs]
    retriever = runtime.open_retriever(params, paths) if "single_step" in params.extract.strategies else None
    lm = runtime.open_lm(params)
    inputs: dict[str, Any] = {"model": _model_identity(params)}
    if retriever is not None:
        from skillrag.retrieval.manifest import index_digest

        inputs["retrieval"] = {**params.retrieval.model_dump(), "index": index_digest(paths.index)}
    return extract_states(
        lm,
        retriever,
        questions,
        paths.states,
        inputs=inputs,
        strategies=params.extract.strategies,
        layers=resolve_layers(params.lm.layers, lm.num_layers),
        k=params.retrieval.k,
        max_new_tokens=params.lm.max_new_tokens,
        batch_size=params.lm.batch_size,
        checkpoint_rows=params.extract.checkpoint_rows,
        checkpoint_seconds=params.extract.checkpoint_seconds,
    )


def gate_extract(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_states

    return gate_states(paths.states)


def train_probe(params: Params, paths: Paths) -> dict[str, Any]:
    """Per-layer probers, trained and evaluated on dev in memory, then the probe gate on that
    report (reports/probe_validation.json, written pass or fail), and only once it passes the
    prober (data/probe/), reports/probe_metrics.json and the reliability plot. The gate runs
    inside the stage so that a prober that fails it is never published; returns the dev report."""
    from skillrag.probe.fit import fit_probe
    from skillrag.quality.suites import gate_probe

    fitted = fit_probe(paths.states, params.probe)
    gate_probe(fitted.report, params.probe, paths.reports / "probe_validation.json")
    fitted.publish(paths.probe, paths.probe_metrics, paths.probe_detail, paths.figures / "probe_reliability.png")
    return fitted.report


def run_settings(
    params: Params,
    paths: Paths,
    method: str,
    question_files: Sequence[Path],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a method's traces depend on, recorded beside them (skillrag.eval.runner): the digests
    of the inputs and the values of the dotted params it `reads` (see `Method.reads`; not the
    device, threads or batch size, which change speed only), and apart from those, compared by
    nobody, the provenance of the run. `overrides`: dotted params the caller sets itself."""
    from skillrag.methods import METHODS

    reads = METHODS[method].reads
    flat = {
        f"{section}.{key}": value
        for section, values in params.model_dump(mode="json").items()
        if isinstance(values, dict)
        for key, value in values.items()
    }
    chosen = {key: flat[key] for key in reads if key in flat} | dict(overrides or {})
    if chosen.get("methods.router") != "learned":
        reads = tuple(key for key in reads if key != "router")
    sources = _input_digests(params, paths, question_files)
    return {
        "method": method,
        "params": chosen,
        "inputs": {name: sources[name]() for name in reads if name in sources},
        "provenance": provenance(),
    }


def _input_digests(params: Params, paths: Paths, question_files: Sequence[Path]) -> dict[str, Callable[[], Any]]:
    """How to identify each input a trace can depend on, computed only for the inputs a method reads."""
    from importlib import resources

    from skillrag.files import digest
    from skillrag.retrieval.manifest import index_digest

    def prompts() -> str:
        return digest(*sorted(p for p in resources.files("skillrag.prompts").iterdir() if p.name.endswith(".txt")))

    return {
        "questions": lambda: digest(*question_files),
        "model": lambda: _model_identity(params),
        "prompts": prompts,
        "index": lambda: index_digest(paths.index),
        "prober": lambda: digest(*sorted(paths.probe.glob("*.*"))),
        "router": lambda: digest(*sorted(paths.router.glob("*.*"))),
    }


def _model_identity(params: Params) -> dict[str, Any]:
    """The model's name, the dtype it runs in, and a digest of its files' names and sizes (a
    re-converted or re-downloaded model with other weights differs; hashing gigabytes does not pay)."""
    from skillrag.files import listing_digest
    from skillrag.lm.bundled import BUNDLED, bundled_dir
    from skillrag.lm.loading import resolve_device, resolve_dtype

    spec = params.lm.model
    if spec in BUNDLED:
        folder: Path | None = bundled_dir(spec)
    elif Path(spec).expanduser().is_dir():
        folder = Path(spec).expanduser()
    else:  # a hub id: its snapshot in the local cache, if any
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(spec, local_files_only=True))
        except Exception:  # noqa: BLE001 - not cached: the name and dtype are all we know
            folder = None
    dtype = resolve_dtype(params.lm.dtype, resolve_device(params.lm.device))
    return {
        "name": spec,
        "dtype": str(dtype).removeprefix("torch."),
        "files": listing_digest(folder) if folder is not None else None,
    }


def provenance() -> dict[str, Any]:
    """Which code made a run: the git commit (and whether the tree had uncommitted changes) and
    the versions of torch, transformers and skillrag. Recorded, never compared."""
    import subprocess
    from importlib.metadata import version

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "git_commit": commit,
        "git_dirty": bool(status) if status is not None else None,
        **{package: version(package) for package in ("torch", "transformers", "skillrag")},
    }


@exclusive
def train_router(params: Params, paths: Paths) -> dict[str, Any]:
    """The learned router, trained on gold labels: on the first `train_router.train_questions`
    train questions, skill exploration (skillrag.methods.exploration: from every wrong
    single-step answer, each query skill in turn; traces in data/router_traces/, resumable),
    then a logistic regression from the failure state (mean hidden state over the resolved
    `lm.layers`) to the first skill that answered right, else exit (data/router/). Needs no
    prober. Below `train_router.min_examples_per_skill` for any label it writes a note instead
    of weights. Examples per label and, when trained, the cross-validated accuracy against the
    majority label go to reports/router_metrics.json."""
    from skillrag.data.prepare import load_split
    from skillrag.eval.metrics import accuracy
    from skillrag.eval.runner import run_method
    from skillrag.files import write_json
    from skillrag.methods import Components
    from skillrag.methods.exploration import SkillExploration, build_router_dataset
    from skillrag.probe.extract import resolve_layers
    from skillrag.skills.learned_router import (
        cross_validate_router,
        fit_router,
        record_untrained,
        too_few_examples,
    )

    train = [q for qs in load_split(paths.questions, "train", params.prepare.max_question_chars).values() for q in qs]
    train = sorted(train, key=lambda q: q.id)[: params.train_router.train_questions]
    lm = runtime.open_lm(params)
    layers = resolve_layers(params.lm.layers, lm.num_layers)
    parts = Components.from_params(params, lm, runtime.open_retriever(params, paths), state_layers=layers)
    files = [paths.question_file("train", dataset) for dataset in sorted(load_split(paths.questions, "train"))]
    # Exploration's first round is single_step's; it adds the state layers.
    settings = run_settings(params, paths, "single_step", files, {"lm.layers": layers})
    settings["method"] = SkillExploration.name
    traces = run_method(SkillExploration(parts, accuracy), train, paths.router_traces, settings)
    x, labels = build_router_dataset(traces, accuracy)
    counts = {skill: labels.count(skill) for skill in sorted(set(labels))}
    report: dict[str, Any] = {"questions": len(traces), "examples": len(labels), "by_skill": counts}
    reason = too_few_examples(labels, params.train_router.min_examples_per_skill)
    if reason is not None:
        record_untrained(paths.router, f"{reason} ({len(traces)} questions run)")
        report.update(trained=False, reason=reason, cv_folds=0, cv_accuracy=None)
    else:
        fit_router(x, labels, layers, params.train_router.c).save(paths.router)
        report.update(trained=True, **cross_validate_router(x, labels, params.train_router.c))
    write_json(paths.router_metrics, report)
    return report


@exclusive
def evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    """Every method on every evaluation set: traces in data/runs/<method>/<dataset>.jsonl; per
    (method, dataset) the headline numbers in reports/metrics.json and the full summary
    (intervals, flexible scores, all costs, counts) in reports/metrics_detail.json, returned."""
    from skillrag.data.prepare import load_split
    from skillrag.eval.runner import run_method
    from skillrag.eval.summary import headline, summarize
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
            settings = run_settings(params, paths, name, [paths.question_file("eval", dataset)])
            traces = run_method(method, chosen, paths.run_file(name, dataset), settings)
            metrics.setdefault(name, {})[dataset] = summarize(traces, params.methods.abstain_answer)
    write_json(paths.metrics_detail, metrics)
    write_json(paths.metrics, {name: {d: headline(s) for d, s in by.items()} for name, by in metrics.items()})
    return metrics


def gate_evaluate(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_runs

    return gate_runs(
        paths, params.evaluate.methods, params.evaluate.datasets, params.evaluate.limit, params.evaluate.max_error_rate
    )
