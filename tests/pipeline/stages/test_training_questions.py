from skillrag.data.schema import Question
from skillrag.pipeline.stages.training_questions import round_robin


def _questions(dataset: str, n: int) -> list[Question]:
    # ids out of order: the selection sorts each dataset by id itself
    return [Question(f"{dataset}-{i}", dataset, f"question {i}?", ["a"], "train") for i in reversed(range(n))]


def test_round_robin_takes_every_dataset_in_turn_not_the_first_ids():
    by_dataset = {"triviaqa": _questions("triviaqa", 5), "hotpotqa": _questions("hotpotqa", 5), "nq": _questions("nq", 5)}

    chosen = round_robin(by_dataset, 7)

    assert [q.id for q in chosen] == [
        "hotpotqa-0", "nq-0", "triviaqa-0", "hotpotqa-1", "nq-1", "triviaqa-1", "hotpotqa-2",
    ]


def test_round_robin_fills_from_the_larger_datasets_once_one_runs_out():
    chosen = round_robin({"a": _questions("a", 1), "b": _questions("b", 3)}, 10)

    assert [q.id for q in chosen] == ["a-0", "b-0", "b-1", "b-2"]
