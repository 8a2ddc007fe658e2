"""Skill exploration: the learned router's training data, labelled by gold answers.

A failure state is a question whose single-step answer (retrieve with the question, answer over
the top-k) is wrong by gold. From it every query skill is tried once, in the fixed order of
`QUERY_SKILLS`, each from the same failure state and evidence, until one gives a right answer.
`build_router_dataset` labels the state with that skill, or with `exit` when none helped
(stopping was right): the training set of `skillrag.skills.learned_router`. A question whose
single-step answer is right gets one retry too (the first query skill that writes a query), so
`retry_rates` can say what a retry does to a right answer as well as to a wrong one: the
prober's stage-2 cut (skillrag.probe.cuts) weighs accepting an answer against retrying it. No prober is
involved, so the data depends neither on a prober nor on its acceptance threshold. Correctness
is passed in (the stage uses the evaluation's accuracy): methods and skills do not import the
eval layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from skillrag.methods.base import Components, Method, Session
from skillrag.methods.trace import Trace
from skillrag.skills import EXIT, QUERY_SKILLS, build_skills

IsCorrect = Callable[[str, Sequence[str]], bool]  # (answer, gold answers) -> right?


class SkillExploration(Method):
    """Rounds: "retrieval" (the single-step answer, with its state when `state_layers` are set),
    then, if it is wrong, one round per query skill until one answers right; ends "done"."""

    name = "skill_exploration"

    def __init__(self, parts: Components, is_correct: IsCorrect) -> None:
        super().__init__(parts)
        self.is_correct = is_correct
        self.skills = build_skills(self.lm)

    def fork(self, parts: Components) -> SkillExploration:
        return SkillExploration(parts, self.is_correct)

    def run(self, session: Session) -> None:
        golds = session.question.answers
        first = session.answer_round("retrieval", [session.question.question])
        first_right = self.is_correct(first.answer, golds)
        state = session.failure_state(first, 1)
        for name in QUERY_SKILLS:
            result = self.skills[name].apply(state)
            notes = [result.fallback] if result.fallback else []
            if not result.queries:
                session.decision_round(name, first.answer, fallbacks=notes)
                continue
            session.last = first  # every skill starts from the first answer's evidence
            right = self.is_correct(session.answer_round(name, result.queries, fallbacks=notes).answer, golds)
            if right or first_right:
                break  # a wrong answer: until a skill helps; a right one: one retry
        session.stop("done")


def router_label(trace: Trace, is_correct: IsCorrect) -> str | None:
    """The label of an exploration trace: the first query skill whose answer is right, else
    `exit`; None when the trace holds no failure state (the single-step answer was right, its
    state was not recorded, or the question ended on an error)."""
    if trace.termination == "error" or not trace.rounds:
        return None
    first = trace.rounds[0]
    if first.stage != "retrieval" or first.state is None or is_correct(first.answer, trace.golds):
        return None
    skill_rounds = (r for r in trace.rounds[1:] if r.stage in QUERY_SKILLS and r.queries)
    return next((r.stage for r in skill_rounds if is_correct(r.answer, trace.golds)), EXIT)


def build_router_dataset(traces: Iterable[Trace], is_correct: IsCorrect) -> tuple[np.ndarray, list[str]]:
    """(X [n, d], labels) from exploration traces: one row per failure state (see `router_label`)."""
    rows, labels = [], []
    for trace in traces:
        label = router_label(trace, is_correct)
        if label is not None:
            rows.append(trace.rounds[0].state)
            labels.append(label)
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(rows[0]) if rows else 0), labels


RETRY_RULE = (
    "a retry is the first query-skill round that issued queries after the single-step answer "
    "(QUERY_SKILLS order); after_wrong / after_right: share of explored questions whose retry "
    "answered right, by whether the single-step answer was right; llm_calls: mean LLM calls of that round"
)


def retry_rates(traces: Iterable[Trace], is_correct: IsCorrect) -> dict[str, object]:
    """What one retry does to an answer over passages, from exploration traces: P(retry right |
    single-step wrong), P(retry right | single-step right) (None without such questions) and
    the LLM calls a retry costs (see RETRY_RULE)."""
    outcomes: dict[str, list[bool]] = {"after_wrong": [], "after_right": []}
    calls = []
    for trace in traces:
        if trace.termination == "error" or not trace.rounds or trace.rounds[0].stage != "retrieval":
            continue
        retry = next((r for r in trace.rounds[1:] if r.stage in QUERY_SKILLS and r.queries), None)
        if retry is None:
            continue
        key = "after_right" if is_correct(trace.rounds[0].answer, trace.golds) else "after_wrong"
        outcomes[key].append(is_correct(retry.answer, trace.golds))
        calls.append(retry.cost.llm_calls)
    return {
        "rule": RETRY_RULE,
        **{key: {"n": len(v), "right": sum(v), "rate": sum(v) / len(v) if v else None} for key, v in outcomes.items()},
        "llm_calls": float(np.mean(calls)) if calls else None,
    }
