"""The questions the pipeline runs on: load the datasets, sample the splits, write one JSONL per
(split, dataset) (what stage `prepare` runs, skillrag.pipeline.stages.prepare)."""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from skillrag.config import PrepareParams
from skillrag.data.sampling import make_splits
from skillrag.data.sources import load_dataset_questions
from skillrag.files import atomic_path, write_jsonl

TOO_LONG = "too long"


def prepare_questions(params: PrepareParams, out_dir: Path) -> dict[str, dict[str, int]]:
    """Write `<out_dir>/<split>/<dataset>.jsonl` (the whole folder atomically).

    Questions longer than `max_question_chars` are left out before sampling: a dataset row that
    long is no question a model can answer, and one such row must not stop the stage. Returns
    split -> dataset -> count, plus "too long" -> dataset -> how many were left out.
    """
    needed = sorted(set(params.train_datasets) | set(params.eval_datasets))
    loaded = {
        dataset: load_dataset_questions(params.source, dataset, params.local_dir, params.hub_id)
        for dataset in tqdm(needed, desc="load datasets", unit="dataset")
    }
    questions = {d: [q for q in qs if len(q.question) <= params.max_question_chars] for d, qs in loaded.items()}
    splits = make_splits(questions, params)
    with atomic_path(out_dir) as tmp:
        for split, by_dataset in splits.items():
            for dataset, chosen in by_dataset.items():
                write_jsonl(tmp / split / f"{dataset}.jsonl", (q.to_dict() for q in chosen))
    counts = {split: {d: len(qs) for d, qs in by_dataset.items()} for split, by_dataset in splits.items()}
    return {**counts, TOO_LONG: {d: len(loaded[d]) - len(questions[d]) for d in needed}}
