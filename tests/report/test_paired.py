"""Paired tests on constructed outcome lists with known answers, and the report's table."""

from __future__ import annotations

import pytest

from skillrag.report.outcomes import outcome_frame
from skillrag.report.paired import (
    INDISTINGUISHABLE,
    Planned,
    aligned,
    one_sided_p,
    paired,
    paired_interval,
    planned_tests,
    reading,
    run_tests,
    scopes,
    wilson,
)
from skillrag.report.tables import paired_table


def test_ten_wins_and_no_loss_give_the_exact_mcnemar_p():
    test = paired([1] * 10 + [0] * 20, [0] * 30)
    assert (test.won, test.lost, test.n) == (10, 0, 30)
    assert test.p_value == pytest.approx(2 * 0.5**10)  # ~0.002
    assert test.difference == pytest.approx(1 / 3) and 0 < test.low < 1 / 3 < test.high
    assert reading(test, "a", "b", test.p_value) == "a higher"
    assert reading(paired([0] * 30, [1] * 10 + [0] * 20), "a", "b", 0.002) == "b higher"


def test_identical_lists_still_get_an_interval_that_says_how_far_the_difference_could_be():
    """No discordant question: a percentile bootstrap gives "+0.0 (+0.0 to +0.0)"; the
    Agresti-Min interval stays about +-1.96 / (n + 2) wide around 0."""
    test = paired([1, 0, 1, 1, 0] * 6, [1, 0, 1, 1, 0] * 6)
    assert (test.difference, test.p_value) == (0.0, 1.0)
    assert test.low == pytest.approx(-1.96 / 32, abs=1e-3) and test.high == pytest.approx(1.96 / 32, abs=1e-3)
    assert not test.distinguishable and reading(test, "a", "b", test.p_value) == INDISTINGUISHABLE


def test_the_paired_interval_is_agresti_min_and_stays_inside_minus_one_to_one():
    # Agresti & Min (2005): 1/2 added to each cell; 10 won, 2 lost of 50 -> (10.5 - 2.5) / 52 +- 1.96 * se
    low, high = paired_interval(10, 2, 50)
    centre, se = 8 / 52, (13 - 64 / 52) ** 0.5 / 52
    assert (low, high) == pytest.approx((centre - 1.959964 * se, centre + 1.959964 * se), abs=1e-5)
    assert paired_interval(5, 0, 5)[1] == 1.0 and paired_interval(0, 5, 5)[0] == -1.0


def test_a_share_of_none_or_all_right_keeps_a_wilson_interval():
    assert wilson(0, 30)[0] == 0.0 and wilson(0, 30)[1] == pytest.approx(0.1135, abs=1e-4)
    assert wilson(30, 30)[1] == pytest.approx(1.0) and wilson(30, 30)[0] == pytest.approx(0.8865, abs=1e-4)


def test_balanced_changes_are_not_distinguishable():
    test = paired([1, 0] * 10, [0, 1] * 10)
    assert test.low < 0 < test.high and reading(test, "a", "b", test.p_value) == INDISTINGUISHABLE


def test_the_reading_rests_on_the_adjusted_p_not_on_the_interval():
    """Five wins and no loss in 30: the interval leaves out 0, but the exact McNemar p
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


def test_the_primary_family_is_as_named_and_the_rest_pairs_the_studied_method_with_every_method():
    named = [Planned("skill_rag", "probing_rag", "overall"), Planned("skill_rag", "ircot", "overall")]
    primary, rest = planned_tests(["no_retrieval", "single_step", "probing_rag", "skill_rag"], named, "skill_rag",
                                  pools=("overall",))
    assert primary == [Planned("skill_rag", "probing_rag", "overall")]  # ircot was not evaluated
    assert rest == [Planned("skill_rag", "no_retrieval", "overall"), Planned("skill_rag", "single_step", "overall"),
                    Planned("no_retrieval", "single_step", "overall"), Planned("probing_rag", "single_step", "overall")]
    assert planned_tests(["ircot"], named, "skill_rag") == ([], [])


def test_run_tests_reads_each_pool_even_when_it_is_one_dataset():
    traces = [_trace(m, d, i, int(m == "x")) for m in ("x", "y") for d in ("nq", "musique") for i in range(4)]
    results = run_tests(outcome_frame(traces), [Planned("x", "y", s) for s in ("in-domain", "OOD", "overall", "2wiki")],
                        ["nq", "musique"], ["nq"])
    assert [(r.planned.scope, r.test.n, r.test.won, r.first_mean, r.second_mean) for r in results] == [
        ("in-domain", 4, 4, 1.0, 0.0), ("OOD", 4, 4, 1.0, 0.0), ("overall", 8, 8, 1.0, 0.0)]


def test_the_table_counts_its_tests_and_reads_a_clear_win():
    traces = [_trace("x", d, i, 1) for d in ("nq", "musique") for i in range(12)]
    traces += [_trace("y", d, i, int(d == "nq" and i < 10)) for d in ("nq", "musique") for i in range(12)]
    table, tests = paired_table(outcome_frame(traces), [("x", "y")], ["nq", "musique"], ["nq"])
    assert tests == 3  # nq, musique, overall (in-domain = nq, OOD = musique)
    rows = {line.split(" | ")[1]: line for line in table.splitlines()[2:]}
    assert set(rows) == {"nq", "musique", "overall"}
    assert INDISTINGUISHABLE in rows["nq"] and "| 2 | 0 |" in rows["nq"]
    assert "x higher" in rows["musique"] and "| 12 | 0 |" in rows["musique"]
    assert f"all ({tests})" in table and "Holm p in family" in table
