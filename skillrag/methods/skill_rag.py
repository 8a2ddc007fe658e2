"""Skill-RAG (paper §3): Probing-RAG's gate, but a failure is diagnosed before retrying.

On each rejected answer the router picks a skill from the failure state (question, failed
reasoning, answer, evidence). A query skill writes the next queries (never one already issued;
see skillrag.skills.base), which are retrieved and answered over; `exit` stops with the
current answer or the abstain answer (`methods.exit_mode`). The prompt router writes the chosen
skill's queries in the same LLM call that chooses it, so a retry costs two calls (route and
write, then answer); the learned router chooses without one, and the skill then writes its
queries in one call. The prompt router's one-off calibration is a cost of the run, not of a
question (see `PromptRouter`).
"""

from __future__ import annotations

from skillrag.methods.base import Attempt, Components, Session
from skillrag.methods.gated import GatedRAG
from skillrag.skills import EXIT, PromptRouter, Router, build_skills, exit_answer


class SkillRAG(GatedRAG):
    name = "skill_rag"
    reads = (*GatedRAG.reads, "router", "methods.router", "methods.exit_mode", "methods.abstain_answer")

    def __init__(self, parts: Components) -> None:
        super().__init__(parts)
        self.router: Router = parts.router or self._prompt_router()
        self.skills = build_skills(self.lm)

    def _prompt_router(self) -> Router:
        if self.parts.params.router != "prompt":
            raise ValueError(
                "methods.router is 'learned': pass the trained router "
                "(Components(router=load_learned_router(path)))"
            )
        return PromptRouter(self.lm, calibrate_with=self.parts.lm)

    def retry(self, session: Session, rejected: Attempt, round_index: int) -> Attempt | None:
        state = session.failure_state(rejected, round_index)
        routing = self.router.choose(state)
        if routing.skill == EXIT:
            params = self.parts.params
            answer = exit_answer(state.answer, params.exit_mode, params.abstain_answer)
            session.decision_round(EXIT, answer, routing)
            session.stop("exit", answer)
            return None
        result = self.skills[routing.skill].apply(state, routing.output)
        notes = [result.fallback] if result.fallback else []
        if not result.queries:
            session.decision_round(routing.skill, state.answer, routing, notes)
            session.stop("exhausted")
            return None
        return session.answer_round(routing.skill, result.queries, routing, notes)
