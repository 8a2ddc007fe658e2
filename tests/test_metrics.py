"""The answer metrics against a table whose expected values were worked out by hand from the
definitions of the official SQuAD v1.1 script (normalize_answer, exact_match_score, f1_score)
and HotpotQA's hotpot_evaluate_v1.py (F1 is 0 when either side normalises to yes / no /
noanswer and they differ), plus this project's rules: ACC matches whole tokens, an empty
prediction never scores, and the abstain answer never scores."""

from __future__ import annotations

import pytest

from skillrag.metrics import score_answer

ABSTAIN = "I cannot answer this question."

# prediction, golds, em, acc, acc_substring, f1
CASES = [
    ("Paris", ["Paris"], 1, 1, 1, 1.0),
    ("the Paris!", ["Paris"], 1, 1, 1, 1.0),  # article and punctuation dropped
    ("An apple, a pear", ["apple pear"], 1, 1, 1, 1.0),
    ("1952.", ["1952"], 1, 1, 1, 1.0),
    ("Eiffel-Tower", ["Eiffel Tower"], 0, 0, 0, 0.0),  # SQuAD deletes "-": "eiffeltower"
    ("Norway", ["no"], 0, 0, 1, 0.0),  # "no" inside "norway": only the substring rule credits it
    ("no", ["Norway"], 0, 0, 0, 0.0),
    ("Parisian", ["Paris"], 0, 0, 1, 0.0),
    ("Paris Hilton", ["paris"], 0, 1, 1, 2 / 3),  # P 1/2, R 1
    ("Robert Zemeckis", ["Zemeckis"], 0, 1, 1, 2 / 3),
    ("Chief Protocol", ["Chief of Protocol"], 0, 0, 0, 0.8),  # P 2/2, R 2/3: gold not contiguous
    ("chief of staff", ["Chief of Protocol"], 0, 0, 0, 2 / 3),  # P 2/3, R 2/3
    ("the the Paris Paris", ["Paris"], 0, 1, 1, 2 / 3),  # common counts min(2, 1) = 1: P 1/2, R 1
    ("She was Chief of Protocol", ["Chief of Protocol", "chief"], 0, 1, 1, 0.75),  # best gold: P 3/5, R 1
    ("chief", ["Chief of Protocol", "chief"], 1, 1, 1, 1.0),  # multi-gold: the best one counts
    ("yes", ["yes"], 1, 1, 1, 1.0),
    ("yes", ["no"], 0, 0, 0, 0.0),
    ("yes it is", ["yes"], 0, 1, 1, 0.0),  # HotpotQA: gold is "yes", prediction differs -> 0 (SQuAD: 0.5)
    ("noanswer", ["no answer"], 0, 0, 0, 0.0),  # HotpotQA special value, differs from "no answer"
    ("", ["Paris"], 0, 0, 0, 0.0),  # an empty prediction never scores
    ("", ["the"], 0, 0, 0, 0.0),  # ... even against a gold that normalises to "" (SQuAD EM says 1)
    ("The.", ["Paris"], 0, 0, 0, 0.0),  # normalises to ""
    (ABSTAIN, ["no"], 0, 0, 1, 0.0),  # "no" inside "cannot": without the abstain rule, substring credits it
]


@pytest.mark.parametrize(("prediction", "golds", "em", "acc", "acc_substring", "f1"), CASES)
def test_metric_table(prediction, golds, em, acc, acc_substring, f1):
    scores = score_answer(prediction, golds)
    assert scores == pytest.approx({"em": em, "acc": acc, "acc_substring": acc_substring, "f1": f1})


@pytest.mark.parametrize(
    "prediction", [ABSTAIN, "i cannot answer this question", "  I CANNOT answer this question!"]
)
def test_the_abstain_answer_never_scores(prediction):
    for golds in (["no"], ["I cannot answer this question."], ["answer"]):
        assert set(score_answer(prediction, golds, abstain=ABSTAIN).values()) == {0.0}


def test_other_answers_score_as_usual_when_an_abstain_answer_is_set():
    assert score_answer("Paris", ["Paris"], abstain=ABSTAIN)["em"] == 1.0
