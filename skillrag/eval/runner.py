"""The resumable evaluation runner: one trace per question, appended as it completes.

`data/runs/<method>/<dataset>.jsonl` grows line by line (flushed), so an interrupted run loses
at most the question in flight; a re-run skips the questions already traced. A trailing line
cut off by a crash is dropped on resume.

Beside it, `<dataset>.settings.json` records what the traces were run with (method, model,
retrieval, method params, prober and router digests, prompts). Resuming under other settings
would silently mix two configurations in one file, so it is refused, naming what changed; the
traces are left untouched. (`dvc repro` deletes the outputs of a changed stage first, so this
only bites hand-run commands with different `--set` values.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from skillrag.data.schema import Question
from skillrag.files import DataError, write_json
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


def settings_file(out_file: Path) -> Path:
    return out_file.with_name(f"{out_file.stem}.settings.json")


def _claim(out_file: Path, settings: Mapping[str, Any], traced: int) -> None:
    """Record `settings` for `out_file`, refusing when its existing traces were run with others."""
    current = json.loads(json.dumps(settings, sort_keys=True))
    sidecar = settings_file(out_file)
    recorded = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else None
    if traced and recorded != current:
        changed = "no settings were recorded" if recorded is None else "changed: " + ", ".join(
            sorted(k for k in current.keys() | recorded.keys() if current.get(k) != recorded.get(k))
        )
        raise DataError(
            f"{out_file} holds {traced} traces run with other settings ({changed}); "
            "delete it to re-run them with the current settings, or restore the old ones"
        )
    write_json(sidecar, current)


def run_method(
    method: Method,
    questions: Sequence[Question],
    out_file: Path,
    settings: Mapping[str, Any],
    on_trace: Callable[[Trace], None] | None = None,
) -> list[Trace]:
    """Answer every question not yet in `out_file`; returns all traces in question order.

    `settings`: everything that shapes a trace (JSON-serialisable); see the module docstring."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    done = {t.question_id: t for t in read_traces(out_file)}
    _claim(out_file, settings, len(done))
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
