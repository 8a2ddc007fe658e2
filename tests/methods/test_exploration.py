"""What a method's own first retry does to right and wrong single-step answers, read from its traces."""

import pytest

from skillrag.methods.exploration import retry_rates
from skillrag.methods.trace import Cost, Round, Trace


def right(answer: str, golds) -> bool:
    return answer in golds


def _trace(first: str, retry: tuple[str, str] | None, final: str, termination: str = "done", calls: int = 2) -> Trace:
    rounds = [Round(0, "retrieval", first, queries=["q"], cost=Cost(llm_calls=1))]
    if retry is not None:
        rounds.append(Round(1, retry[0], retry[1], queries=["r"], cost=Cost(llm_calls=calls)))
    trace = Trace("q", "nq", "?", ["1952"], "first_retry", rounds, answer=final, termination=termination)
    trace.totals = sum((r.cost for r in rounds), Cost())
    return trace


def test_retry_rates_score_the_answer_after_the_methods_retry_by_the_single_step_verdict():
    traces = [
        _trace("no", ("question_decomposition", "1952"), "1952"),  # wrong -> right
        _trace("no", ("evidence_focusing", "no"), "no"),  # wrong -> wrong
        _trace("no", ("exit", "no"), "no", termination="exit", calls=1),  # the router stopped: the answer stays
        _trace("1952", ("exit", "1952"), "1952", termination="exit", calls=1),  # right -> right
        _trace("1952", ("evidence_focusing", "no"), "no"),  # right -> wrong
        _trace("1952", ("evidence_focusing", "no"), "", termination="error"),  # ignored
    ]
    rates = retry_rates(traces, right)
    assert rates["after_wrong"] == {"n": 3, "right": 1, "rate": pytest.approx(1 / 3)}
    assert rates["after_right"] == {"n": 2, "right": 1, "rate": 0.5}
    assert rates["llm_calls"] == pytest.approx(8 / 5)
    assert rates["choices"] == {"evidence_focusing": 2, "exit": 2, "question_decomposition": 1}
    assert rates["terminations"] == {"done": 3, "exit": 2}


def test_without_right_single_step_answers_their_rate_is_unknown():
    rates = retry_rates([_trace("no", ("requery", "no"), "no")], right)
    assert rates["after_right"] == {"n": 0, "right": 0, "rate": None}
