"""A question row is read as written or refused in one line naming where: a null or mistyped field
is never turned into the text "None" or a traceback."""

from __future__ import annotations

import pytest

from skillrag.data.schema import Question
from skillrag.files import DataError

ROW = {"id": "q1", "dataset": "nq", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"]}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"question": None}, "the question must be a string, got null"),
        ({"question": 42}, "the question must be a string, got a int"),
        ({"answers": [None]}, "answers must be a list of strings, got a list holding null"),
        ({"answers": "Shakespeare"}, "answers must be a list of strings, got a string"),
        ({"answers": [["a"]]}, "answers must be a list of strings, got a list holding an? "),
        ({"meta": "oops"}, "meta must be an object, got a string"),
        ({"meta": None}, "meta must be an object, got null"),
        ({"id": None}, "id must be a non-empty string, got None"),
        ({"id": ""}, "id must be a non-empty string"),
    ],
    ids=["null-question", "number-question", "null-answer", "answers-a-string", "nested-answers", "meta-a-string",
         "null-meta", "null-id", "empty-id"],
)
def test_a_null_or_mistyped_field_is_refused_naming_the_row(change, message):
    with pytest.raises(DataError, match=rf"^mine\.jsonl:3: .*{message}"):
        Question.from_dict({**ROW, **change}, where="mine.jsonl:3")


def test_numbers_among_the_answers_are_read_as_text():
    question = Question.from_dict({**ROW, "answers": [1603, "1603 AD"], "meta": {"source": "x"}})
    assert question.answers == ["1603", "1603 AD"] and question.meta == {"source": "x"}
