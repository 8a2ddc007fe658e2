"""The pipeline's stages, one module each, every one a function of (params, paths).

The DVC commands (`skillrag <stage>`) and the Prefect flows call exactly these, so both paths
produce byte-identical outputs, and each ends with the same one-line summary. One module per
stage lets each DVC stage depend on exactly the code it runs. Heavy libraries are imported inside
each function: a stage pays only for what it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from skillrag.config import Params
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
from skillrag.pipeline.timing import timed


@dataclass(frozen=True)
class Stage:
    """A stage as users name it (CLI command, Prefect flow): its function, the gate that checks its
    output afterwards (None: it gates itself before publishing), and its closing line.

    `run` holds the stage's workspace lock (`.skillrag/locks/<name>.lock`), taken here for every
    stage, so two runs of one stage on one workspace never write the same outputs at once: the
    second stops at once, naming the first. A `timed` stage's wall time (gate included) goes to
    reports/timings/<DVC stage name>.json (skillrag.pipeline.timing)."""

    name: str
    run: StageFn
    gate: StageFn | None
    summary: Callable[[Any, Paths], str]
    timed: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "run", exclusive(self.run, self.name))

    def __call__(self, params: Params, paths: Paths) -> Any:
        with timed(paths, self.name.replace("-", "_")) if self.timed else nullcontext():
            result = self.run(params, paths)
            if self.gate is not None:
                self.gate(params, paths)
        return result


def _prepare_summary(counts: dict[str, dict[str, int]], paths: Paths) -> str:
    sizes = ", ".join(f"{sum(by.values())} {split}" for split, by in counts.items())
    return f"prepare: {sizes} questions in {paths.questions}; gate passed"


def _index_summary(stats: Any, paths: Paths) -> str:
    return f"index: {stats.passages} passages in {stats.seconds:.1f} s, Lucene, bm25s and dense in {paths.index}; gate passed"


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


STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        Stage("prepare", prepare.prepare, prepare.gate_prepare, _prepare_summary),
        Stage("index", index.index, index.gate_index, _index_summary),
        Stage("extract", extract.extract, extract.gate_extract, _extract_summary),
        Stage("train-router", train_router.train_router, None, _router_summary),  # before train-probe: its retry rates set the after-evidence cuts
        Stage("train-probe", train_probe.train_probe, None, _probe_summary),
        Stage("train-adaptive", train_adaptive.train_adaptive, None, _adaptive_summary),
        Stage("tune-thresholds", tune_thresholds.tune_thresholds, None, _thresholds_summary),
        Stage("evaluate", evaluate.evaluate, None, _evaluate_summary, timed=False),  # timed per method: evaluate-<method>
        Stage("summarize", summarize.summarize, None, _summarize_summary),
        Stage("analyze", analyze.analyze, None, _analyze_summary),
        Stage("report", report.report, None, _report_summary),
    )
}

__all__ = ["STAGES", "Stage"]
