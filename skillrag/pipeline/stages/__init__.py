"""The pipeline's stages, one module each, every one a function of (params, paths).

The DVC commands (`skillrag <stage>`) and the Prefect flows call exactly these, so both paths
produce byte-identical outputs, and each ends with the same one-line summary. One module per
stage lets each DVC stage depend on exactly the code it runs. Heavy libraries are imported inside
each function: a stage pays only for what it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from skillrag.config import Params
from skillrag.files import exclusive as hold_lock
from skillrag.paths import Paths
from skillrag.pipeline.stages import (
    analyze,
    evaluate,
    extract,
    index,
    prepare,
    report,
    summarize,
    train_adaptive,
    train_probe,
    train_router,
    tune_thresholds,
)
from skillrag.pipeline.stages.common import StageFn, exclusive
from skillrag.pipeline.timing import Leg, timed


@dataclass(frozen=True)
class Stage:
    """A stage as users run it (CLI command, Prefect flow): its name (the DVC stage's; `evaluate`
    runs every `evaluate-<method>` stage), the help the CLI shows, its function, the gate that
    checks its output afterwards (None: it gates itself before publishing), its closing line and
    the lines the CLI prints before it.

    `run` holds the stage's workspace lock (`.skillrag/locks/<command>.lock`), taken here for every
    stage, so two runs of one stage on one workspace never write the same outputs at once: the
    second stops at once, naming the first, before anything is timed. A `timed` stage's wall time
    (gate included) goes to reports/timings/<name>.json (skillrag.pipeline.timing), unless its
    result says it was a `rebuild` of the recorded outputs (the index stage's `IndexStats.rebuild`)."""

    name: str
    help: str
    run: StageFn
    gate: StageFn | None
    summary: Callable[[Any, Paths], str]
    details: Callable[[Any], list[str]] = lambda result: []
    timed: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "run", exclusive(self.run, self.command))

    @property
    def command(self) -> str:
        """Its CLI command and Prefect flow name: the stage name with dashes (`train-probe`)."""
        return self.name.replace("_", "-")

    def __call__(self, params: Params, paths: Paths) -> Any:
        with (
            hold_lock(paths.locks / f"{self.command}.lock", f"`skillrag {self.command}`"),
            timed(paths, self.name) if self.timed else nullcontext(Leg()) as leg,
        ):
            result = self.run.__wrapped__(params, paths)  # the lock is held already
            if self.gate is not None:
                self.gate(params, paths)
            leg.rebuild = bool(getattr(result, "rebuild", False))
        return result


def _prepare_summary(counts: dict[str, dict[str, int]], paths: Paths) -> str:
    sizes = ", ".join(f"{sum(by.values())} {split}" for split, by in counts.items())
    return f"prepare: {sizes} questions in {paths.questions}; gate passed"


def _index_summary(stats: Any, paths: Paths) -> str:
    return f"index: {stats.passages} passages in {stats.seconds:.1f} s, Lucene and bm25s in {paths.index}; gate passed"


def _extract_summary(summary: dict[str, Any], paths: Paths) -> str:
    correct = sum(n for key, n in summary["by_split_strategy_label"].items() if key.endswith("acc=1"))
    return f"extract: {summary['rows']} answers ({correct} correct) with hidden states in {paths.states}; gate passed"


def _probe_summary(report: dict[str, Any], paths: Paths) -> str:
    auroc, ci = report["ensemble"]["auroc"], report["ensemble"]["auroc_ci"]
    shown = "undefined" if auroc is None or ci is None else f"{auroc:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    before = report["cuts"]["before_retrieval"]
    after = ", ".join(f"{m} {c['reject_rate']:.0%}" for m, c in sorted(report["cuts"]["after_evidence"].items()))
    return (
        f"train-probe: dev AUROC {shown} ({report['vs_entropy']['verdict']} vs entropy); the before-retrieval cut "
        f"{before['cut']:.3f} retrieves for {before['reject_rate']:.0%} of dev questions; after evidence the cuts retry "
        f"{after or 'nothing'}; prober in {paths.probe}; gate passed"
    )


def _router_summary(report: dict[str, Any], paths: Paths) -> str:
    if not report["trained"]:
        return f"train-router: no router trained ({report['reason']}); a note in {paths.router}"
    return f"train-router: {report['examples']} examples, router in {paths.router}"


def _evaluate_summary(results: dict[str, dict[str, Any]], paths: Paths) -> str:
    answered = sum(run["answered"] for by in results.values() for run in by.values())
    reuse = [run["reuse"] for by in results.values() for run in by.values()]
    hits, lookups = sum(r["hits"] for r in reuse), sum(r["lookups"] for r in reuse)
    return (
        f"evaluate: {', '.join(results)}: {answered} questions answered, {hits} of {lookups} LM results reused; "
        f"traces in {paths.runs}"
    )


def _summarize_summary(metrics: dict[str, dict[str, Any]], paths: Paths) -> str:
    accs = ", ".join(
        f"{method} {sum(m['acc'] for m in by.values()) / len(by):.3f}" for method, by in metrics.items() if by
    )
    return f"summarize: mean ACC over datasets: {accs}; gate passed; metrics in {paths.metrics}"


def _analyze_summary(result: dict[str, Any], paths: Paths) -> str:
    sep = result["separability"]
    measured = (
        f"skill read from the state by a {sep['folds']}-fold linear probe {sep['probe_accuracy']:.2f} "
        f"(most frequent skill {sep['majority_accuracy']:.2f})"
        if sep["probe_accuracy"] is not None
        else "separability not measured (too few)"
    )
    return f"analyze: {result['failure_states']} failure states, {measured}; numbers in {paths.analysis}"


def _report_summary(path: Any, paths: Paths) -> str:
    return f"report: {path}; Data Docs in {paths.data_docs}"


def _adaptive_summary(report: dict[str, Any], paths: Paths) -> str:
    dev = report["dev"]
    shown = "not measured" if dev["accuracy"] is None else f"{dev['accuracy']:.3f} (majority label {dev['majority_accuracy']:.3f})"
    return f"train-adaptive: {report['train']['questions']} labelled train questions, dev accuracy {shown}; classifier in {paths.adaptive}"


def _thresholds_summary(report: dict[str, Any], paths: Paths) -> str:
    chosen = ", ".join(
        f"{t['param']} = {t['value']:.4g} ({t['dev_retrieval_rate']:.0%})" for t in report["triggers"].values()
    )
    return (
        f"tune-thresholds: {chosen} of dev questions retrieve (target {report['target']['retrieval_rate']:.0%}, "
        f"{report['target']['source']}); in {paths.thresholds}"
    )


def _prepare_details(counts: dict[str, dict[str, int]]) -> list[str]:
    return [f"{split:>5}: " + ", ".join(f"{d} {n}" for d, n in by_dataset.items()) for split, by_dataset in counts.items()]


def _index_details(stats: Any) -> list[str]:
    return [f"Lucene {stats.lucene_seconds:.1f} s, bm25s {stats.bm25s_seconds:.1f} s"
            + ("; the recorded index rebuilt" if stats.rebuild else "")]


def _extract_details(summary: dict[str, Any]) -> list[str]:
    return [f"  {key}: {n}" for key, n in summary["by_split_strategy_label"].items()]


def _probe_details(report: dict[str, Any]) -> list[str]:
    from skillrag.report.tables import decision_points

    recipe = report["recipe"]
    lines = [f"note: {note}" for note in report["notes"]]
    lines.append(f"recipe: {recipe['name']}, pooling {recipe['pooling']}, {recipe['network']}, {len(recipe['layers'])} layer(s)")
    for point, cut in decision_points(report["cuts"]):
        if cut and cut["n"]:
            what = "retrieves" if point == "before_retrieval" else "retries"
            lines.append(
                f"{point}: cut {cut['cut']:.3f} {what} {cut['reject_rate']:.0%} of dev answers, dev ACC {cut['acc']:.3f} "
                f"(all: {cut['acc_reject_all']:.3f}, none: {cut['acc_accept_all']:.3f})"
            )
    return lines


def _router_details(summary: dict[str, Any]) -> list[str]:
    lines = [f"{summary['examples']} training examples from {summary['questions']} questions: {summary['by_skill']}"]
    if summary["trained"] and summary["cv_accuracy"] is not None:
        lines.append(
            f"{summary['cv_folds']}-fold accuracy {summary['cv_accuracy']:.3f} "
            f"(always the most frequent skill: {summary['majority_accuracy']:.3f})"
        )
    return lines


def _adaptive_details(report: dict[str, Any]) -> list[str]:
    train, dev = report["train"], report["dev"]
    lines = [f"train labels: {train['labels']} ({train['defaulted']} of {train['questions']} defaulted; ircot run on {train['ircot_runs']})"]
    if dev["accuracy"] is not None:
        lines.append(
            f"dev accuracy {dev['accuracy']:.3f} (always {dev['majority_label']}: {dev['majority_accuracy']:.3f}); "
            f"dev ACC routed {dev['acc']['adaptive']:.3f}, single_step {dev['acc']['single_step']:.3f}"
        )
    return lines


def _thresholds_details(report: dict[str, Any]) -> list[str]:
    return [
        f"{method}: {trigger['param']} = {trigger['value']:.4g}; dev retrieval "
        + ", ".join(f"{d} {r:.0%}" for d, r in trigger["dev_retrieval_rate_by_dataset"].items())
        for method, trigger in report["triggers"].items()
    ]


def _analyze_details(result: dict[str, Any]) -> list[str]:
    return [f"note: {note}" for note in result["notes"]]


STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        Stage(
            "prepare", "Sample the train/dev prober pools and the per-dataset evaluation sets into data/questions/.",
            prepare.prepare, prepare.gate_prepare, _prepare_summary, _prepare_details,
        ),
        Stage(
            "index", "Write the corpus as a pyserini JsonCollection (data/corpus/) and build the Lucene and bm25s BM25 "
            "indexes (data/index/), then run the index quality gate. (The dense index is built when a dense or hybrid "
            "backend first needs it, in data/dense/.) A build that reproduces the recorded index leaves its recorded "
            "timing as it was (this one goes to .skillrag/rebuilds.jsonl).",
            index.index, index.gate_index, _index_summary, _index_details,
        ),
        Stage(
            "extract", "Answer the train/dev questions closed-book and with BM25 top-k, capturing the prober's hidden "
            "states in the same generation (data/states/). Resumes an interrupted run.",
            extract.extract, extract.gate_extract, _extract_summary, _extract_details,
        ),
        Stage(  # before train_probe: its retry rates set the after-evidence cuts
            "train_router", "Train the learned skill router (methods.router: learned) on train questions: from each wrong "
            "single-step answer every query skill is tried, and the state is labelled by gold with the first skill that "
            "answered right, else exit (data/router/); its cross-validated accuracy goes to reports/router_metrics.json. "
            "Too few examples per skill: a note, no router.",
            train_router.train_router, None, _router_summary, _router_details,
        ),
        Stage(
            "train_probe", "Train the prober on the train states (probe.recipe: by default chosen by question-grouped CV), "
            "choose each decision point's acceptance cut on dev by what it does to answers, report dev AUROC with "
            "intervals next to the entropy baseline's and what each cut does (reports/probe_metrics.json); the prober is "
            "written only if the probe gate passes. Needs train-router's retry rates.",
            train_probe.train_probe, None, _probe_summary, _probe_details,
        ),
        Stage(
            "train_adaptive", "Train Adaptive-RAG's query-complexity classifier: label train and dev questions with the "
            "simplest strategy that answered right (else the dataset's default), from extract's closed-book and "
            "single-step answers and ircot where the label needs it, fit a logistic regression on the question's hidden "
            "state (data/adaptive/); dev accuracy and confusion matrix in reports/adaptive_metrics.json.",
            train_adaptive.train_adaptive, None, _adaptive_summary, _adaptive_details,
        ),
        Stage(
            "tune_thresholds", "Choose the trigger thresholds of flare (theta), dragin (RIND) and entropy_rag (entropy "
            "cut) on the dev questions only: each sends to retrieval the share of dev questions closest to the target "
            "(tune_thresholds.target_retrieval_rate; probing_rag: the share the prober rejects closed-book). Values in "
            "data/thresholds/thresholds.json (read when the params are auto), with the dev retrieval rate each gives in "
            "reports/thresholds.json.",
            tune_thresholds.tune_thresholds, None, _thresholds_summary, _thresholds_details,
        ),
        Stage(  # timed per method: evaluate-<method>
            "evaluate", "Run every method (evaluate.methods) on every evaluation set, each as its DVC stage "
            "evaluate-METHOD does: one trace per question in data/runs/<method>/<dataset>.jsonl (resumable).",
            evaluate.evaluate, None, _evaluate_summary, timed=False,
        ),
        Stage(
            "summarize", "Gate every method's runs (data/runs/), then write the metrics of all of them: "
            "reports/metrics.json (headline) and reports/metrics_detail.json (everything, with each run's reuse and run costs).",
            summarize.summarize, None, _summarize_summary,
        ),
        Stage(
            "analyze", "The failure space of skill_rag's traces (paper 4.3, Fig. 2): questions still wrong after the "
            "retrieval round, their hidden states projected (PCA, t-SNE) by chosen skill and by fix, and how well a "
            "linear probe reads the skill from the state: reports/analysis.json + reports/figures/.",
            analyze.analyze, None, _analyze_summary, _analyze_details,
        ),
        Stage(
            "report", "reports/report.md (Table-1 quality with intervals, costs, gate and skills, prober calibration, "
            "failure space, case studies, data gates, provenance, change against the run before this one, found from "
            "`report.against`) and the gates' Great Expectations Data Docs in data/data_docs/.",
            report.report, None, _report_summary,
        ),
    )
}


def metrics_table(metrics: dict[str, dict[str, Any]]) -> Any:
    """summarize's metrics as a rich table, one row per method and dataset (what `skillrag evaluate` prints)."""
    from rich.table import Table

    columns = ("method", "dataset", "n", "EM", "ACC", "F1", "no answer", "LLM calls", "retrievals", "latency s")
    table = Table(*columns)
    for method, by_dataset in metrics.items():
        for dataset, m in by_dataset.items():
            table.add_row(
                method, dataset, str(m["n"]), f"{m['em']:.3f}", f"{m['acc']:.3f}", f"{m['f1']:.3f}",
                f"{m['no_answer_rate']:.2f}", f"{m['llm_calls']:.2f}", f"{m['retrievals']:.2f}", f"{m['latency_s']:.1f}",
            )
    return table


def ensure_index(params: Params, paths: Paths, say: Callable[[str], None]) -> None:
    """Build the BM25 indexes (stage `index`, seconds) when they are absent, as on a fresh clone,
    saying so: `ask`, `search` and the evaluate stages call it before opening a retriever (in the
    pipeline the index is a DVC dependency, so it is there and this does nothing)."""
    from skillrag.retrieval.index_manifest import MANIFEST

    if (paths.index / MANIFEST).is_file():
        return
    paths = replace(paths, custom=None)  # the pipeline's index stage (its lock, gate and timing), shared by named runs
    say(f"no index at {paths.index} (a fresh clone keeps none): building the Lucene and bm25s indexes of "
        f"{params.index.corpus_file} (seconds)")
    stats = STAGES["index"](params, paths)
    kept = "the recorded one" if stats.rebuild else f"a new one, recorded in {paths.index_fingerprint}"
    say(f"index: {stats.passages} passages in {stats.seconds:.1f} s, {kept}")


__all__ = ["STAGES", "Stage", "ensure_index", "metrics_table"]
