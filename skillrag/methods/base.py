"""Shared parts of every method: the components it runs on, call metering, the one helper that
answers a question from passages (with hidden-state capture and the prober's verdict), and the
per-question session that turns rounds into a Trace.

Costs are counted by wrapping the LM and the retriever, so every call (answer, skill, router)
is counted where it happens and no method can forget one. A method instance answers one
question at a time (`Method.fork` makes one per question in flight).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar, Protocol

import torch

from skillrag.config import MethodsParams, Params
from skillrag.data.schema import Passage, Question
from skillrag.lm.base import LM, Choice, Generation, Option, Pick, state_vector
from skillrag.lm.calls import COMPUTE_S, GenerateCall
from skillrag.methods.trace import Cost, Round, Termination, Trace
from skillrag.paths import Paths
from skillrag.prompts.cot import STOP, cot_prompt, parse_answer
from skillrag.retrieval.base import Hit, Retriever
from skillrag.skills.base import FailureState, Router, Routing
from skillrag.skills.text import query_key

if TYPE_CHECKING:
    from skillrag.methods.complexity import ComplexityClassifier

OnRound = Callable[[Round], None]


class Prober(Protocol):
    """What methods need from the prober (skillrag.probe.prober.Prober fits)."""

    @property
    def layers(self) -> list[int]: ...

    def score(self, hidden: Mapping[int, torch.Tensor]) -> float: ...

    def accepts(self, score: float) -> bool: ...


class Gate(Protocol):
    """What accepts or rejects an answer from its generation: the prober (hidden states of
    `layers`, captured in the same generation) or a score of the tokens alone (entropy_rag)."""

    @property
    def layers(self) -> list[int]: ...

    def score(self, generation: Generation) -> float: ...

    def accepts(self, score: float) -> bool: ...


@dataclass(frozen=True)
class ProberGate:
    """The prober as a gate: it scores the generation's hidden states."""

    prober: Prober

    @property
    def layers(self) -> list[int]:
        return self.prober.layers

    def score(self, generation: Generation) -> float:
        return self.prober.score(generation.hidden or {})

    def accepts(self, score: float) -> bool:
        return self.prober.accepts(score)


@dataclass(frozen=True)
class Components:
    """Everything a method runs on. `router`: a ready router (the learned one); None builds the
    prompt router from the LM when `params.router` is "prompt". `state_layers`: each answer's
    hidden vector, the mean over these layers, is kept in its round (training data for the
    learned router); empty: none. `classifier`: Adaptive-RAG's query-complexity classifier
    (skillrag.methods.complexity), None when no method needs it. `passage_words`: each passage
    cut to this many words in answer prompts (None: whole). `thresholds`: the trigger thresholds
    tuned on dev (skillrag.methods.thresholds), which `auto` params resolve to."""

    lm: LM
    retriever: Retriever
    prober: Prober | None = None
    params: MethodsParams = field(default_factory=MethodsParams)
    k: int = 5
    max_new_tokens: int = 96
    router: Router | None = None
    state_layers: tuple[int, ...] = ()
    classifier: ComplexityClassifier | None = None
    passage_words: int | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)

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
        )



def open_components(
    params: Params, paths: Paths, needs_prober: bool, lm: LM | None = None, needs_classifier: bool = False
) -> Components:
    """Everything a method needs, opened from params; the prober only when `needs_prober` (the
    baselines run without), the learned router when `methods.router` is "learned", the
    query-complexity classifier only when `needs_classifier` (Adaptive-RAG), and the trigger
    thresholds tuned on dev when they exist."""
    from skillrag import runtime
    from skillrag.methods.thresholds import load_thresholds

    retriever = runtime.open_retriever(params, paths)
    lm = lm if lm is not None else runtime.open_lm(params)
    prober = runtime.open_prober(params, paths, lm) if needs_prober else None
    router = None
    if needs_prober and params.methods.router == "learned":
        from skillrag.skills.learned_router import load_learned_router

        router = load_learned_router(paths.router, expected_hidden_size=lm.hidden_size)
    classifier = None
    if needs_classifier:
        from skillrag.methods.complexity import load_classifier

        classifier = load_classifier(paths.adaptive, lm)
    thresholds = load_thresholds(paths.thresholds)  # {} before `skillrag tune-thresholds` ran
    return Components.from_params(params, lm, retriever, prober, router, classifier=classifier, thresholds=thresholds)

class Meter:
    """Costs accumulated since the last `take`.

    Latency is charged as incurred: an LM call's results that carry the compute seconds they took
    when made (`COMPUTE_S`, recorded by skillrag.methods.reuse.ReusingLM: a reused result its
    original's, a row of a batched call its equal share of the call) are charged those seconds
    instead of the time the caller waited for them, so a trace's latency is what its method would
    cost alone. Results without the record (a choice that generates nothing, a loglikelihood, an
    LM not wrapped by ReusingLM) are charged the wait."""

    def __init__(self) -> None:
        self.pending = Cost()

    def charge(self, results: Sequence[Generation], waited_s: float) -> None:
        made = [g.extra.get(COMPUTE_S) for g in results]
        if made and None not in made:
            self.pending.latency_s += sum(made) - waited_s

    def take(self, latency_s: float) -> Cost:
        """The pending costs, their latency `latency_s` of wall time plus what was charged
        instead of waits; the meter starts again from zero."""
        taken, self.pending = replace(self.pending, latency_s=self.pending.latency_s + latency_s), Cost()
        return taken


class MeteredLM:
    """The LM, counting calls and tokens on a Meter; a call counts even when it raises."""

    def __init__(self, lm: LM, meter: Meter) -> None:
        self.inner, self.meter = lm, meter
        self.name, self.num_layers, self.hidden_size = lm.name, lm.num_layers, lm.hidden_size

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
        attention: bool = False,
    ) -> list[Generation]:
        self.meter.pending.llm_calls += 1
        started = time.perf_counter()
        out = GenerateCall.of(max_new_tokens, stop, capture, prefix, attention).run(self.inner, prompts)
        self.meter.charge(out, time.perf_counter() - started)
        self.meter.pending.tokens_in += sum(g.prompt_tokens for g in out)
        self.meter.pending.tokens_out += sum(g.new_tokens for g in out)
        return out

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        self.meter.pending.llm_calls += 1
        return self.inner.loglikelihood(prompt, continuations)

    def choose_and_generate(
        self, prompt: str, options: Sequence[Option], prefix: str | None = None, pick: Pick | None = None
    ) -> Choice:
        """One call however many options are scored: the prompt is run once."""
        self.meter.pending.llm_calls += 1
        started = time.perf_counter()
        choice = self.inner.choose_and_generate(prompt, options, prefix=prefix, pick=pick)
        self.meter.charge([choice.generation] if choice.generation else [], time.perf_counter() - started)
        self.meter.pending.tokens_in += choice.prompt_tokens
        self.meter.pending.tokens_out += choice.generation.new_tokens if choice.generation else 0
        return choice


class MeteredRetriever:
    """The retriever, counting one retrieval per query."""

    def __init__(self, retriever: Retriever, meter: Meter) -> None:
        self.inner, self.meter = retriever, meter

    def search(self, query: str, k: int) -> list[Hit]:
        self.meter.pending.retrievals += 1
        return self.inner.search(query, k)

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.meter.pending.retrievals += len(queries)
        return self.inner.batch_search(queries, k)


@dataclass(frozen=True)
class Attempt:
    """One answer: parsed from a CoT generation over `passages`, with the prober's verdict.
    `answer` is the strict extraction ("" without an `Answer:`), `flexible` the flexible one
    (skillrag.prompts.cot); `budget_hit`: the generation ended on the token budget."""

    reasoning: str
    answer: str
    passages: tuple[Passage, ...]
    hidden: Mapping[int, torch.Tensor] | None
    score: float | None
    accepted: bool | None
    flexible: str = ""
    budget_hit: bool = False


def answer_with(
    lm: LM,
    question: str,
    passages: Sequence[Passage],
    gate: Gate | None,
    max_new_tokens: int,
    capture: Sequence[int] = (),
    passage_words: int | None = None,
) -> Attempt:
    """CoT-answer `question` over `passages` (closed-book when empty, each cut to `passage_words`
    words), capturing the gate's layers (and `capture`) in the same generation; the gate (the
    prober, or a token score) gives its verdict."""
    prompt = cot_prompt(question, passages, passage_words)
    layers = sorted({*(gate.layers if gate is not None else ()), *capture}) or None
    gen = lm.generate([prompt.text], max_new_tokens, stop=STOP, capture=layers, prefix=prompt.prefix)[0]
    budget_hit = gen.stopped_by == "length"
    parsed = parse_answer(gen.text, prompt.text, truncated=budget_hit)
    read = {"flexible": parsed.flexible, "budget_hit": budget_hit}
    if layers is not None and gen.hidden is None:
        raise RuntimeError(f"LM {lm.name!r} returned no hidden states for layers {layers}")
    if gate is None:
        return Attempt(parsed.reasoning, parsed.answer, tuple(passages), gen.hidden, None, None, **read)
    score = gate.score(gen)
    return Attempt(
        parsed.reasoning, parsed.answer, tuple(passages), gen.hidden, score, gate.accepts(score), **read
    )


def interleave(ranked: Sequence[Sequence[Passage]], k: int) -> list[Passage]:
    """Round-robin over ranked lists, first occurrence of each passage, at most k."""
    merged: dict[str, Passage] = {}
    for rank in range(max((len(r) for r in ranked), default=0)):
        for passages in ranked:
            if rank < len(passages):
                merged.setdefault(passages[rank].id, passages[rank])
    return list(merged.values())[:k]


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

        New evidence is interleaved with the previous round's passages, so a follow-up query
        adds the missing piece instead of discarding what was already found.
        """
        m = self.method
        passages: list[Passage] = []
        if queries:
            found = [[hit.passage for hit in m.retriever.search(q, m.parts.k)] for q in queries]
            previous = list(self.last.passages) if self.last else []
            passages = interleave([*found, previous], m.parts.k)
            self.issued.update(query_key(q) for q in queries)
        attempt = answer_with(
            m.lm,
            self.question.question,
            passages,
            m.gate,
            m.parts.max_new_tokens,
            m.parts.state_layers,
            m.parts.passage_words,
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
        if m.parts.state_layers and attempt.hidden is not None:
            state = state_vector(attempt.hidden, m.parts.state_layers).tolist()
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
            ),
            routing,
            fallbacks,
        )
        self.last = attempt
        return attempt

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


def is_question_failure(err: BaseException) -> bool:
    """Whether `err` is a failure of one question at run time, recorded as an error trace:
    RuntimeError (torch's out-of-memory and kernel errors, a generation without hidden states),
    MemoryError, and OSError (a retriever's or the disk's I/O). Everything else is a bug in the
    code or the setup (TypeError, KeyError, AttributeError, AssertionError, NameError,
    IndexError, ImportError, ValueError, and NotImplementedError / RecursionError among the
    RuntimeErrors) and must stop the stage rather than become data."""
    return isinstance(err, (RuntimeError, MemoryError, OSError)) and not isinstance(
        err, (NotImplementedError, RecursionError)
    )


class Method(ABC):
    """A QA pipeline over shared components: `answer(question) -> Trace`."""

    name: ClassVar[str]
    needs_prober: ClassVar[bool] = False
    needs_classifier: ClassVar[bool] = False
    # Whether the method is meant to retrieve, and what decides when it does (the param or
    # artifact to check): the runs gate fails a retrieving method that never retrieved on a
    # dataset, naming `trigger` (skillrag.quality.runs).
    retrieves: ClassVar[bool] = True
    trigger: ClassVar[str] = "nothing (it always retrieves): check the index and the retriever"
    # The inputs (questions, model, prompts, index, prober, router) and dotted params its traces
    # depend on: the run settings record exactly these, so a resumed run is refused only for a
    # change the method would see (skillrag.stages.run_settings).
    reads: ClassVar[tuple[str, ...]] = ("questions", "model", "prompts", "lm.max_new_tokens", "lm.prompt_format")

    def __init__(self, parts: Components, meter: Meter | None = None) -> None:
        """`meter`: count on another method's meter (a method that runs others as its steps)."""
        if self.needs_prober and parts.prober is None:
            raise ValueError(f"method {self.name!r} needs a trained prober")
        self.parts = parts
        # What accepts an answer (score and verdict in its round): the prober when given;
        # entropy_rag sets its own.
        self.gate: Gate | None = ProberGate(parts.prober) if parts.prober is not None else None
        self.meter = meter if meter is not None else Meter()
        self.lm = MeteredLM(parts.lm, self.meter)
        self.retriever = MeteredRetriever(parts.retriever, self.meter)

    def fork(self, parts: Components) -> Method:
        """The same method over other components (a worker's LM and retriever fronts when
        questions run concurrently), with its own meter: an instance answers one question at a
        time."""
        return type(self)(parts)

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
