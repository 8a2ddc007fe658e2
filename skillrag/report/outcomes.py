"""reports/outcomes.csv: every question's outcome under every method, committed to git so that a
pull request's `git diff` shows exactly which questions changed, and so that comparisons
(skillrag.report.paired), the PR comment (skillrag.report.diff) and the re-evaluation alarm
(skillrag.pipeline.reevaluation) pair methods and commits on the same questions.

One row per method x dataset x question id, sorted by those three: the strict scores the runner
stored in `Trace.scores` (ACC, EM 0/1; F1 to 4 decimals), whether the strict answer was empty,
LLM calls, retrievals, how the run ended, and the question and final answer cut to
QUESTION_CHARS / ANSWER_CHARS characters (~170 bytes a row: a few hundred KB for nine methods,
five datasets and 50 questions each).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from skillrag.files import read_jsonl, replace_text

KEY = ("method", "dataset", "question_id")
COLUMNS = (*KEY, "acc", "em", "f1", "no_answer", "llm_calls", "retrievals", "termination", "question", "answer")
BINARY = ("acc", "em", "no_answer")  # the outcomes a paired test compares
QUESTION_CHARS = 100
ANSWER_CHARS = 60


def _cut(text: str, limit: int) -> str:
    """One line of at most `limit` characters, "…" marking a cut."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def outcome_row(trace: Mapping[str, Any]) -> dict[str, Any]:
    """One trace (its JSON row, as the runner writes it) as an outcomes row."""
    scores = trace.get("scores") or {}
    if not scores:
        raise ValueError(f"trace {trace['method']}/{trace['dataset']}/{trace['question_id']} has no scores")
    return {
        "method": trace["method"],
        "dataset": trace["dataset"],
        "question_id": trace["question_id"],
        "acc": int(scores["acc"]),
        "em": int(scores["em"]),
        "f1": round(float(scores["f1"]), 4),
        "no_answer": int(not trace["answer"]),
        "llm_calls": int(trace["totals"]["llm_calls"]),
        "retrievals": int(trace["totals"]["retrievals"]),
        "termination": trace["termination"],
        "question": _cut(trace["question"], QUESTION_CHARS),
        "answer": _cut(trace["answer"], ANSWER_CHARS),
    }


def outcome_frame(traces: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Trace rows as the sorted outcomes table."""
    rows = [outcome_row(trace) for trace in traces]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.sort_values(list(KEY), ignore_index=True)


def outcome_rows(runs_dir: Path, methods: Sequence[str], datasets: Sequence[str]) -> pd.DataFrame:
    """The outcomes of every method on every dataset, read from `runs_dir/<method>/<dataset>.jsonl`."""
    traces = []
    for method in methods:
        for dataset in datasets:
            run = runs_dir / method / f"{dataset}.jsonl"
            if not run.is_file():
                raise FileNotFoundError(f"{run} is missing: evaluate {method} on {dataset} first")
            traces.extend(read_jsonl(run))
    return outcome_frame(traces)


def to_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def write_outcomes(runs_dir: Path, out_path: Path, methods: Sequence[str], datasets: Sequence[str]) -> Path:
    """Write reports/outcomes.csv (see the module docstring) atomically; returns its path."""
    replace_text(out_path, to_csv(outcome_rows(runs_dir, methods, datasets)))
    return out_path


def read_outcomes(text: str) -> pd.DataFrame:
    """An outcomes file's text (from disk or `git show`) as a frame: ids and answers stay strings
    (an empty answer is "", not NaN)."""
    frame = pd.read_csv(
        io.StringIO(text), keep_default_na=False,
        dtype={"method": str, "dataset": str, "question_id": str, "termination": str, "question": str, "answer": str},
    )
    missing = set(COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"not an outcomes file: columns {sorted(missing)} are missing")
    return frame
