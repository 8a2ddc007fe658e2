"""Skill-RAG (paper §3): Probing-RAG's checker, but a failure is diagnosed before retrying.

On each rejected answer the router picks a skill from the failure state (question, failed
reasoning, answer, evidence). A query skill writes the next queries (never one already issued;
see skillrag.skills.base), which are retrieved and answered over; `exit` stops with the
current answer or the abstain answer (`methods.exit_mode`). The prompt router writes the chosen
skill's queries in the same LLM call that chooses it, so a retry costs two calls (route and
write, then answer); the learned router chooses without one, and the skill then writes its
queries in one call. The prompt router adds the label offsets train_router fitted on the
explored failure states (`Components.router_offsets`, skillrag.skills.router); without them it
calibrates content-free, a cost of the run, not of a question (see `PromptRouter`): made once
per run, shared by the forks that answer questions at once, and reported as the run's costs
(`SkillRAG.run_costs`, `run_costs` in reports/metrics_detail.json).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from skillrag.lm.base import LM
from skillrag.methods.base import Attempt, Components, Session
from skillrag.methods.checked import CheckedRAG
from skillrag.methods.trace import Cost
from skillrag.skills import EXIT, PromptRouter, Router, build_skills, exit_answer


class Calibration:
    """The prompt router's content-free calibration, scored once for a run however many forks ask
    for it, with what it cost (one call; the seconds its first caller waited)."""

    def __init__(self) -> None:
        self.cost = Cost()
        self._scores: list[float] | None = None
        self._lock = threading.Lock()  # forks in worker threads ask at once

    def scores(self, lm: LM, prompt: str, continuations: Sequence[str]) -> list[float]:
        with self._lock:
            if self._scores is None:
                started = time.perf_counter()
                self._scores = lm.loglikelihood(prompt, continuations)
                self.cost = Cost(llm_calls=1, latency_s=time.perf_counter() - started)
            return list(self._scores)


class _Calibrating:
    """What the prompt router calibrates with: one fork's (unmetered) LM, through the run's `Calibration`."""

    def __init__(self, lm: LM, calibration: Calibration) -> None:
        self.lm, self.calibration = lm, calibration

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        return self.calibration.scores(self.lm, prompt, continuations)


class SkillRAG(CheckedRAG):
    name = "skill_rag"

    def __init__(self, components: Components, calibration: Calibration | None = None) -> None:
        super().__init__(components)
        self.calibration = calibration or Calibration()
        self.router: Router = components.router or self._prompt_router()
        self.skills = build_skills(self.lm)

    def fork(self, components: Components) -> SkillRAG:
        return SkillRAG(components, self.calibration)

    def run_costs(self) -> Cost:
        return self.calibration.cost

    def _prompt_router(self) -> Router:
        if self.components.params.router != "prompt":
            raise ValueError(
                "methods.router is 'learned': pass the trained router "
                "(Components(router=load_learned_router(path)))"
            )
        return PromptRouter(
            self.lm, calibrate_with=_Calibrating(self.components.lm, self.calibration), offsets=self.components.router_offsets or None
        )

    def retry(self, session: Session, rejected: Attempt, round_index: int) -> Attempt | None:
        state = session.failure_state(rejected, round_index)
        routing = self.router.choose(state)
        if routing.skill == EXIT:
            params = self.components.params
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
