"""What a retry does to right and wrong single-step answers, read from exploration traces."""

import pytest

from skillrag.methods.exploration import retry_rates
from skillrag.methods.trace import Cost, Round, Trace


def right(answer: str, golds) -> bool:
    return answer in golds


def _trace(first: str, retries: list[tuple[str, str, list[str]]], termination: str = "done") -> Trace:
    rounds = [Round(0, "retrieval", first, queries=["q"])]
    rounds += [Round(i, stage, answer, queries=queries, cost=Cost(llm_calls=2)) for i, (stage, answer, queries) in enumerate(retries, 1)]
    return Trace("q", "nq", "?", ["1952"], "skill_exploration", rounds, termination=termination)


def test_retry_rates_count_the_first_query_round_by_the_single_step_verdict():
    traces = [
        _trace("no", [("query_rewriting", "1952", ["a"])]),  # wrong -> right
        _trace("no", [("query_rewriting", "no", ["a"]), ("question_decomposition", "1952", ["b"])]),  # wrong -> wrong first
        _trace("no", [("query_rewriting", "1952", []), ("question_decomposition", "no", ["b"])]),  # no query: the next is the retry
        _trace("1952", [("query_rewriting", "1952", ["a"])]),  # right -> right
        _trace("1952", [("query_rewriting", "no", ["a"])]),  # right -> wrong
        _trace("1952", [("query_rewriting", "no", ["a"])], termination="error"),  # ignored
    ]
    rates = retry_rates(traces, right)
    assert rates["after_wrong"] == {"n": 3, "right": 1, "rate": pytest.approx(1 / 3)}
    assert rates["after_right"] == {"n": 2, "right": 1, "rate": 0.5}
    assert rates["llm_calls"] == 2.0


def test_without_right_single_step_answers_their_rate_is_unknown():
    rates = retry_rates([_trace("no", [("query_rewriting", "no", ["a"])])], right)
    assert rates["after_right"] == {"n": 0, "right": 0, "rate": None}
