"""Per-question scores, bootstrap intervals and the headline / detail summaries."""

from __future__ import annotations

import numpy as np
import pytest

from skillrag.data.schema import Question
from skillrag.eval.runner import read_traces, run_method
from skillrag.eval.scoring import HEADLINE, bootstrap_interval, headline, score_trace, summarize
from skillrag.methods import Components, Cost, Round, Trace, build_method
from tests.fakes import CORPUS, FakeLM, OverlapRetriever

ABSTAIN = "I cannot answer this question."


def trace(
    answer: str, flexible: str = "", budget_hits: tuple[bool, ...] = (False,), golds=("Paris",)
) -> Trace:
    rounds = [Round(i, "no_retrieval", answer, budget_hit=hit) for i, hit in enumerate(budget_hits)]
    return Trace(
        "q",
        "nq",
        "Where?",
        list(golds),
        "no_retrieval",
        rounds,
        answer,
        "done",
        totals=Cost(len(rounds), 100, 10, 0, 1.0),
        flexible_answer=flexible or answer,
    )


def test_score_trace_scores_the_strict_and_the_flexible_answer():
    scores = score_trace(trace("", flexible="It is Paris."), ABSTAIN)
    assert scores == pytest.approx(
        {
            "em": 0,
            "acc": 0,
            "acc_substring": 0,
            "f1": 0,
            "flexible_em": 0,
            "flexible_acc": 1,
            "flexible_f1": 0.5,
        }
    )  # flexible F1: P 1/3, R 1
    assert set(score_trace(trace(ABSTAIN, golds=("no",)), ABSTAIN).values()) == {0.0}


def test_summary_columns():
    traces = [
        trace("Paris"),
        trace("The Paris", budget_hits=(True, False)),
        trace("", flexible="Paris", budget_hits=(True,)),
        trace(ABSTAIN, golds=("no",)),
    ]
    summary = summarize(traces, ABSTAIN)
    assert summary["n"] == 4
    assert summary["em"] == summary["acc"] == 0.5
    assert summary["acc_substring"] == 0.5  # the abstain answer's "no" inside "cannot" does not count
    assert summary["flexible_em"] == 0.75
    assert summary["no_answer_rate"] == 0.25
    assert summary["budget_hit_rate"] == 0.5 and summary["budget_hit_rounds"] == 2
    assert summary["llm_calls"] == 1.25 and summary["retrievals"] == 0
    assert summary["never_retrieved"] == 4 and summary["terminations"] == {"done": 4}
    for name in ("em", "acc", "acc_substring", "f1", "flexible_f1", "no_answer_rate", "latency_s"):
        low, high = summary[f"{name}_ci95"]
        assert low <= summary[name] <= high
    assert set(headline(summary)) == set(HEADLINE)
    assert summarize([], ABSTAIN) == headline(summarize([], ABSTAIN)) == {"n": 0}


def test_bootstrap_interval_contains_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    widths = []
    for n in (20, 200, 2000):
        values = rng.random(n) < 0.3
        low, high = bootstrap_interval(values)
        assert low < values.mean() < high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    assert bootstrap_interval([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert bootstrap_interval([0.0, 1.0] * 10) == bootstrap_interval([0.0, 1.0] * 10)  # seeded


def test_the_runner_stores_each_questions_scores_in_its_trace(tmp_path):
    questions = [Question(f"nq-{i}", "nq", f"Question {i}?", ["Paris"], "eval") for i in range(2)]
    method = build_method(
        "no_retrieval", Components(FakeLM([" x\nAnswer: Paris", " It is Paris."]), OverlapRetriever(CORPUS))
    )
    out = tmp_path / "nq.jsonl"
    run_method(method, questions, out, {"method": "no_retrieval"})
    first, second = read_traces(out)
    assert first.scores["em"] == 1.0 and first.scores["flexible_em"] == 1.0
    assert (second.answer, second.flexible_answer) == ("", "It is Paris.")
    assert second.scores["acc"] == 0.0 and second.scores["flexible_acc"] == 1.0
