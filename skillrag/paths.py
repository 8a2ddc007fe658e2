"""Where each stage reads and writes, relative to the project root (the folder of params.yaml).

DVC declares the same paths in dvc.yaml; keeping them in one place keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Paths:
    root: Path = Path(".")

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
        return self.root / "reports" / "metrics.json"

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
    def router_metrics(self) -> Path:
        return self.reports / "router_metrics.json"
