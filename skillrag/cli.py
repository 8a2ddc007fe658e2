"""`skillrag` command line: each command wires library calls together and holds no logic.

Every command reads params.yaml (or --params), applies --profile and --set overrides, and
writes where dvc.yaml expects, so `dvc repro` and a hand-run command produce the same files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from skillrag.env import apply_offline_defaults

apply_offline_defaults()

from skillrag import runtime, stages  # noqa: E402
from skillrag.config import ConfigError, Params, load_params  # noqa: E402
from skillrag.files import DataError  # noqa: E402
from skillrag.paths import Paths  # noqa: E402

app = typer.Typer(
    help="Skill-RAG: hidden-state probing + skill routing for retrieval-augmented QA.\n\n"
    "Stages (in `dvc repro` order): prepare -> index -> extract -> train-probe -> train-router -> evaluate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


class _State:
    params_file: Path = Path("params.yaml")
    profile: str | None = None
    overrides: list[str] = []

    def params(self) -> Params:
        return load_params(self.params_file, self.profile, self.overrides)

    def paths(self) -> Paths:
        return Paths(self.params_file.resolve().parent)


state = _State()


@app.callback()
def main(
    params: Annotated[Path, typer.Option("--params", help="Parameters file (DVC reads the same one).")] = Path("params.yaml"),
    profile: Annotated[str | None, typer.Option(help="Profile from params.yaml: default, tiny, paper, ...")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a parameter, e.g. --set lm.max_new_tokens=32 (repeatable).")
    ] = None,
) -> None:
    state.params_file, state.profile, state.overrides = params, profile, list(set_ or [])


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code=1)


@app.command()
def prepare() -> None:
    """Sample the train/dev prober pools and the per-dataset evaluation sets into data/questions/."""
    params, paths = state.params(), state.paths()
    counts = stages.prepare(params, paths)
    for split, by_dataset in counts.items():
        console.print(f"{split:>5}: " + ", ".join(f"{d} {n}" for d, n in by_dataset.items()))
    stages.gate_prepare(params, paths)
    console.print(f"[green]questions written to {paths.questions} and passed the gate[/]")


@app.command()
def index() -> None:
    """Write the corpus as a pyserini JsonCollection (data/corpus/) and build the Lucene and bm25s
    BM25 indexes (data/index/), then run the index quality gate."""
    params, paths = state.params(), state.paths()
    result = stages.index(params, paths)
    console.print(
        f"indexed {result.passages} passages in {result.seconds:.1f} s "
        f"(Lucene {result.lucene_seconds:.1f} s, bm25s {result.bm25s_seconds:.1f} s)"
    )
    stages.gate_index(params, paths)
    console.print(f"[green]index written to {paths.index} and passed the gate[/]")


@app.command()
def extract() -> None:
    """Answer the train/dev questions closed-book and with BM25 top-k, capturing the prober's
    hidden states in the same generation (data/states/). Resumes an interrupted run."""
    params, paths = state.params(), state.paths()
    summary = stages.extract(params, paths)
    console.print(f"{summary['rows']} rows in {summary['shards']} shards")
    for key, n in summary["by_split_strategy_label"].items():
        console.print(f"  {key}: {n}")
    stages.gate_extract(params, paths)
    console.print(f"[green]states written to {paths.states} and passed the gate[/]")


@app.command("train-probe")
def train_probe() -> None:
    """Train one prober per layer on the train states; report dev AUROC/accuracy/ECE per layer,
    for the ensemble and for the entropy baseline (reports/probe_metrics.json)."""
    params, paths = state.params(), state.paths()
    report = stages.train_probe(params, paths)
    best = max((m["auroc"] or 0.0, layer) for layer, m in report["per_layer"].items())
    console.print(
        f"dev AUROC: ensemble {report['ensemble']['auroc']}, best layer {best[1]} ({best[0]:.3f}), "
        f"entropy baseline {report['entropy_baseline']['auroc']}"
    )
    stages.gate_train_probe(params, paths)
    console.print(f"[green]prober written to {paths.probe}; metrics in {paths.probe_metrics}[/]")


@app.command("train-router")
def train_router() -> None:
    """Train the learned skill router (methods.router: learned) from failure states of skill_rag
    runs on train questions, where every query skill gets explored (data/router/); its
    cross-validated accuracy goes to reports/router_metrics.json."""
    params, paths = state.params(), state.paths()
    summary = stages.train_router(params, paths)
    console.print(
        f"{summary['examples']} training examples from {summary['questions']} questions: {summary['by_skill']}"
    )
    if summary["cv_accuracy"] is not None:
        console.print(
            f"{summary['cv_folds']}-fold accuracy {summary['cv_accuracy']:.3f} "
            f"(always the most frequent skill: {summary['majority_accuracy']:.3f})"
        )
    console.print(f"[green]learned router written to {paths.router}[/]")


@app.command()
def evaluate() -> None:
    """Run every method (evaluate.methods) on every evaluation set: one trace per question in
    data/runs/<method>/<dataset>.jsonl (resumable), metrics and costs in reports/metrics.json."""
    params, paths = state.params(), state.paths()
    metrics = stages.evaluate(params, paths)
    from rich.table import Table

    table = Table("method", "dataset", "n", "EM", "ACC", "LLM calls", "retrievals", "latency s")
    for method, by_dataset in metrics.items():
        for dataset, m in by_dataset.items():
            table.add_row(
                method, dataset, str(m["n"]), f"{m['em']:.3f}", f"{m['acc']:.3f}",
                f"{m['llm_calls']:.2f}", f"{m['retrievals']:.2f}", f"{m['latency_s']:.1f}",
            )
    Console().print(table)
    stages.gate_evaluate(params, paths)
    console.print(f"[green]traces in {paths.runs}, metrics in {paths.metrics}[/]")


def _show_round(round_: Any) -> None:
    score = "" if round_.score is None else f" score={round_.score:.3f} ({'accept' if round_.accepted else 'reject'})"
    console.print(f"[bold]round {round_.index}[/] [cyan]{round_.stage}[/]{score}", highlight=False)
    if round_.router_scores:
        console.print("  router: " + ", ".join(f"{k}={v:.2f}" if v is not None else f"{k}=n/a" for k, v in round_.router_scores.items()), highlight=False)
    for query in round_.queries:
        console.print(f"  query: {query}", highlight=False)
    if round_.passage_titles:
        console.print("  passages: " + "; ".join(round_.passage_titles), highlight=False)
    for note in round_.fallbacks:
        console.print(f"  [yellow]fallback:[/] {note}", highlight=False)
    if round_.answer:
        console.print(f"  answer: {round_.answer}", highlight=False)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    method: Annotated[str, typer.Option(help="no_retrieval, single_step, probing_rag or skill_rag.")] = "skill_rag",
    json_output: Annotated[bool, typer.Option("--json", help="Print the full trace as JSON (no live rounds).")] = False,
) -> None:
    """Answer one question, showing each round (retrieval, prober score, skill) as it happens."""
    import json

    from skillrag.data.schema import Question
    from skillrag.methods import METHODS, build_method

    params, paths = state.params(), state.paths()
    if method not in METHODS:
        _fail(f"unknown method {method!r} (choose from {', '.join(METHODS)})")
    text = " ".join(question.split())
    if not text:
        _fail("the question is empty")
    limit = params.methods.max_question_chars
    if len(text) > limit:
        console.print(f"[yellow]warning:[/] question truncated from {len(text):,} to {limit:,} characters (methods.max_question_chars)")
        text = text[:limit]
    with console.status("loading model, index and prober ..."):
        parts = runtime.open_components(params, paths, METHODS[method].needs_prober)
    trace = build_method(method, parts).answer(
        Question(id="ask", dataset="ask", question=text, answers=[]), on_round=None if json_output else _show_round
    )
    if json_output:
        print(json.dumps(trace.to_dict(), indent=2, ensure_ascii=False))
        return
    if trace.error:
        console.print(f"[red]error:[/] {trace.error}")
    console.print(
        f"[bold green]answer:[/] {trace.answer or '(none)'}  [dim]({trace.termination}; "
        f"{trace.totals.llm_calls} LLM calls, {trace.totals.retrievals} retrievals, {trace.totals.latency_s:.1f} s)[/]",
        highlight=False,
    )


@app.command("lm-cache")
def lm_cache(
    name: Annotated[str | None, typer.Argument(help="Bundled model name (default: lm.model).")] = None,
) -> None:
    """Convert a bundled GGUF model once into the float32 safetensors cache (later loads take seconds)."""
    from skillrag.lm.bundled import BUNDLED, bundled_dir

    name = name or state.params().lm.model
    if name not in BUNDLED:
        _fail(f"{name!r} is not a bundled model (bundled: {', '.join(BUNDLED)}); hub ids and directories need no cache")
    console.print(f"{name}: {bundled_dir(name)}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Free-text query.")],
    k: Annotated[int, typer.Option("-k", help="How many passages to show.")] = 5,
    backend: Annotated[str | None, typer.Option(help="lucene or bm25s (default: retrieval.backend).")] = None,
) -> None:
    """Search the BM25 index and print ranked passages with title, id and score."""
    params, paths = state.params(), state.paths()
    from rich.table import Table

    from skillrag.retrieval import open_retriever

    retriever = open_retriever(backend or params.retrieval.backend, paths.index, params.retrieval.k1, params.retrieval.b)
    table = Table("rank", "score", "id", "title", "text", show_lines=True)
    for rank, hit in enumerate(retriever.search(query, k), start=1):
        text = hit.passage.text if len(hit.passage.text) <= 200 else hit.passage.text[:200] + " ..."
        table.add_row(str(rank), f"{hit.score:.2f}", hit.passage.id, hit.passage.title, text)
    Console().print(table)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "fix your input or build a missing artifact": shown as one line."""
    from skillrag.lm.bundled import BundledModelMissing
    from skillrag.lm.loading import ModelLoadError
    from skillrag.quality.gate import GateFailed

    return (ConfigError, DataError, GateFailed, FileNotFoundError, ValueError, BundledModelMissing, ModelLoadError)


def run() -> None:
    """Entry point with readable errors for the failures a user can fix, and a clean Ctrl-C."""
    try:
        app()  # click turns Ctrl-C into a quiet exit with status 130
    except Exception as err:
        if not isinstance(err, _user_errors()):
            raise
        console.print(f"[bold red]error:[/] {err}", highlight=False)
        raise SystemExit(1) from None
