"""`skillrag evaluate --questions PATH --name NAME`: the trained artifacts (index, prober, router)
on the user's own questions, through the questions gate's row checks, written under NAME
(`Paths.for_custom`) so the default pipeline's outputs and dvc.lock are never touched.

Not a DVC stage: its inputs are outside the pipeline. The questions are in the data bundle's
schema (one JSON object per line with `id`, `question`, `answers`); a file names its dataset
(`<dataset>.jsonl`, or `<dataset>/questions.jsonl` as in the bundle), a directory holds such files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillrag.config import Params
from skillrag.data.schema import Question
from skillrag.files import DataError, numbered_jsonl, write_jsonl
from skillrag.paths import Paths
from skillrag.pipeline.stages.evaluate import check_inputs, evaluate
from skillrag.pipeline.stages.summarize import summarize

if TYPE_CHECKING:
    from skillrag.report.inputs import Inputs

DATASET_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")  # a file name of its own under data/custom/NAME/


def evaluate_custom(params: Params, paths: Paths, questions: Path, name: str, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Gate the questions at `questions`, copy them to data/custom/NAME/questions/eval/, and run
    `evaluate` and `summarize` there: traces in data/custom/NAME/runs/, metrics and a report section
    (`report_section`) in reports/custom/NAME/. Before anything is written: every trained artifact
    the methods open is checked and the named run's lock is taken; then a missing BM25 index is
    built (`ensure_index`, as on a fresh clone). `say`: where the progress lines go."""
    from skillrag.files import exclusive
    from skillrag.pipeline.stages import ensure_index
    from skillrag.quality.gate import run_gate
    from skillrag.quality.questions_gate import question_checks

    custom = paths.for_custom(name)
    by_dataset = read_questions(questions, params.prepare.max_question_chars)
    check_inputs(params, paths, params.evaluate.methods)  # in a second, not after the first methods' hours
    if params.evaluate.limit is not None and any(len(qs) > params.evaluate.limit for qs in by_dataset.values()):
        say(f"evaluate.limit={params.evaluate.limit}: only the first {params.evaluate.limit} questions of each dataset "
            "are answered (--set evaluate.limit=null answers them all)")
    # the named run's own lock, before anything is written: a second call with the same NAME stops here
    with exclusive(custom.locks / "evaluate.lock", f"`skillrag evaluate --questions ... --name {name}`"):
        rows = [q.to_dict() for qs in by_dataset.values() for q in qs]
        # the row checks only: split sizes and original-split origins describe the bundle's sampling
        checks = question_checks(rows, {}, params.prepare.max_question_chars)
        run_gate("questions", {"rows": checks["rows"]}, custom.validation("questions"))
        for dataset, qs in by_dataset.items():
            write_jsonl(custom.question_file("eval", dataset), (q.to_dict() for q in qs))
        ensure_index(params, paths, say)
        evaluate(params, custom, datasets=list(by_dataset))
        metrics = summarize(params, custom, datasets=list(by_dataset))
        report_section(params, paths, custom, questions)
    return metrics


def report_section(params: Params, paths: Paths, custom: Paths, questions: Path) -> Path:
    """reports/custom/NAME/report.md: the report's answer-quality (ACC, EM with 95% intervals)
    and cost tables for these questions (the sets `prepare.train_datasets` names in-domain, any
    other out of distribution), then the run against the pipeline's own (`against_pipeline`)."""
    from skillrag.files import replace_text
    from skillrag.report.inputs import load_inputs
    from skillrag.report.tables import cost_table, score_table

    inputs = load_inputs(custom)
    datasets = inputs.datasets([])
    quality = "\n\n".join(
        f"**{label}** (%, 95% interval):\n\n" + score_table(inputs, metric, datasets, params.prepare.train_datasets)
        for label, metric in (("ACC", "acc"), ("EM", "em"))
    )
    out = custom.results / "report.md"
    replace_text(
        out,
        f"# Evaluation on `{custom.custom}`\n\nQuestions from `{questions}` ({', '.join(datasets)}), answered with "
        f"this workspace's index, prober and router; traces in `{custom.runs.relative_to(custom.root)}`.\n\n"
        f"## Answer quality\n\n{quality}\n\n## Cost\n\n{cost_table(inputs)}\n\n"
        f"## Against the pipeline's run\n\n{against_pipeline(params, paths, custom, inputs)}\n",
    )
    return out


def against_pipeline(params: Params, paths: Paths, custom: Paths, mine: Inputs) -> str:
    """Each method of the named run against the same method in the pipeline's run (data/runs/) on
    the questions both answered: the run settings that differ, the paired ACC table of the report
    (bootstrap interval, won/lost, McNemar, Holm) and the questions whose strict ACC flipped. This
    is how a changed setting (e.g. `--set retrieval.backend=hybrid` on the evaluation questions) is
    measured against the committed run."""
    import pandas as pd

    from skillrag.errors import ArtifactError
    from skillrag.report.diff import flipped_questions
    from skillrag.report.inputs import load_inputs
    from skillrag.report.outcomes import outcome_frame
    from skillrag.report.tables import paired_table

    try:
        base = load_inputs(paths)
    except ArtifactError:
        return f"_No pipeline run to compare with: `{paths.metrics_detail}` is missing._"
    shared = [m for m in mine.methods if m in base.detail]
    before = outcome_frame(t for m in shared for t in base.all_traces(m))
    after = outcome_frame(t for m in shared for t in mine.all_traces(m))
    label = f"@{custom.custom}"
    made = paired_table(
        pd.concat([before, after.assign(method=after["method"] + label)]),
        [(m + label, m) for m in shared], mine.datasets([]), params.prepare.train_datasets,
    )
    if made is None:
        return "_The pipeline's run answered none of these questions with these methods._"
    table, _ = made
    changed = settings_changes(base.settings, mine.settings, shared)
    return (
        f"`METHOD{label}` is this run, `METHOD` the pipeline's (`{paths.runs.relative_to(paths.root)}`). Run settings that differ: "
        + (", ".join(f"`{key}` {old} → {new}" for key, (old, new) in changed.items()) or "none")
        + ".\n\n" + table + "\n\nQuestions whose strict ACC flipped (pipeline → this run):\n\n"
        + flipped_questions(before, after)
    )


def settings_changes(
    before: dict[str, dict[str, dict[str, Any]]], after: dict[str, dict[str, dict[str, Any]]], methods: list[str]
) -> dict[str, tuple[Any, Any]]:
    """param -> (pipeline's value, this run's) for each run parameter (the runner's settings
    sidecars) that differs for any of `methods` on a dataset both runs hold."""
    changed: dict[str, tuple[Any, Any]] = {}
    for method in methods:
        for dataset, mine in after.get(method, {}).items():
            theirs = before.get(method, {}).get(dataset, {}).get("params", {})
            for key, value in mine.get("params", {}).items():
                if key in theirs and theirs[key] != value:
                    changed.setdefault(key, (theirs[key], value))
    return changed


def read_questions(path: Path, max_chars: int) -> dict[str, list[Question]]:
    """dataset -> questions of a question file or of every `*.jsonl` under a directory; a bad row
    raises DataError naming file:line."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--questions {path}: no such file or directory")
    path = path.resolve()  # `questions.jsonl` in the working directory names its folder's dataset too
    files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
    found: dict[str, list[Question]] = {}
    for file in files:
        dataset = file.parent.name if file.name == "questions.jsonl" else file.stem
        if not DATASET_NAME.fullmatch(dataset):
            raise DataError(
                f"{file}: names dataset {dataset!r}; name the file <dataset>.jsonl or <dataset>/questions.jsonl "
                "with a dataset name of letters, digits, '_', '-' or '.' (not first)"
            )
        if dataset in found:
            raise DataError(f"{file}: a second file for dataset {dataset!r}")
        found[dataset] = [
            Question.from_dict({**row, "dataset": dataset, "split": "eval"}, where=f"{file}:{number}", max_chars=max_chars)
            for number, row in numbered_jsonl(file)
        ]
        if not found[dataset]:
            raise DataError(f"{file}: no questions")
    if not found:
        raise DataError(f"--questions {path}: no *.jsonl files")
    return found
