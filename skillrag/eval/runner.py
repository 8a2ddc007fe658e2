"""The resumable evaluation runner: one trace per question, appended as it completes.

`data/runs/<method>/<dataset>.jsonl` grows line by line (flushed), so an interrupted run loses
at most the question in flight; a re-run skips the questions already traced. A trailing line
cut off by a crash is dropped on resume.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm import tqdm

from skillrag.data.schema import Question
from skillrag.methods import Method, Trace


def read_traces(path: Path) -> list[Trace]:
    """Traces already written; a malformed *last* line (a crash mid-write) is dropped from the file."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    traces = []
    for number, line in enumerate(lines, start=1):
        try:
            traces.append(Trace.from_dict(json.loads(line)))
        except json.JSONDecodeError:
            if number != len(lines):
                raise ValueError(f"{path}:{number}: malformed trace line") from None
            path.write_text("".join(f"{kept}\n" for kept in lines[:-1]), encoding="utf-8")
    return traces


def run_method(
    method: Method,
    questions: Sequence[Question],
    out_file: Path,
    on_trace: Callable[[Trace], None] | None = None,
) -> list[Trace]:
    """Answer every question not yet in `out_file`; returns all traces in question order."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    done = {t.question_id: t for t in read_traces(out_file)}
    todo = [q for q in questions if q.id not in done]
    with out_file.open("a", encoding="utf-8") as handle:
        for question in tqdm(todo, desc=f"{method.name} {out_file.stem}", unit="question"):
            trace = method.answer(question)
            handle.write(json.dumps(trace.to_dict(), ensure_ascii=False) + "\n")
            handle.flush()
            done[trace.question_id] = trace
            if on_trace is not None:
                on_trace(trace)
    return [done[q.id] for q in questions]
