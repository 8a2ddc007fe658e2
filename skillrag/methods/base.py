"""What every method is: the components it runs on, the `Method` protocol, and the per-question
session that turns rounds into a Trace.

How a question is answered and judged lives in skillrag.answering, call metering in
skillrag.methods.metering, the error policy in skillrag.methods.error_policy, and opening the
components from params in skillrag.pipeline.runtime.components. A method instance answers one question at a time
(`Method.fork` makes one per question in flight).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from skillrag.answering import Attempt, Checker, Prober, ProberChecker, answer_with
from skillrag.config import MethodsParams, Params
from skillrag.data.schema import Passage, Question
from skillrag.lm.base import LM, state_vector
from skillrag.methods.error_policy import is_question_failure
from skillrag.methods.metering import Meter, MeteredLM, MeteredRetriever
from skillrag.methods.trace import Cost, Round, Termination, Trace
from skillrag.prompts.cot import cot_prompt, parse_answer
from skillrag.retrieval.base import Retriever
from skillrag.skills.base import FailureState, Router, Routing
from skillrag.skills.queries import query_key

if TYPE_CHECKING:
    from skillrag.methods.complexity import ComplexityClassifier

OnRound = Callable[[Round], None]
_DEFAULTS = Params()  # params.yaml's values: skillrag.config keeps its defaults equal to them


@dataclass(frozen=True)
class Components:
    """Everything a method runs on. `router`: a ready router (the learned one); None builds the
    prompt router from the LM when `params.router` is "prompt". `state_layers`: each answer's
    hidden vector, the mean over these layers, is kept in its round (training data for the
    learned router); empty: none. `classifier`: Adaptive-RAG's query-complexity classifier
    (skillrag.methods.complexity), None when no method needs it. `passage_words`: each passage
    cut to this many words in answer prompts (None: whole). `thresholds`: the trigger thresholds
    tuned on dev (skillrag.methods.thresholds), which `auto` params resolve to. `router_offsets`:
    the prompt router's per-label offsets fitted by train_router (skillrag.skills.router; empty:
    content-free calibration). The defaults are params.yaml's (`from_params` is how a stage builds them)."""

    lm: LM
    retriever: Retriever
    prober: Prober | None = None
    params: MethodsParams = field(default_factory=MethodsParams)
    k: int = _DEFAULTS.retrieval.k
    max_new_tokens: int = _DEFAULTS.lm.max_new_tokens
    router: Router | None = None
    state_layers: tuple[int, ...] = ()
    classifier: ComplexityClassifier | None = None
    passage_words: int | None = _DEFAULTS.retrieval.passage_words
    thresholds: Mapping[str, float] = field(default_factory=dict)
    router_offsets: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_params(
        cls,
        params: Params,
        lm: LM,
        retriever: Retriever,
        prober: Prober | None = None,
        router: Router | None = None,
        state_layers: Sequence[int] = (),
        classifier: ComplexityClassifier | None = None,
        thresholds: Mapping[str, float] | None = None,
        router_offsets: Mapping[str, float] | None = None,
    ) -> Components:
        return cls(
            lm,
            retriever,
            prober,
            params.methods,
            params.retrieval.k,
            params.lm.max_new_tokens,
            router,
            tuple(state_layers),
            classifier,
            params.retrieval.passage_words,
            dict(thresholds or {}),
            dict(router_offsets or {}),
        )


def interleave(ranked: Sequence[Sequence[Passage]], k: int) -> list[Passage]:
    """Round-robin over ranked lists, first occurrence of each passage, at most k."""
    merged: dict[str, Passage] = {}
    for rank in range(max((len(r) for r in ranked), default=0)):
        for passages in ranked:
            if rank < len(passages):
                merged.setdefault(passages[rank].id, passages[rank])
    return list(merged.values())[:k]


def cot_attempt(
    question: str, passage_words: int | None, passages: Sequence[Passage], cot: str, budget_hit: bool = False
) -> Attempt:
    """The attempt of a CoT that a method wrote piece by piece over `passages` (FLARE, DRAGIN):
    its answer read by the strict parser every method uses; no hidden state or prober verdict."""
    prompt = cot_prompt(question, passages, passage_words)
    parsed = parse_answer(cot, prompt.text, truncated=budget_hit)
    return Attempt(parsed.reasoning, parsed.answer, tuple(passages), None, None, None, parsed.flexible, budget_hit)


class Session:
    """One question's run: records rounds with their costs, remembers issued queries and the
    latest attempt, and ends with a termination reason."""

    def __init__(self, method: Method, question: Question, on_round: OnRound | None) -> None:
        self.method, self.question, self.on_round = method, question, on_round
        self.trace = Trace(
            question.id, question.dataset, question.question, list(question.answers), method.name
        )
        self.issued: set[frozenset[str]] = set()
        self.last: Attempt | None = None
        self.mark = time.perf_counter()
        method.meter.take(0.0)  # start from zero whatever happened before

    def answer_round(
        self,
        stage: str,
        queries: Sequence[str] = (),
        routing: Routing | None = None,
        fallbacks: Sequence[str] = (),
    ) -> Attempt:
        """Retrieve for `queries` (none: closed-book), answer, probe, record the round.

        Evidence accumulates: the answer sees this round's passages (each query's top
        `retrieval.k`, interleaved) interleaved with those the latest answer saw (which hold the
        earlier rounds'), newest first, each passage once, at most `methods.max_passages`; so a
        follow-up query adds the missing piece to what was found instead of swapping it out.
        """
        m = self.method
        passages: list[Passage] = []
        if queries:
            found = [[hit.passage for hit in m.retriever.search(q, m.components.k)] for q in queries]
            earlier = list(self.last.passages) if self.last else []
            new = interleave(found, sum(len(f) for f in found))
            passages = interleave([new, earlier], m.components.params.max_passages)
            self.issued.update(query_key(q) for q in queries)
        attempt = answer_with(
            m.lm,
            self.question.question,
            passages,
            m.checker,
            m.components.max_new_tokens,
            m.components.state_layers,
            m.components.passage_words,
        )
        return self.record_attempt(stage, queries, attempt, routing, fallbacks)

    def record_attempt(
        self,
        stage: str,
        queries: Sequence[str],
        attempt: Attempt,
        routing: Routing | None = None,
        fallbacks: Sequence[str] = (),
    ) -> Attempt:
        """Record the round that issued `queries` and answered with `attempt` (over its passages),
        which becomes the latest attempt: also for methods that form their answers themselves."""
        m = self.method
        passages = attempt.passages
        state = None
        if m.components.state_layers and attempt.hidden is not None:
            state = state_vector(attempt.hidden, m.components.state_layers).tolist()
        self._record(
            Round(
                index=len(self.trace.rounds),
                stage=stage,
                answer=attempt.answer,
                reasoning=attempt.reasoning,
                queries=list(queries),
                passage_ids=[p.id for p in passages],
                passage_titles=[p.title for p in passages],
                score=attempt.score,
                accepted=attempt.accepted,
                state=state,
                budget_hit=attempt.budget_hit,
                flexible_answer=attempt.flexible,
                gold_gain=self._gold_gain(passages) if queries else None,
            ),
            routing,
            [*attempt.notes, *fallbacks],
        )
        self.last = attempt
        return attempt

    def _gold_gain(self, passages: Sequence[Passage]) -> bool | None:
        """Whether `passages` hold a gold passage (the question's `meta["gold_passage_ids"]`) that
        no earlier round's passages held; None when the question names no gold passages."""
        gold = set(self.question.meta.get("gold_passage_ids") or ())
        if not gold:
            return None
        seen = {pid for round_ in self.trace.rounds for pid in round_.passage_ids}
        return bool(gold & {p.id for p in passages} - seen)

    def decision_round(
        self, stage: str, answer: str, routing: Routing | None = None, fallbacks: Sequence[str] = ()
    ) -> None:
        """Record a round that produced no new answer (an exit, or no new query left)."""
        self._record(Round(index=len(self.trace.rounds), stage=stage, answer=answer), routing, fallbacks)

    def _record(self, round_: Round, routing: Routing | None, fallbacks: Sequence[str]) -> None:
        notes = [routing.fallback] if routing and routing.fallback else []
        round_.fallbacks = [*notes, *fallbacks]
        round_.router_scores = dict(routing.scores) if routing else {}
        now = time.perf_counter()
        round_.cost, self.mark = self.method.meter.take(now - self.mark), now
        self.trace.rounds.append(round_)
        if self.on_round is not None:
            self.on_round(round_)

    def failure_state(self, rejected: Attempt, round_index: int) -> FailureState:
        return FailureState(
            self.question.question,
            rejected.reasoning,
            rejected.answer,
            rejected.passages,
            rejected.hidden,
            round_index,
            frozenset(self.issued),
        )

    def stop(self, termination: Termination, answer: str | None = None) -> None:
        """End with the latest attempt's answers, or with `answer` (an exit's abstention) as
        both the strict and the flexible answer when it differs from the latest strict one."""
        strict, flexible = (self.last.answer, self.last.flexible) if self.last else ("", "")
        self.trace.termination = termination
        if answer is None or answer == strict:
            self.trace.answer, self.trace.flexible_answer = strict, flexible
        else:
            self.trace.answer = self.trace.flexible_answer = answer

    def fail(self, err: BaseException) -> None:
        """The question ends on a runtime failure (answer ""); the run goes on with the next
        question, and a resumed run retries it."""
        self.trace.termination, self.trace.answer = "error", ""
        self.trace.error = f"{type(err).__name__}: {err}"

    def finish(self) -> Trace:
        leftover = self.method.meter.take(time.perf_counter() - self.mark)
        self.trace.totals = sum((r.cost for r in self.trace.rounds), leftover)
        return self.trace


class Method(ABC):
    """A QA pipeline over shared components: `answer(question) -> Trace`. What its traces depend
    on, whether it retrieves and what triggers it are declared in skillrag.registry."""

    name: ClassVar[str]
    needs_prober: ClassVar[bool] = False
    needs_classifier: ClassVar[bool] = False

    def __init__(self, components: Components, meter: Meter | None = None) -> None:
        """`meter`: count on another method's meter (a method that runs others as its steps)."""
        if self.needs_prober and components.prober is None:
            raise ValueError(f"method {self.name!r} needs a trained prober")
        self.components = components
        # What accepts an answer (score and verdict in its round): the prober when given;
        # entropy_rag sets its own.
        self.checker: Checker | None = ProberChecker(components.prober) if components.prober is not None else None
        self.meter = meter if meter is not None else Meter()
        self.lm = MeteredLM(components.lm, self.meter)
        self.retriever = MeteredRetriever(components.retriever, self.meter)

    def fork(self, components: Components) -> Method:
        """The same method over other components (a worker's LM and retriever fronts when
        questions run concurrently), with its own meter: an instance answers one question at a
        time."""
        return type(self)(components)

    def answer(self, question: Question, on_round: OnRound | None = None) -> Trace:
        """Run the method on one question; `on_round` sees each round as it is recorded.

        A per-question runtime failure (`is_question_failure`) ends the question with termination
        "error" (message in the trace) and the run goes on; any other exception is a bug and
        propagates, stopping the stage.
        """
        session = Session(self, question, on_round)
        try:
            self.run(session)
        except Exception as err:
            if not is_question_failure(err):
                raise
            session.fail(err)
        return session.finish()

    def run_costs(self) -> Cost:
        """Costs of the whole run, charged to no question (Skill-RAG's router calibration)."""
        return Cost()

    @abstractmethod
    def run(self, session: Session) -> None:
        """Record rounds on the session and end with `session.stop(...)`."""
