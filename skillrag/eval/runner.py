"""The resumable evaluation runner: one trace per question, appended as it completes.

`data/runs/<method>/<dataset>.jsonl` grows line by line (flushed and fsynced), so an interrupted
or killed run loses at most the question in flight; a re-run skips the questions already traced.
A trailing line cut off by a kill is dropped on resume (the file is rewritten atomically), and
error traces (per-question runtime failures, see `skillrag.methods.error_policy.is_question_failure`)
are dropped too, so a re-run retries them. A signal (SIGINT, SIGTERM) stops the run before the
question in flight is written (`skillrag.interrupts`).

With `concurrency` above 1, that many questions run at once (`skillrag.eval.batching`): each on
its own instance of the method (`Method.fork`), their LM calls batched across questions. The
file is the same as one question at a time writes it: lines in question order (a question that
finishes early waits for the ones before it); the same traces (in float32: the same text, tokens
and decisions, prober scores equal up to rounding, ~1e-7; in bfloat16 a row's numbers depend a
little on its batch; latency then includes the wait for shared batches); the same resume,
interrupt and error behaviour (a programming error stops the run; the traces of the questions
before the first one it reaches are written).

Beside it, `<dataset>.settings.json` records what the traces were run with
(`skillrag.pipeline.settings.run_settings`): the digests of the inputs and the parameters the method reads,
plus the provenance of each run that added traces (git commit, library versions). Resuming
under other inputs or parameters would silently mix two configurations in one file, so it is
refused, naming what changed; the traces are left untouched. Provenance is not compared: a new
commit does not invalidate the traces. (The traces are a `persist: true` DVC output, kept when
the stage's inputs change, so the refusal is what stops a changed stage: delete them, or run
`skillrag repro --force evaluate-<method>`, to trace again.)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from skillrag import interrupts
from skillrag.data.schema import Question
from skillrag.eval.batching import Batcher
from skillrag.eval.scoring import score_trace
from skillrag.files import DataError, replace_text, write_json
from skillrag.methods import Method, Trace
from skillrag.methods.error_policy import is_question_failure

PROVENANCE = "provenance"
FIX_LINE = "delete that line (the run that wrote the file answers its question again when rerun)"
DESCRIBED = ("retrieves", "trigger")  # what the runs gate reads: recorded as now, never compared


def _read(path: Path, repair: bool = False) -> list[tuple[str, Trace]]:
    """(line, trace) pairs already written. A malformed *last* line (a kill mid-write, or a git
    checkpoint taken mid-write) is skipped; with `repair` (the run that owns the file, resuming)
    it is also dropped from the file, and a whole last line missing its newline gets it,
    atomically, so the next append starts a line of its own. Readers never rewrite the file. Any
    other bad line (not UTF-8, not JSON, not a trace) is a DataError naming file:line."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    lines = raw.splitlines()
    kept = []
    for number, data in enumerate(lines, start=1):
        where = f"{path}:{number}"
        try:
            line = data.decode("utf-8")
            row = json.loads(line)
        except UnicodeDecodeError as err:
            raise DataError(f"{where}: not UTF-8 (byte {data[err.start]:#04x} at byte {err.start + 1}); {FIX_LINE}") from None
        except json.JSONDecodeError:
            if number != len(lines):
                raise DataError(f"{where}: malformed trace line; {FIX_LINE}") from None
            continue
        try:
            kept.append((line, Trace.from_dict(row)))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DataError(f"{where}: not a trace ({type(err).__name__}: {str(err)[:80]}); {FIX_LINE}") from None
    if repair and (len(kept) < len(lines) or (raw and not raw.endswith(b"\n"))):
        replace_text(path, "".join(f"{line}\n" for line, _ in kept))
    return kept


def read_traces(path: Path) -> list[Trace]:
    """Traces already written (see `_read`; the file is left as it is)."""
    return [trace for _, trace in _read(path)]


def read_trace_rows(path: Path) -> list[dict[str, Any]]:
    """The traces already written as the JSON objects stored (what the runs gate reads), checked
    and read as `read_traces` reads them."""
    return [json.loads(line) for line, _ in _read(path)]


def settings_file(out_file: Path) -> Path:
    return out_file.with_name(f"{out_file.stem}.settings.json")


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _claim(out_file: Path, settings: Mapping[str, Any], traced: int) -> None:
    """Record `settings` for `out_file`, refusing when its existing traces were run with others.

    The `provenance` entry is not compared; the recorded file keeps one entry per distinct
    provenance that added traces. The `DESCRIBED` entries are not compared either: the file
    records their current values."""
    current = json.loads(json.dumps(dict(settings), sort_keys=True))
    provenance = current.pop(PROVENANCE, None)
    described = {key: current.pop(key) for key in DESCRIBED if key in current}
    sidecar = settings_file(out_file)
    recorded = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else None
    history = recorded.pop(PROVENANCE, []) if recorded is not None else []
    for key in DESCRIBED:
        (recorded or {}).pop(key, None)
    if traced and recorded != current:
        if recorded is None:
            changed = "no settings were recorded"
        else:
            old, new = _flat(recorded), _flat(current)
            changed = "changed: " + ", ".join(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)))
        raise DataError(
            f"{out_file} holds {traced} traces run with other settings ({changed}); "
            "delete it to re-run them with the current settings, or restore the old ones"
        )
    if not traced:
        history = []
    if provenance is not None and provenance not in history:
        history.append(provenance)
    write_json(sidecar, {**current, **described, **({PROVENANCE: history} if provenance is not None else {})})


def _answer(method: Method, question: Question) -> Trace:
    trace = method.answer(question)
    trace.scores = score_trace(trace, method.components.params.abstain_answer)
    return trace


def _answers(
    method: Method, questions: Sequence[Question], concurrency: int, batch_size: int, stack: ExitStack
) -> Iterator[Trace]:
    """The questions' traces in order: one at a time, or `concurrency` at once with the LM calls
    batched (at most `batch_size` prompts per call); the batcher stops with `stack`."""
    if concurrency == 1:
        return (_answer(method, question) for question in questions)
    components = method.components
    batcher = stack.enter_context(Batcher(components.lm, components.retriever, concurrency, batch_size, is_question_failure))
    forks = [
        method.fork(replace(components, lm=batcher.lm(slot), retriever=batcher.retriever(slot)))
        for slot in range(concurrency)
    ]
    return batcher.map(lambda slot, question: _answer(forks[slot], question), questions)


def run_method(
    method: Method,
    questions: Sequence[Question],
    out_file: Path,
    settings: Mapping[str, Any],
    on_trace: Callable[[Trace], None] | None = None,
    concurrency: int = 1,
    batch_size: int = 8,
) -> list[Trace]:
    """Answer every question not yet in `out_file` (or traced with an error); returns all traces
    in question order.

    `settings`: everything that shapes a trace (JSON-serialisable); see the module docstring.
    `concurrency`: questions answered at once, their LM calls batched up to `batch_size` prompts."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    written = _read(out_file, repair=True)
    _claim(out_file, settings, len(written))
    kept = {trace.question_id: (line, trace) for line, trace in written if trace.termination != "error"}
    if len(kept) < len(written):  # error traces (and duplicates) go: the questions are retried
        replace_text(out_file, "".join(f"{line}\n" for line, _ in kept.values()))
    done = {qid: trace for qid, (_, trace) in kept.items()}
    todo = [q for q in questions if q.id not in done]
    with ExitStack() as stack, out_file.open("a", encoding="utf-8") as handle:
        traces = _answers(method, todo, concurrency, batch_size, stack)
        for trace in tqdm(traces, total=len(todo), desc=f"{method.name} {out_file.stem}", unit="question"):
            interrupts.check()  # a question cut short by a signal is never written
            with interrupts.deferred():  # a trace line is written whole
                handle.write(json.dumps(trace.to_dict(), ensure_ascii=False) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            done[trace.question_id] = trace
            if on_trace is not None:
                on_trace(trace)
    return [done[q.id] for q in questions]


def part_file(out_file: Path, shard: int) -> Path:
    """Where shard `shard` of a sharded run (skillrag.pipeline.stages.evaluate) writes its traces: a file
    of its own beside `out_file`, so no two workers ever append to the same file."""
    return out_file.with_name(f"{out_file.stem}.part-{shard}.jsonl")


def merge_parts(out_file: Path, questions: Sequence[Question], settings: Mapping[str, Any]) -> list[Trace]:
    """Fold the part files of a sharded run (`part_file`) into `out_file`, then delete them; returns
    the traces of `questions` in question order (as `run_method` does).

    One trace per question: a part's trace replaces the file's (a retried error trace). The file
    is rewritten atomically in question order (traces of other questions after them), so a kill
    at any point leaves either the parts or the merged file, and merging again gives the same
    result. Every file's settings are checked as a resume checks them."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    written = _read(out_file, repair=True)
    _claim(out_file, settings, len(written))
    merged = {trace.question_id: (line, trace) for line, trace in written}
    parts = sorted(out_file.parent.glob(f"{out_file.stem}.part-*.jsonl"))
    for part in parts:
        lines = _read(part, repair=True)
        _claim(part, settings, len(lines))
        merged.update((trace.question_id, (line, trace)) for line, trace in lines)
    if parts:
        asked = {q.id for q in questions}
        order = [q.id for q in questions if q.id in merged] + [qid for qid in merged if qid not in asked]
        replace_text(out_file, "".join(f"{merged[qid][0]}\n" for qid in order))
        for part in parts:
            part.unlink()
            settings_file(part).unlink(missing_ok=True)
    return [merged[q.id][1] for q in questions if q.id in merged]
