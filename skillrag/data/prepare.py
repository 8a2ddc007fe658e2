"""Stage `prepare`: load the datasets, sample the splits, write one JSONL per (split, dataset)."""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from skillrag.config import PrepareParams
from skillrag.data.sampling import SPLITS, make_splits
from skillrag.data.schema import Question
from skillrag.data.sources import load_dataset_questions
from skillrag.files import atomic_path, read_jsonl, write_jsonl


def prepare_questions(params: PrepareParams, out_dir: Path) -> dict[str, dict[str, int]]:
    """Write `<out_dir>/<split>/<dataset>.jsonl` (the whole folder atomically); returns the counts."""
    needed = sorted(set(params.train_datasets) | set(params.eval_datasets))
    questions = {
        dataset: load_dataset_questions(params.source, dataset, params.local_dir, params.hub_id)
        for dataset in tqdm(needed, desc="load datasets", unit="dataset")
    }
    splits = make_splits(questions, params)
    with atomic_path(out_dir) as tmp:
        for split, by_dataset in splits.items():
            for dataset, chosen in by_dataset.items():
                write_jsonl(tmp / split / f"{dataset}.jsonl", (q.to_dict() for q in chosen))
    return {split: {d: len(qs) for d, qs in by_dataset.items()} for split, by_dataset in splits.items()}


def load_split(questions_dir: Path, split: str) -> dict[str, list[Question]]:
    """dataset -> questions of one written split (what later stages read)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (one of {', '.join(SPLITS)})")
    folder = Path(questions_dir) / split
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist: run `skillrag prepare` (or `dvc repro prepare`) first")
    return {
        path.stem: [Question.from_dict(row, where=str(path)) for row in read_jsonl(path)]
        for path in sorted(folder.glob("*.jsonl"))
    }
