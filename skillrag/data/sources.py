"""Load the five QA datasets into `Question`s, from a local JSONL bundle or the Hugging Face hub.

Local: `<dir>/<dataset>/questions.jsonl` in the schema of the shared data bundle (its README).
Hub: FlashRAG's benchmark collection, which serves all five datasets in one schema
(`id`, `question`, `golden_answers`); needs network access to the hub.

Every question's `orig_split` is checked against `skillrag.data.origin` as it is loaded, so an
unclassified split stops `prepare` with the file and line (or hub row) at fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillrag.data.origin import origin_side
from skillrag.data.schema import Question
from skillrag.errors import ConfigError
from skillrag.files import numbered_jsonl

# Fields of the local bundle kept in Question.meta: provenance and evidence availability.
LOCAL_META = (
    "orig_id",
    "orig_split",
    "type",
    "supporting_titles",
    "gold_passage_ids",
    "gold_context_in_corpus",
    "answer_in_corpus",
)

# FlashRAG_datasets config name of each dataset.
HUB_CONFIGS = {
    "hotpotqa": "hotpotqa",
    "nq": "nq",
    "triviaqa": "triviaqa",
    "musique": "musique",
    "2wiki": "2wikimultihopqa",
}


def load_local(root: str | Path, dataset: str) -> list[Question]:
    """Questions of one dataset from `<root>/<dataset>/questions.jsonl`; bad rows name file:line."""
    path = Path(root) / dataset / "questions.jsonl"
    questions = []
    for number, row in numbered_jsonl(path):
        where = f"{path}:{number}"
        origin_side(dataset, row.get("orig_split"), where)
        meta = {key: row[key] for key in LOCAL_META if key in row}
        questions.append(Question.from_dict({**row, "dataset": dataset, "meta": meta}, where=where))
    return questions


def load_hub(hub_id: str, dataset: str) -> list[Question]:
    """All splits of one dataset from the hub (datasets.load_dataset); `orig_split` in meta is
    "FlashRAG <split>", since FlashRAG's split names do not mean the same for every dataset."""
    import datasets  # deferred: importing `datasets` costs seconds and is only needed here

    config = HUB_CONFIGS[dataset]
    splits = datasets.load_dataset(hub_id, config)
    questions = []
    for split_name, split in splits.items():
        for number, row in enumerate(split):
            questions.append(_from_hub_row(row, dataset, split_name, f"{hub_id}/{config}/{split_name}[{number}]"))
    return questions


def _from_hub_row(row: dict[str, Any], dataset: str, split: str, where: str) -> Question:
    orig_split = f"FlashRAG {split}"
    origin_side(dataset, orig_split, where)
    return Question.from_dict(
        {
            "id": f"{dataset}-{row['id']}",
            "dataset": dataset,
            "question": row["question"],
            "answers": list(row.get("golden_answers") or []),
            "meta": {"orig_id": str(row["id"]), "orig_split": orig_split},
        },
        where=where,
    )


def load_dataset_questions(source: str, dataset: str, local_dir: Path, hub_id: str) -> list[Question]:
    if source == "local":
        return load_local(local_dir, dataset)
    if source == "hub":
        return load_hub(hub_id, dataset)
    raise ConfigError(f"unknown question source {source!r} (use 'local' or 'hub')")
