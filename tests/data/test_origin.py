"""Evaluation questions come only from each dataset's original dev/test split."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from skillrag.config import PrepareParams
from skillrag.data.origin import origin_side
from skillrag.data.sampling import make_splits
from skillrag.data.sources import load_dataset_questions, load_local
from skillrag.files import DataError
from tests.conftest import ALL, make_origin_bundle, write_rows


@pytest.mark.parametrize(
    ("dataset", "orig_split", "side"),
    [
        ("hotpotqa", "dev", "eval"),
        ("hotpotqa", "train", "train"),
        ("nq", "nq-open dev (NQ dev; = DPR 'test')", "eval"),
        ("nq", "DPR nq-dev (held out of NQ train)", "train"),
        ("triviaqa", "DPR trivia-test (= TriviaQA unfiltered dev)", "eval"),
        ("triviaqa", "DPR trivia-dev (held out of TriviaQA train)", "train"),
        ("triviaqa", "TriviaQA (RetrievalQA subset)", "eval"),
        ("nq", "FlashRAG dev", "train"),
        ("nq", "FlashRAG test", "eval"),
        ("triviaqa", "FlashRAG dev", "train"),
        ("hotpotqa", "FlashRAG dev", "eval"),
        ("2wiki", "FlashRAG train", "train"),
    ],
)
def test_each_known_orig_split_has_a_side(dataset, orig_split, side):
    assert origin_side(dataset, orig_split) == side


def test_an_unknown_or_missing_orig_split_is_an_error_naming_it():
    with pytest.raises(DataError, match=r"q\.jsonl:3: unknown orig_split 'validation' for musique"):
        origin_side("musique", "validation", "q.jsonl:3")
    with pytest.raises(DataError, match="FlashRAG test"):
        origin_side("hotpotqa", "FlashRAG test")  # FlashRAG's HotpotQA has no test split
    with pytest.raises(DataError, match="no orig_split"):
        origin_side("nq", None)


def test_loading_a_bundle_with_an_unknown_orig_split_names_file_and_line(tmp_path):
    write_rows(
        tmp_path / "nq" / "questions.jsonl",
        [
            {"id": "a", "question": "q1?", "answers": ["x"], "orig_split": "dev"},
            {"id": "b", "question": "q2?", "answers": ["y"], "orig_split": "validation"},
        ],
    )
    with pytest.raises(DataError, match=r"nq/questions\.jsonl:2: unknown orig_split 'validation'"):
        load_local(tmp_path, "nq")


def _sides(questions):
    return {origin_side(q.dataset, q.meta["orig_split"]) for q in questions}


def test_eval_never_draws_from_a_train_split_and_pools_prefer_train(tmp_path):
    root = make_origin_bundle(tmp_path, n_train=10, n_dev=12)
    params = PrepareParams(train_size=15, dev_size=6, eval_size=8, seed=3)
    splits = make_splits({d: load_local(root, d) for d in ALL}, params)
    assert all(_sides(qs) == {"eval"} for qs in splits["eval"].values())
    # 2 dev + 5 train per in-domain dataset: all 7 fit in the 10 original-train questions.
    for dataset in ("hotpotqa", "nq", "triviaqa"):
        assert _sides(splits["dev"][dataset] + splits["train"][dataset]) == {"train"}


def test_prober_pools_take_leftover_dev_questions_when_train_runs_out(tmp_path):
    root = make_origin_bundle(tmp_path, n_train=2, n_dev=16)
    params = PrepareParams(train_size=15, dev_size=6, eval_size=8, seed=3)
    splits = make_splits({d: load_local(root, d) for d in ALL}, params)
    pools = splits["dev"]["nq"] + splits["train"]["nq"]
    assert sum(origin_side(q.dataset, q.meta["orig_split"]) == "train" for q in pools) == 2  # both used
    assert not {q.id for q in pools} & {q.id for q in splits["eval"]["nq"]}


def test_too_few_dev_test_questions_for_eval_is_a_clear_error(tmp_path):
    root = make_origin_bundle(tmp_path, n_train=40, n_dev=3)
    with pytest.raises(ValueError, match=r"only 3 unused questions from its original dev/test split for eval \(need 4\): lower prepare\.eval_size"):
        make_splits({d: load_local(root, d) for d in ALL}, PrepareParams(train_size=3, dev_size=3, eval_size=4))


def test_hub_splits_map_like_flashrag(monkeypatch):
    """FlashRAG's NQ `dev` is carved out of NQ train: only its `test` may be evaluated on."""
    def fake_load_dataset(hub_id, config):
        def split(name, n):
            return datasets.Dataset.from_dict(
                {"id": [f"{name}{i}" for i in range(n)], "question": [f"{name} q{i}?" for i in range(n)], "golden_answers": [["a"]] * n}
            )
        return datasets.DatasetDict({"train": split("train", 6), "dev": split("dev", 6), "test": split("test", 4)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    questions = {"nq": load_dataset_questions("hub", "nq", Path("unused"), "x/y")}
    params = PrepareParams(train_datasets=["nq"], eval_datasets=["nq"], train_size=4, dev_size=2, eval_size=4)
    splits = make_splits(questions, params)
    assert {q.meta["orig_split"] for q in splits["eval"]["nq"]} == {"FlashRAG test"}
    with pytest.raises(ValueError, match="original dev/test split"):
        make_splits(questions, params.model_copy(update={"eval_size": 5}))


@pytest.mark.parametrize(
    "sizes", [{}, {"train_size": 3000, "dev_size": 500, "eval_size": 500}], ids=["default", "paper"]
)
def test_real_bundle_eval_sets_come_from_dev_test_splits_only(shared_data, sizes):
    questions = {d: load_local(shared_data, d) for d in ALL}  # every orig_split value is classified
    splits = make_splits(questions, PrepareParams(local_dir=shared_data, **sizes))
    assert all(_sides(qs) == {"eval"} for qs in splits["eval"].values())
    assert _sides(splits["train"]["nq"]) == {"train"}  # 1,397 original-train NQ questions cover the pool
