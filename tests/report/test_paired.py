"""Paired tests on constructed outcome lists with known answers, and the report's table."""

from __future__ import annotations

import pytest

from skillrag.report.outcomes import outcome_frame
from skillrag.report.paired import (
    INDISTINGUISHABLE,
    aligned,
    comparisons,
    one_sided_p,
    paired,
    reading,
    scopes,
)
from skillrag.report.tables import paired_table


def test_ten_wins_and_no_loss_give_the_exact_mcnemar_p():
    test = paired([1] * 10 + [0] * 20, [0] * 30)
    assert (test.won, test.lost, test.n) == (10, 0, 30)
    assert test.p_value == pytest.approx(2 * 0.5**10)  # ~0.002
    assert test.difference == pytest.approx(1 / 3) and 0 < test.low < 1 / 3 < test.high
    assert reading(test, "a", "b", test.p_value) == "a higher"
    assert reading(paired([0] * 30, [1] * 10 + [0] * 20), "a", "b", 0.002) == "b higher"


def test_identical_lists_give_a_zero_interval_and_p_one():
    test = paired([1, 0, 1, 1, 0], [1, 0, 1, 1, 0])
    assert (test.difference, test.low, test.high, test.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert reading(test, "a", "b", test.p_value) == INDISTINGUISHABLE


def test_balanced_changes_are_not_distinguishable_and_the_interval_is_seeded():
    first, second = [1, 0] * 10, [0, 1] * 10
    test = paired(first, second)
    assert test.low < 0 < test.high and reading(test, "a", "b", test.p_value) == INDISTINGUISHABLE
    assert paired(first, second) == test


def test_the_reading_rests_on_the_adjusted_p_not_on_the_interval():
    """Five wins and no loss in 30: the bootstrap interval leaves out 0, but the exact McNemar p
    is 2 * 0.5**5 = 0.0625, so no method is called higher; a p adjusted past 0.05 neither."""
    test = paired([1] * 5 + [0] * 25, [0] * 30)
    assert test.distinguishable and test.p_value == pytest.approx(0.0625)
    assert reading(test, "a", "b", test.p_value) == INDISTINGUISHABLE
    strong = paired([1] * 12 + [0] * 18, [0] * 30)
    assert reading(strong, "a", "b", strong.p_value) == "a higher"
    assert reading(strong, "a", "b", 0.06) == INDISTINGUISHABLE  # e.g. after Holm over many tests


def test_one_sided_p_counts_only_changes_for_the_worse():
    assert one_sided_p(10, 0) == pytest.approx(0.5**10)
    assert one_sided_p(0, 10) == 1.0 and one_sided_p(1, 0) == 0.5 and one_sided_p(0, 0) == 1.0


def test_unequal_or_non_binary_lists_are_refused():
    with pytest.raises(ValueError, match="one length"):
        paired([1, 0], [1])
    with pytest.raises(ValueError, match="0/1"):
        paired([0.5], [1])


def _trace(method: str, dataset: str, index: int, acc: int) -> dict:
    return {"method": method, "dataset": dataset, "question_id": f"{dataset}-{index}", "question": "q", "answer": "a",
            "termination": "done", "totals": {"llm_calls": 1, "retrievals": 0},
            "scores": {"acc": acc, "em": acc, "f1": acc}}


def test_aligned_pairs_by_question_not_by_position():
    first = outcome_frame([_trace("a", "nq", i, int(i == 2)) for i in range(3)])
    second = outcome_frame([_trace("b", "nq", i, int(i == 2)) for i in reversed(range(4))])
    left, right = aligned(first, second, "acc")
    assert left.tolist() == right.tolist() == [0, 0, 1]


def test_scopes_add_the_pools_that_differ_from_a_dataset():
    assert scopes(["hotpotqa", "nq", "musique"], ["hotpotqa", "nq"]) == [
        ("hotpotqa", ["hotpotqa"]), ("nq", ["nq"]), ("musique", ["musique"]),
        ("in-domain", ["hotpotqa", "nq"]), ("overall", ["hotpotqa", "nq", "musique"]),
    ]


def test_comparisons_are_each_method_against_single_step_and_skill_rag_against_probing_rag():
    assert comparisons(["no_retrieval", "single_step", "probing_rag", "skill_rag"]) == [
        ("no_retrieval", "single_step"), ("probing_rag", "single_step"), ("skill_rag", "single_step"),
        ("skill_rag", "probing_rag"),
    ]
    assert comparisons(["ircot"]) == []


def test_the_table_counts_its_tests_and_reads_a_clear_win():
    traces = [_trace("x", d, i, 1) for d in ("nq", "musique") for i in range(12)]
    traces += [_trace("y", d, i, int(d == "nq" and i < 10)) for d in ("nq", "musique") for i in range(12)]
    table, tests = paired_table(outcome_frame(traces), [("x", "y")], ["nq", "musique"], ["nq"])
    assert tests == 3  # nq, musique, overall (in-domain = nq, OOD = musique)
    rows = {line.split(" | ")[1]: line for line in table.splitlines()[2:]}
    assert set(rows) == {"nq", "musique", "overall"}
    assert INDISTINGUISHABLE in rows["nq"] and "| 2 | 0 |" in rows["nq"]
    assert "x higher" in rows["musique"] and "| 12 | 0 |" in rows["musique"]
    assert f"Holm p ({tests} tests)" in table
