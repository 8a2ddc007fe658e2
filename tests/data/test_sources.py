from pathlib import Path

import datasets
import pytest

from skillrag.data import sources
from skillrag.data.sources import load_dataset_questions, load_local
from skillrag.files import DataError
from tests.conftest import make_bundle, write_rows


def test_local_loader_reads_the_shared_bundle(shared_data):
    questions = load_local(shared_data, "musique")
    assert len(questions) == 1000
    first = questions[0]
    assert first.dataset == "musique" and first.answers and first.question
    assert "orig_split" in first.meta


def test_local_loader_errors_name_file_and_line(tmp_path):
    path = write_rows(tmp_path / "nq" / "questions.jsonl", [{"id": "a", "question": "q?", "answers": ["x"], "orig_split": "dev"}])
    with path.open("a") as handle:
        handle.write('{"id": "b", "question": "q2?", "answers": [], "orig_split": "dev"}\n')
    with pytest.raises(DataError, match=r"questions\.jsonl:2: question 'b' has no answers"):
        load_local(tmp_path, "nq")
    path.write_text('{"id": "a", "question": "q?", "answers": ["x"], "orig_split": "dev"}\n{broken\n')
    with pytest.raises(DataError, match=r"questions\.jsonl:2: malformed JSON"):
        load_local(tmp_path, "nq")


def test_hub_loader_maps_flashrag_schema(monkeypatch):
    """The network boundary (datasets.load_dataset) is faked with a real in-memory DatasetDict."""
    calls = []

    def fake_load_dataset(hub_id, config):
        calls.append((hub_id, config))
        rows = {"id": ["1", "2"], "question": ["Who?", "What?"], "golden_answers": [["A", "a2"], ["B"]]}
        return datasets.DatasetDict({"dev": datasets.Dataset.from_dict(rows)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    questions = load_dataset_questions("hub", "2wiki", Path("unused"), "RUC-NLPIR/FlashRAG_datasets")
    assert calls == [("RUC-NLPIR/FlashRAG_datasets", "2wikimultihopqa")]
    assert [q.id for q in questions] == ["2wiki-1", "2wiki-2"]
    assert questions[0].answers == ["A", "a2"] and questions[0].meta["orig_split"] == "FlashRAG dev"


def test_hub_rows_without_answers_are_rejected(monkeypatch):
    rows = {"id": ["1"], "question": ["Who?"], "golden_answers": [[]]}
    monkeypatch.setattr(datasets, "load_dataset", lambda *_: datasets.DatasetDict({"dev": datasets.Dataset.from_dict(rows)}))
    with pytest.raises(DataError, match="has no answers"):
        sources.load_hub("x/y", "nq")


def test_unknown_source_is_rejected(tmp_path):
    make_bundle(tmp_path, {"nq": 2})
    with pytest.raises(ValueError, match="unknown question source"):
        load_dataset_questions("s3", "nq", tmp_path, "x")
