"""Train-time exploration: the learned router's training data, the prompt router's label
offsets and the retry evidence behind the prober's after-evidence cut, labelled by gold answers.

A failure state is a question whose single-step answer (retrieve with the question, answer over
the top-k) is wrong by gold. `SkillExploration` tries every query skill once from it, each from
the same failure state and evidence, so each state knows which skills fixed it (their answer was
right); exit is right when none did. The call that writes the first skill's queries also scores
the prompt router's four labels on the state (skillrag.skills.router.score_and_write), so the
raw label likelihoods come at no extra call. `build_router_dataset` labels each state with the
first skill that fixed it, else `exit`: the training set of `skillrag.skills.learned_router`;
`explored_states` gives the fixers and raw scores that skillrag.skills.calibration fits and
scores routers on.

`FirstRetry` measures what a checked method's retry does to a single-step answer, right or wrong:
it answers single-step, then calls the method's own `retry` once (its router, skills, queries and
evidence rule, as configured), so the evidence follows the method whatever it does.
`retry_rates` summarises those traces: the prober's after-evidence cut (skillrag.probe.cuts)
weighs accepting an answer against retrying it. No prober is trained yet, so the method runs
with `NEVER_ACCEPTS` (it is never consulted: the answers are recorded unchecked). Correctness is
passed in (the stage uses the evaluation's accuracy): methods and skills do not import the eval
layer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from skillrag.lm.base import POOLINGS
from skillrag.methods.base import Components, Method, Session
from skillrag.methods.checked import CheckedRAG
from skillrag.methods.trace import Cost, Trace
from skillrag.skills import EXIT, QUERY_SKILLS, SKILL_NAMES, build_skills
from skillrag.skills.router import score_and_write

IsCorrect = Callable[[str, Sequence[str]], bool]  # (answer, gold answers) -> right?


class SkillExploration(Method):
    """Rounds: "retrieval" (the single-step answer, with its state when `state_layers` are set),
    then, if it is wrong, one round per query skill (all of them; the first one's `router_scores`
    are the prompt router's raw label log-likelihoods on the failure state); ends "done"."""

    name = "skill_exploration"

    def __init__(self, components: Components, is_correct: IsCorrect) -> None:
        super().__init__(components)
        self.is_correct = is_correct
        self.skills = build_skills(self.lm)

    def fork(self, components: Components) -> SkillExploration:
        return SkillExploration(components, self.is_correct)

    def run(self, session: Session) -> None:
        first = session.answer_round("retrieval", [session.question.question])
        if self.is_correct(first.answer, session.question.answers):
            session.stop("done")
            return
        state = session.failure_state(first, 1)
        for index, name in enumerate(QUERY_SKILLS):
            routing = score_and_write(self.lm, state, name) if index == 0 else None
            result = self.skills[name].apply(state, routing.output if routing else None)
            notes = [result.fallback] if result.fallback else []
            if not result.queries:
                session.decision_round(name, first.answer, routing, notes)
                continue
            session.last = first  # every skill starts from the first answer's evidence
            session.answer_round(name, result.queries, routing, notes)
        session.stop("done")


def fixers(trace: Trace, is_correct: IsCorrect) -> frozenset[str] | None:
    """The query skills whose answer was right in an exploration trace; None when the trace holds
    no failure state (the single-step answer was right, its state was not recorded, or the
    question ended on an error)."""
    if trace.termination == "error" or not trace.rounds:
        return None
    first = trace.rounds[0]
    if first.stage != "retrieval" or first.state is None or is_correct(first.answer, trace.golds):
        return None
    return frozenset(r.stage for r in trace.rounds[1:] if r.stage in QUERY_SKILLS and r.queries and is_correct(r.answer, trace.golds))


def router_label(trace: Trace, is_correct: IsCorrect) -> str | None:
    """The label of an exploration trace: the first query skill (QUERY_SKILLS order) whose answer
    is right, else `exit`; None without a failure state (see `fixers`)."""
    fixed = fixers(trace, is_correct)
    if fixed is None:
        return None
    return next((skill for skill in QUERY_SKILLS if skill in fixed), EXIT)


@dataclass(frozen=True)
class ExploredState:
    """One explored failure state: which skills fixed it, and the prompt router's raw label
    log-likelihoods on it (SKILL_NAMES order; None when the trace did not record them)."""

    question_id: str
    dataset: str
    fixers: frozenset[str]
    raw: tuple[float, ...] | None


def explored_states(traces: Iterable[Trace], is_correct: IsCorrect) -> list[ExploredState]:
    states = []
    for trace in traces:
        fixed = fixers(trace, is_correct)
        if fixed is None:
            continue
        scored = next((r.router_scores for r in trace.rounds[1:] if r.router_scores), {})
        raw = tuple(float(scored[s]) for s in SKILL_NAMES) if set(SKILL_NAMES) <= set(scored) else None
        states.append(ExploredState(trace.question_id, trace.dataset, fixed, raw))
    return states


def build_router_dataset(traces: Iterable[Trace], is_correct: IsCorrect) -> tuple[np.ndarray, list[str]]:
    """(X [n, d], labels) from exploration traces: one row per failure state (see `router_label`)."""
    rows, labels = [], []
    for trace in traces:
        label = router_label(trace, is_correct)
        if label is not None:
            rows.append(trace.rounds[0].state)
            labels.append(label)
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(rows[0]) if rows else 0), labels


class NeverAccepts:
    """The prober a checked method is built with before any prober is trained (train_router):
    it would reject every answer; `FirstRetry` never consults it."""

    pooling = POOLINGS[0]

    @property
    def layers(self) -> list[int]:
        return []

    def score(self, hidden: Mapping[int, torch.Tensor]) -> float:
        return 0.0

    def accepts(self, score: float, point: str) -> bool:
        return False


NEVER_ACCEPTS = NeverAccepts()


class FirstRetry(Method):
    """Rounds: "retrieval" (the single-step answer), then whatever the checked method's own `retry`
    records after rejecting it (a skill round, a requery, an exit); the trace's answer is the
    method's answer after that one retry ("done", or the retry's own termination)."""

    name = "first_retry"

    def __init__(self, checked: CheckedRAG) -> None:
        super().__init__(replace(checked.components, prober=None), meter=checked.meter)  # its rounds are unchecked
        self.checked = checked

    def fork(self, components: Components) -> FirstRetry:
        return FirstRetry(self.checked.fork(replace(components, prober=self.checked.components.prober)))

    def run_costs(self) -> Cost:
        return self.checked.run_costs()

    def run(self, session: Session) -> None:
        first = session.answer_round("retrieval", [session.question.question])
        if self.checked.retry(session, first, 1) is not None:
            session.stop("done")


RETRY_RULE = (
    "a retry is the gated method's own first retry after its single-step answer (FirstRetry: its "
    "router, skills and evidence rule as configured), run on train questions, one of each dataset in turn; "
    "after_wrong / after_right: share of questions whose answer after the retry was right, by whether the "
    "single-step answer was right; llm_calls: mean LLM calls of the retry; choices: the retry's first round "
    "(a skill, requery, exit); terminations: how the retry ended"
)


def retry_rates(traces: Iterable[Trace], is_correct: IsCorrect) -> dict[str, object]:
    """What one retry by the method does to an answer over passages, from `FirstRetry` traces:
    P(right after the retry | single-step wrong), P(right after | single-step right) (None
    without such questions), the LLM calls a retry costs, what it chose and how it ended."""
    outcomes: dict[str, list[bool]] = {"after_wrong": [], "after_right": []}
    calls, choices, terminations = [], Counter[str](), Counter[str]()
    for trace in traces:
        if trace.termination == "error" or not trace.rounds or trace.rounds[0].stage != "retrieval":
            continue
        key = "after_right" if is_correct(trace.rounds[0].answer, trace.golds) else "after_wrong"
        outcomes[key].append(is_correct(trace.answer, trace.golds))
        calls.append(trace.totals.llm_calls - trace.rounds[0].cost.llm_calls)
        choices[trace.rounds[1].stage if len(trace.rounds) > 1 else "none"] += 1
        terminations[trace.termination] += 1
    return {
        "rule": RETRY_RULE,
        **{key: {"n": len(v), "right": sum(v), "rate": sum(v) / len(v) if v else None} for key, v in outcomes.items()},
        "llm_calls": float(np.mean(calls)) if calls else None,
        "choices": dict(sorted(choices.items())),
        "terminations": dict(sorted(terminations.items())),
    }
