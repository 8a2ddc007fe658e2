"""Where each stage reads and writes, relative to a workspace root.

The default pipeline's workspace is the project root (the folder of params.yaml): DVC declares
the same paths in dvc.yaml, and keeping them in one place keeps the two in step. A hand run under
another profile gets its own workspace, `workspaces/<profile>/` (git- and DVC-ignored), so trying
a profile never rewrites the committed reports or the DVC-tracked data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from skillrag.errors import ConfigError

WORKSPACES = "workspaces"
# What the stages write, relative to the project root: never the code a run is made by. A run's
# provenance ignores their changes (DVC deletes a stage's git-tracked outputs before it runs it,
# and a resumed run appends to its own traces), so "uncommitted changes" means changed code or params.
GENERATED = ("data", "reports", ".skillrag", "dvc.lock")


@dataclass(frozen=True)
class Paths:
    root: Path = Path(".")
    custom: str | None = None  # a named evaluation on the user's questions (`for_custom`)

    @classmethod
    def for_profile(cls, project: Path, profile: str | None) -> Paths:
        """The project root for the default pipeline; `workspaces/<profile>/` for any other profile."""
        if profile in (None, "default"):
            return cls(project)
        return cls(project / WORKSPACES / profile)

    def for_custom(self, name: str) -> Paths:
        """The paths of `skillrag evaluate --questions PATH --name NAME`: its own questions and traces
        (data/custom/NAME/), metrics (reports/custom/NAME/) and lock; everything else (index,
        prober, router) is this workspace's. The default pipeline's outputs are never written."""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ConfigError(f"--name {name!r}: use letters, digits, '.', '_' and '-' only (it names a folder)")
        return replace(self, custom=name)

    @property
    def _data(self) -> Path:
        """Where the evaluation's own data goes: data/, or data/custom/NAME/."""
        return self.root / "data" if self.custom is None else self.root / "data" / "custom" / self.custom

    @property
    def results(self) -> Path:
        """Where the evaluation's metrics go: reports/, or reports/custom/NAME/."""
        return self.reports if self.custom is None else self.reports / "custom" / self.custom

    @property
    def locks(self) -> Path:
        """Lock files of running stages (skillrag.pipeline.stages.common.exclusive): git-ignored, never a DVC output."""
        locks = self.root / ".skillrag" / "locks"
        return locks if self.custom is None else locks / "custom" / self.custom

    @property
    def questions(self) -> Path:
        return self._data / "questions"

    def question_file(self, split: str, dataset: str) -> Path:
        return self.questions / split / f"{dataset}.jsonl"

    @property
    def corpus(self) -> Path:
        return self.root / "data" / "corpus"

    @property
    def index(self) -> Path:
        return self.root / "data" / "index"

    @property
    def index_fingerprint(self) -> Path:
        """The index's identity by content (skillrag.retrieval.fingerprint; git-tracked): what stages
        that read the index depend on, since the Lucene files differ byte-wise between builds."""
        return self.root / "data" / "fingerprints" / "index.json"

    @property
    def dense_index(self) -> Path:
        """The dense index's root (skillrag.retrieval.dense): built on first use by a dense or hybrid
        backend, on each machine; neither a DVC output nor in git."""
        return self.root / "data" / "dense"

    @property
    def dense_fingerprint(self) -> Path:
        """The dense index's identity by content, beside it (not in git: each machine builds its own),
        kept apart from the BM25 one so that a BM25 run's identity does not change with it."""
        return self.dense_index / "fingerprint.json"

    @property
    def states(self) -> Path:
        """Extract's output (skillrag.probe.state_store): `rows/` (git-tracked) and `vectors/` (DVC cache)."""
        return self.root / "data" / "states"

    @property
    def states_rows(self) -> Path:
        return self.states / "rows"

    @property
    def states_vectors(self) -> Path:
        return self.states / "vectors"

    @property
    def probe(self) -> Path:
        return self.root / "data" / "probe"

    @property
    def router(self) -> Path:
        return self.root / "data" / "router"

    @property
    def router_traces_dir(self) -> Path:
        """train_router's resumable traces, its first retries and their rates."""
        return self.root / "data" / "router_traces"

    @property
    def router_traces(self) -> Path:
        return self.router_traces_dir / "train.jsonl"

    @property
    def retry_rates(self) -> Path:
        """What a retry does to right and wrong single-step answers (train_router; read by train_probe)."""
        return self.router_traces.with_name("retries.json")

    def retry_traces(self, method: str) -> Path:
        """A checked method's first retries on the train questions (train_router; the retry rates' source)."""
        return self.router_traces.with_name(f"{method}.jsonl")

    @property
    def runs(self) -> Path:
        return self._data / "runs"

    def method_runs(self, method: str) -> Path:
        """One method's traces, settings and stored generations (its evaluate stage's output)."""
        return self.runs / method

    def run_file(self, method: str, dataset: str) -> Path:
        return self.method_runs(method) / f"{dataset}.jsonl"

    @property
    def custom_data(self) -> Path:
        """Every named evaluation's data (`for_custom`)."""
        return self.root / "data" / "custom"

    @property
    def custom_results(self) -> Path:
        """Every named evaluation's metrics and report (`for_custom`)."""
        return self.reports / "custom"

    @property
    def metrics(self) -> Path:
        """The headline numbers per method and dataset (DVC metrics)."""
        return self.results / "metrics.json"

    @property
    def metrics_detail(self) -> Path:
        """Every summary number: intervals, flexible scores, token and latency costs, counts."""
        return self.results / "metrics_detail.json"

    @property
    def outcomes(self) -> Path:
        """Every question's outcome per method and dataset (skillrag.report.outcomes; in git)."""
        return self.results / "outcomes.csv"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    def validation(self, gate: str) -> Path:
        """A quality gate's result (skillrag.quality.gate): reports/validation/<gate>.json, or
        reports/custom/NAME/validation/<gate>.json; git-tracked, never inside a cached output."""
        return self.results / "validation" / f"{gate}.json"

    @property
    def timings(self) -> Path:
        """Each stage's recorded wall time (skillrag.pipeline.timing; git-tracked)."""
        return self.reports / "timings"

    def timing(self, stage: str) -> Path:
        """`reports/timings/<stage>.json`, named as dvc.yaml names the stage (`@` written `-`)."""
        return self.timings / f"{stage.replace('@', '-')}.json"

    def stopped_legs(self, stage: str) -> Path:
        """The seconds of a resumable stage's stopped (or running) legs, until a leg finishes it."""
        return self.locks.parent / "timings" / f"{stage.replace('@', '-')}.legs.json"

    @property
    def experiments(self) -> Path:
        """The side studies the report lists (skillrag.report.experiments)."""
        return self.root / "experiments"

    @property
    def figures(self) -> Path:
        return self.reports / "figures"

    @property
    def probe_reliability_figure(self) -> Path:
        """The prober's reliability on dev (train_probe)."""
        return self.figures / "probe_reliability.png"

    @property
    def probe_learning_curve_figure(self) -> Path:
        return self.figures / "probe_learning_curve.png"

    @property
    def failure_space_figure(self) -> Path:
        """The failure states projected (analyze)."""
        return self.figures / "failure_space.png"

    @property
    def failure_separability_figure(self) -> Path:
        return self.figures / "failure_separability.png"

    @property
    def accuracy_cost_figure(self) -> Path:
        """Each method's ACC against its cost (report)."""
        return self.figures / "accuracy_cost.png"

    @property
    def accuracy_overall_figure(self) -> Path:
        return self.figures / "accuracy_overall.png"

    @property
    def eval_reliability_figure(self) -> Path:
        """The prober on the studied method's evaluation answers (report)."""
        return self.figures / "prober_reliability_eval.png"

    @property
    def probe_metrics(self) -> Path:
        return self.reports / "probe_metrics.json"

    @property
    def probe_detail(self) -> Path:
        return self.reports / "probe_detail.json"

    @property
    def router_metrics(self) -> Path:
        return self.reports / "router_metrics.json"

    @property
    def analysis(self) -> Path:
        """The failure-space analysis' numbers (DVC metrics); its figures are in `figures`."""
        return self.reports / "analysis.json"

    @property
    def report(self) -> Path:
        """The report a reviewer reads (committed); a named evaluation's beside its metrics."""
        return self.results / "report.md"

    @property
    def data_docs(self) -> Path:
        """The Great Expectations file context whose Data Docs render the gates' results (DVC-tracked)."""
        return self.root / "data" / "data_docs"

    @property
    def adaptive(self) -> Path:
        """Adaptive-RAG's query-complexity classifier (stage train_adaptive)."""
        return self.root / "data" / "adaptive"

    @property
    def adaptive_traces_dir(self) -> Path:
        """train_adaptive's resumable traces."""
        return self.root / "data" / "adaptive_traces"

    def adaptive_traces(self, split: str, strategy: str) -> Path:
        """The traces that silver-label the classifier's `split` questions: one file per strategy."""
        return self.adaptive_traces_dir / split / f"{strategy}.jsonl"

    @property
    def adaptive_metrics(self) -> Path:
        return self.reports / "adaptive_metrics.json"

    @property
    def thresholds(self) -> Path:
        """The retrieving baselines' trigger thresholds tuned on dev (stage tune_thresholds), read
        by flare, dragin and entropy_rag when their threshold param is `auto`."""
        return self.root / "data" / "thresholds" / "thresholds.json"

    @property
    def thresholds_report(self) -> Path:
        """The chosen thresholds and the dev retrieval rate each gives."""
        return self.reports / "thresholds.json"
