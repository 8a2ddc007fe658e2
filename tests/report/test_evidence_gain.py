"""The report's evidence-gain table: per method and round stage, how many retrieving rounds found a
gold passage no earlier round had, read from the rounds' `gold_gain` on constructed traces."""

from __future__ import annotations

from skillrag.methods.trace import Round, Trace
from skillrag.report.evidence_gain import evidence_gain_table, gain_counts
from skillrag.report.inputs import Inputs


def trace(method: str, index: int, rounds: list[Round]) -> dict:
    return Trace(f"hotpotqa-{index}", "hotpotqa", "Who?", ["a"], method, rounds).to_dict()


def retrieving(index: int, stage: str, gain: bool | None) -> Round:
    return Round(index, stage, "x", queries=[f"{stage} query"], passage_ids=["p"], gold_gain=gain)


def inputs(traces: dict[str, list[dict]]) -> Inputs:
    return Inputs({m: {"hotpotqa": {}} for m in traces}, {m: {"hotpotqa": rows} for m, rows in traces.items()},
                  {}, {}, {}, {}, {}, {}, {})


def test_rounds_are_counted_per_method_and_stage_and_unknown_gold_is_kept_apart():
    closed = Round(0, "no_retrieval", "x")
    exit_ = Round(3, "exit", "x")  # no queries: not a retrieving round
    made = inputs({
        "skill_rag": [
            trace("skill_rag", 0, [closed, retrieving(1, "retrieval", True), retrieving(2, "question_decomposition", True), exit_]),
            trace("skill_rag", 1, [closed, retrieving(1, "retrieval", False), retrieving(2, "question_decomposition", False)]),
            trace("skill_rag", 2, [closed, retrieving(1, "retrieval", None), retrieving(2, "evidence_focusing", None)]),
        ],
        "probing_rag": [trace("probing_rag", 0, [closed, retrieving(1, "retrieval", False), retrieving(2, "requery", True)])],
    })
    counts = gain_counts(made)
    assert counts[("skill_rag", "question_decomposition")] == {"rounds": 2, "with_gold": 2, "gained": 1}
    assert counts[("skill_rag", "evidence_focusing")] == {"rounds": 1, "with_gold": 0, "gained": 0}
    assert counts[("skill_rag", "retrieval")] == {"rounds": 3, "with_gold": 2, "gained": 1}
    assert counts[("probing_rag", "requery")] == {"rounds": 1, "with_gold": 1, "gained": 1}
    assert ("skill_rag", "exit") not in counts and ("skill_rag", "no_retrieval") not in counts
    table = evidence_gain_table(made)
    assert "| skill_rag | question_decomposition | 2 | 2 | 1 (50%) |" in table
    assert "| skill_rag | evidence_focusing | 1 | 0 | 0 (–) |" in table


def test_without_gold_passages_the_table_says_why():
    made = inputs({"skill_rag": [trace("skill_rag", 0, [retrieving(1, "retrieval", None)])]})
    assert "No retrieving round" in evidence_gain_table(made)
