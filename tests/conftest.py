"""Shared fixtures: the shared data bundle beside the checkout, small question sets, and a
temporary Prefect server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillrag.env import apply_offline_defaults

apply_offline_defaults()

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def prefect_server():
    """A temporary Prefect server (SQLite) for the test. Its start is waited for up to five minutes:
    on a loaded two-core CI machine the harness's own 30 s ran out (stop 36's CI)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=300):
        yield


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "corpus" / "passages.jsonl").exists():
        pytest.fail(f"the shared data bundle is missing at {SHARED_DATA}")
    return SHARED_DATA


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ALL = ["hotpotqa", "nq", "triviaqa", "musique", "2wiki"]  # the bundle's datasets


def make_origin_bundle(root: Path, n_train: int, n_dev: int) -> Path:
    """Each dataset: `n_train` questions from its original train split, `n_dev` from dev."""
    for dataset in ALL:
        rows = [
            {"id": f"{dataset}-{split}-{i}", "question": f"{split} question {i} of {dataset}?", "answers": ["a"], "orig_split": split}
            for split, n in (("train", n_train), ("dev", n_dev))
            for i in range(n)
        ]
        write_rows(root / dataset / "questions.jsonl", rows)
    return root


def make_bundle(root: Path, datasets: dict[str, int]) -> Path:
    """A local bundle in the shared-data schema with `n` questions per dataset."""
    for dataset, n in datasets.items():
        rows = [
            {
                "id": f"{dataset}-{i}",
                "question": f"What is item {i} of {dataset}?",
                "answers": [f"answer {i}"],
                "dataset": dataset,
                "orig_split": "dev",
                "gold_context_in_corpus": i % 3 == 0,
            }
            for i in range(n)
        ]
        write_rows(root / dataset / "questions.jsonl", rows)
    return root
