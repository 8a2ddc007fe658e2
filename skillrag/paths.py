"""Where each stage reads and writes, relative to a workspace root.

The default pipeline's workspace is the project root (the folder of params.yaml): DVC declares
the same paths in dvc.yaml, and keeping them in one place keeps the two in step. A hand run under
another profile gets its own workspace, `workspaces/<profile>/` (git- and DVC-ignored), so trying
a profile never rewrites the committed reports or the DVC-tracked data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


WORKSPACES = "workspaces"


@dataclass(frozen=True)
class Paths:
    root: Path = Path(".")

    @classmethod
    def for_profile(cls, project: Path, profile: str | None) -> Paths:
        """The project root for the default pipeline; `workspaces/<profile>/` for any other profile."""
        if profile in (None, "default"):
            return cls(project)
        return cls(project / WORKSPACES / profile)

    @property
    def locks(self) -> Path:
        """Lock files of running stages (skillrag.stages.exclusive): git-ignored, never a DVC output."""
        return self.root / ".skillrag" / "locks"

    @property
    def questions(self) -> Path:
        return self.root / "data" / "questions"

    def question_file(self, split: str, dataset: str) -> Path:
        return self.questions / split / f"{dataset}.jsonl"

    @property
    def corpus(self) -> Path:
        return self.root / "data" / "corpus"

    @property
    def index(self) -> Path:
        return self.root / "data" / "index"

    @property
    def states(self) -> Path:
        return self.root / "data" / "states"

    @property
    def probe(self) -> Path:
        return self.root / "data" / "probe"

    @property
    def router(self) -> Path:
        return self.root / "data" / "router"

    @property
    def router_traces(self) -> Path:
        return self.root / "data" / "router_traces" / "train.jsonl"

    @property
    def runs(self) -> Path:
        return self.root / "data" / "runs"

    def run_file(self, method: str, dataset: str) -> Path:
        return self.runs / method / f"{dataset}.jsonl"

    @property
    def metrics(self) -> Path:
        """The headline numbers per method and dataset (DVC metrics)."""
        return self.root / "reports" / "metrics.json"

    @property
    def metrics_detail(self) -> Path:
        """Every summary number: intervals, flexible scores, token and latency costs, counts."""
        return self.root / "reports" / "metrics_detail.json"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def figures(self) -> Path:
        return self.reports / "figures"

    @property
    def probe_metrics(self) -> Path:
        return self.reports / "probe_metrics.json"

    @property
    def probe_detail(self) -> Path:
        return self.reports / "probe_detail.json"

    @property
    def router_metrics(self) -> Path:
        return self.reports / "router_metrics.json"
