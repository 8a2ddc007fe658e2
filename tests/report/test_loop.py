"""The loop's own gain and the final-answer policies, on constructed traces."""

import pytest

from skillrag.report.loop import (
    first_accepted,
    last,
    loop_gain,
    loop_section,
    max_score,
    policy_outcomes,
    policy_rows,
)


def _round(stage: str, answer: str, score: float | None = None, accepted: bool | None = None) -> dict:
    return {"stage": stage, "answer": answer, "score": score, "accepted": accepted}


def _trace(rounds: list[dict], final: str, termination: str = "max_rounds", golds=("1952",)) -> dict:
    return {"rounds": rounds, "answer": final, "golds": list(golds), "termination": termination}


# closed-book rejected; the first retrieval right but doubted; a retry the prober likes less, kept as last
LEFT_RIGHT = _trace(
    [_round("no_retrieval", "1960", 0.2, False), _round("retrieval", "1952", 0.45, False), _round("question_decomposition", "1951", 0.3, False)],
    "1951",
)
# the first retrieval wrong; the retry right and accepted
FIXED = _trace(
    [_round("no_retrieval", "1960", 0.2, False), _round("retrieval", "2000", 0.1, False), _round("evidence_focusing", "1952", 0.7, True)],
    "1952", termination="accepted",
)
# accepted closed-book: no retrieval round
CLOSED = _trace([_round("no_retrieval", "1952", 0.9, True)], "1952", termination="accepted")
# an exit after a wrong retrieval answer: nothing changes
EXITED = _trace([_round("no_retrieval", "x", 0.2, False), _round("retrieval", "y", 0.2, False), _round("exit", "y")], "y", termination="exit")


def test_last_vs_max_score_vs_first_accepted_on_constructed_traces():
    assert (last(LEFT_RIGHT), max_score(LEFT_RIGHT), first_accepted(LEFT_RIGHT)) == ("1951", "1952", "1951")
    assert (last(FIXED), max_score(FIXED), first_accepted(FIXED)) == ("1952", "1952", "1952")
    assert max_score(EXITED) == "y"  # ties go to the later round; the exit round has no score
    outcomes = policy_outcomes([LEFT_RIGHT, FIXED, CLOSED, EXITED])
    assert outcomes == {"last": [0, 1, 1, 0], "max_score": [1, 1, 1, 0], "first_accepted": [0, 1, 1, 0]}


def test_a_policy_must_beat_last_beyond_noise_to_be_called_better():
    rows = {row[1]: row for row in policy_rows("skill_rag", [LEFT_RIGHT, FIXED, CLOSED, EXITED])}
    assert rows["last"][3] == "50.0" and rows["max_score"][3] == "75.0"
    assert rows["max_score"][4] == "1 / 0" and rows["max_score"][6] == "does not beat last"  # one question is noise
    many = policy_rows("skill_rag", [LEFT_RIGHT] * 30)
    assert next(r for r in many if r[1] == "max_score")[6] == "beats last beyond noise"


def test_loop_gain_counts_fixed_and_broken_answers_against_the_first_retrieval_round():
    gain = loop_gain("skill_rag", "nq", [LEFT_RIGHT, FIXED, CLOSED, EXITED])
    assert (gain.n, gain.fixed, gain.broken) == (3, 1, 1)  # the closed-book acceptance did not reach retrieval
    assert gain.test.p_value == pytest.approx(1.0)


def test_the_section_lists_each_gated_method_and_dataset_and_skips_the_others():
    text = loop_section({"skill_rag": {"nq": [LEFT_RIGHT, FIXED], "hotpotqa": [EXITED]}, "single_step": {"nq": [CLOSED]}})
    assert "| skill_rag | nq | 2 | 50% (1) | 50% (1) | +0.0 | 1.000 |" in text
    assert "| skill_rag | all | 3 |" in text and "single_step" not in text
    assert loop_section({"single_step": {"nq": [CLOSED]}}).startswith("_No gated loop")
