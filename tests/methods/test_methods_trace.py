"""The trace schema: JSON round-trip, strict JSON (no NaN), and cost totals."""

from __future__ import annotations

import json

import pytest

from skillrag.methods import Cost, Round, Trace


def make_trace() -> Trace:
    rounds = [
        Round(
            0,
            "no_retrieval",
            "Paris",
            "It is in France.",
            score=0.2,
            accepted=False,
            state=[0.5, -1.25],
            cost=Cost(1, 120, 9, 0, 0.5),
        ),
        Round(
            1,
            "query_rewriting",
            "Lyon",
            queries=["Eiffel Tower city"],
            passage_ids=["p1"],
            passage_titles=["Eiffel Tower"],
            score=0.7,
            accepted=True,
            router_scores={"query_rewriting": -0.5, "exit": float("nan")},
            fallbacks=["query_rewriting: output is empty -> fallback"],
            cost=Cost(3, 300, 12, 1, 1.5),
        ),
    ]
    return Trace(
        "q1",
        "nq",
        "Where is the Eiffel Tower?",
        ["Paris"],
        "skill_rag",
        rounds,
        "Lyon",
        "accepted",
        totals=Cost(4, 420, 21, 1, 2.0),
    )


def test_trace_round_trips_through_strict_json():
    trace = make_trace()
    text = json.dumps(trace.to_dict(), allow_nan=False)
    back = Trace.from_dict(json.loads(text))
    assert back.rounds[1].router_scores == {"query_rewriting": -0.5, "exit": None}
    back.rounds[1].router_scores["exit"] = trace.rounds[1].router_scores["exit"] = None
    assert back == trace


def test_unknown_termination_is_rejected():
    row = make_trace().to_dict() | {"termination": "gave_up"}
    with pytest.raises(ValueError, match="unknown termination 'gave_up'"):
        Trace.from_dict(row)


def test_costs_add_field_by_field():
    assert Cost(1, 2, 3, 4, 0.5) + Cost(10, 20, 30, 40, 1.0) == Cost(11, 22, 33, 44, 1.5)


def test_a_rounds_hidden_state_travels_as_compact_text_and_comes_back_exactly():
    import json

    import numpy as np

    from skillrag.methods.trace import Round, Trace

    state = np.random.default_rng(0).standard_normal(1536).astype(np.float32).tolist()
    trace = Trace("q1", "nq", "who?", ["x"], "skill_rag", rounds=[Round(0, "retrieval", "x", state=state), Round(1, "exit", "")])
    row = trace.to_dict()
    assert isinstance(row["rounds"][0]["state"], str) and row["rounds"][1]["state"] is None
    assert len(json.dumps(row["rounds"][0]["state"])) < len(json.dumps(state)) / 3
    back = Trace.from_dict(json.loads(json.dumps(row)))
    assert back.rounds[0].state == state and back.rounds[1].state is None
