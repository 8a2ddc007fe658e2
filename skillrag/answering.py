"""The one answer path that the prober's training data and every method share:
CoT prompt -> generate -> parse -> pooled states -> the checker's verdict.

`extract` (skillrag.pipeline.stages.extract) answers many questions at once with `answer_batch` and stores
what it returns; a method answers one question with `answer_with`, which is `answer_batch` on
one question, and its checker scores what it returns. Prompt, stop rule, parser and pooled states
are therefore the same in training and at inference: the prober is applied to exactly the kind
of state it was trained on.

An answer without an `Answer:` line (or with an empty one) is never accepted: the parser could
not read it, so whatever the checker's score it is a failure state, and its round says so in
`fallbacks` (NO_ANSWER).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from skillrag.data.schema import Passage
from skillrag.lm.base import LM, Generation
from skillrag.prompts.cot import STOP, Prompt, cot_prompt, parse_answer

DecisionPoint = Literal["before_retrieval", "after_evidence"]  # closed-book answers; answers over passages
NO_ANSWER = "no_answer_line: the answer has no Answer: line, so no gate may accept it"


class Prober(Protocol):
    """What methods need from the prober (skillrag.probe.prober.Prober fits): the layers and the
    pooling (`skillrag.lm.base.POOLINGS`) it reads, a score and the cut of each decision point."""

    @property
    def layers(self) -> list[int]: ...

    @property
    def pooling(self) -> str: ...

    def score(self, hidden: Mapping[int, torch.Tensor]) -> float: ...

    def accepts(self, score: float, point: DecisionPoint) -> bool: ...


class Checker(Protocol):
    """What accepts or rejects an answer from its generation: the prober (hidden states of
    `layers`, captured in the same generation) or a score of the tokens alone (entropy_rag)."""

    @property
    def layers(self) -> list[int]: ...

    def score(self, generation: Generation) -> float: ...

    def accepts(self, score: float, point: DecisionPoint) -> bool: ...


@dataclass(frozen=True)
class ProberChecker:
    """The prober as a checker: it scores the generation's states in the prober's pooling."""

    prober: Prober

    @property
    def layers(self) -> list[int]:
        return self.prober.layers

    def score(self, generation: Generation) -> float:
        return self.prober.score((generation.pooled or {}).get(self.prober.pooling, {}))

    def accepts(self, score: float, point: DecisionPoint) -> bool:
        return self.prober.accepts(score, point)


@dataclass(frozen=True)
class Attempt:
    """One answer: parsed from a CoT generation over `passages`, with the checker's verdict.
    `answer` is the strict extraction ("" without an `Answer:`), `flexible` the flexible one
    (skillrag.prompts.cot); `budget_hit`: the generation ended on the token budget; `notes` go to
    the round's `fallbacks` (NO_ANSWER). `generation` and `prompt` are what it was read from
    (None and "" for an answer a method formed itself, e.g. IRCoT's)."""

    reasoning: str
    answer: str
    passages: tuple[Passage, ...]
    hidden: Mapping[int, torch.Tensor] | None
    score: float | None
    accepted: bool | None
    flexible: str = ""
    budget_hit: bool = False
    notes: tuple[str, ...] = ()
    generation: Generation | None = None
    prompt: str = ""


def answer_batch(
    lm: LM,
    questions: Sequence[str],
    evidence: Sequence[Sequence[Passage]],
    checker: Checker | None,
    max_new_tokens: int,
    capture: Sequence[int] = (),
    passage_words: int | None = None,
) -> list[Attempt]:
    """CoT-answer each question over its passages (closed-book when empty, each cut to
    `passage_words` words), one generate call per few-shot prefix, capturing the checker's layers
    (and `capture`) in the same generation; the checker, when given, gives its verdict (before_retrieval
    closed-book, after_evidence over passages). Attempts come back in the order of `questions`."""
    prompts = [cot_prompt(q, passages, passage_words) for q, passages in zip(questions, evidence, strict=True)]
    layers = sorted({*(checker.layers if checker is not None else ()), *capture}) or None
    generations: dict[int, Generation] = {}
    for prefix in dict.fromkeys(p.prefix for p in prompts):
        group = [i for i, p in enumerate(prompts) if p.prefix == prefix]
        texts = [prompts[i].text for i in group]
        generations.update(zip(group, lm.generate(texts, max_new_tokens, stop=STOP, capture=layers, prefix=prefix)))
    attempts = []
    for i, (prompt, passages) in enumerate(zip(prompts, evidence)):
        if layers is not None and generations[i].pooled is None:
            raise RuntimeError(f"LM {lm.name!r} returned no hidden states for layers {layers}")
        attempts.append(_read(prompt, tuple(passages), generations[i], checker))
    return attempts


def answer_with(
    lm: LM,
    question: str,
    passages: Sequence[Passage],
    checker: Checker | None,
    max_new_tokens: int,
    capture: Sequence[int] = (),
    passage_words: int | None = None,
) -> Attempt:
    """`answer_batch` for one question: how a method answers."""
    return answer_batch(lm, [question], [passages], checker, max_new_tokens, capture, passage_words)[0]


def _read(prompt: Prompt, passages: tuple[Passage, ...], generation: Generation, checker: Checker | None) -> Attempt:
    """The attempt a generation gives: parsed, and judged by the checker; an answer the parser could
    not read is rejected whatever its score."""
    budget_hit = generation.stopped_by == "length"
    parsed = parse_answer(generation.text, prompt.text, truncated=budget_hit)
    score = accepted = None
    notes: tuple[str, ...] = ()
    if checker is not None:
        score = checker.score(generation)
        accepted = bool(parsed.answer) and checker.accepts(score, "after_evidence" if passages else "before_retrieval")
        notes = () if parsed.answer else (NO_ANSWER,)
    return Attempt(
        parsed.reasoning, parsed.answer, passages, generation.hidden, score, accepted, parsed.flexible, budget_hit,
        notes, generation, prompt.text,
    )
