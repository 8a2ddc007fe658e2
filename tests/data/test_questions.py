"""The prepare stage and the readers of its output: the question-length limit and undecodable input."""

from __future__ import annotations

import pytest

from skillrag.config import PrepareParams
from skillrag.data.corpus import read_corpus
from skillrag.data.questions import TOO_LONG, prepare_questions
from skillrag.data.sources import load_local
from skillrag.data.splits import load_split
from skillrag.files import DataError, read_jsonl, write_jsonl
from tests.conftest import make_bundle, write_rows

DATASETS = {"hotpotqa": 12, "nq": 12, "triviaqa": 12, "musique": 4, "2wiki": 4}


def _params(root, **kw) -> PrepareParams:
    return PrepareParams(local_dir=root, train_size=6, dev_size=9, eval_size=2, max_question_chars=100, **kw)


def test_prepare_leaves_out_too_long_questions_and_counts_them(tmp_path):
    root = make_bundle(tmp_path / "bundle", DATASETS)
    path = root / "musique" / "questions.jsonl"
    rows = list(read_jsonl(path))
    rows[0]["question"] = "why " * 200  # 800 characters
    rows[1]["question"] = "x" * 100  # exactly at the limit: kept
    write_rows(path, rows)
    counts = prepare_questions(_params(root), tmp_path / "questions")
    assert counts[TOO_LONG] == {"2wiki": 0, "hotpotqa": 0, "musique": 1, "nq": 0, "triviaqa": 0}
    written = [q for split in ("train", "dev", "eval") for qs in load_split(tmp_path / "questions", split).values() for q in qs]
    assert max(len(q.question) for q in written) <= 100
    assert "musique-0" not in {q.id for q in written}


def test_loading_a_split_refuses_a_too_long_question_naming_file_and_line(tmp_path):
    out = tmp_path / "questions"
    prepare_questions(_params(make_bundle(tmp_path / "bundle", DATASETS)), out)
    path = out / "eval" / "nq.jsonl"
    rows = list(read_jsonl(path))
    rows[1]["question"] = "a" * 5000
    write_jsonl(path, rows)
    assert len(load_split(out, "eval")["nq"]) == 2  # readers that only need ids do not check
    with pytest.raises(DataError, match=r"eval/nq\.jsonl:2: question '[^']+' has 5,000 characters, over prepare\.max_question_chars=100"):
        load_split(out, "eval", max_question_chars=100)


def test_non_utf8_questions_name_file_and_line(tmp_path):
    path = write_rows(tmp_path / "nq" / "questions.jsonl", [{"id": "a", "question": "q?", "answers": ["x"], "orig_split": "dev"}])
    with path.open("ab") as handle:
        handle.write(b'{"id": "b", "question": "caf\xe9?", "answers": ["y"], "orig_split": "dev"}\n')
    with pytest.raises(DataError, match=r"nq/questions\.jsonl:2: not UTF-8 \(byte 0xe9"):
        load_local(tmp_path, "nq")


def test_non_utf8_corpus_names_file_and_line(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_bytes(b'{"id": "p1", "title": "A", "text": "fine"}\n\n{"id": "p2", "title": "B", "text": "\xff\xfe"}\n')
    with pytest.raises(DataError, match=r"passages\.jsonl:3: not UTF-8 \(byte 0xff at byte 37\)"):
        list(read_corpus(path))
