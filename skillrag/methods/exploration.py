"""Skill exploration: the learned router's training data, labelled by gold answers.

A failure state is a question whose single-step answer (retrieve with the question, answer over
the top-k) is wrong by gold. From it every query skill is tried once, in the fixed order of
`QUERY_SKILLS`, each from the same failure state and evidence, until one gives a right answer.
`skillrag.skills.learned_router.build_router_dataset` labels the state with that skill, or with
`exit` when none helped (stopping was right). No prober is involved, so the data depends neither
on a prober nor on its acceptance threshold. Correctness is passed in (the stage uses the
evaluation's accuracy): methods and skills do not import the eval layer.
"""

from __future__ import annotations

from skillrag.methods.base import Components, Method, Session
from skillrag.methods.simple import SingleStep
from skillrag.skills import QUERY_SKILLS, build_skills
from skillrag.skills.learned_router import IsCorrect


class SkillExploration(Method):
    """Rounds: "retrieval" (the single-step answer, with its state when `state_layers` are set),
    then, if it is wrong, one round per query skill until one answers right; ends "done"."""

    name = "skill_exploration"
    reads = (*SingleStep.reads, "lm.layers")

    def __init__(self, parts: Components, is_correct: IsCorrect) -> None:
        super().__init__(parts)
        self.is_correct = is_correct
        self.skills = build_skills(self.lm)

    def run(self, session: Session) -> None:
        golds = session.question.answers
        failed = session.answer_round("retrieval", [session.question.question])
        if not self.is_correct(failed.answer, golds):
            state = session.failure_state(failed, 1)
            for name in QUERY_SKILLS:
                result = self.skills[name].apply(state)
                notes = [result.fallback] if result.fallback else []
                if not result.queries:
                    session.decision_round(name, failed.answer, fallbacks=notes)
                    continue
                session.last = failed  # every skill starts from the failure's evidence
                if self.is_correct(session.answer_round(name, result.queries, fallbacks=notes).answer, golds):
                    break
        session.stop("done")
