"""The chain-of-thought QA prompt (Question / Rationale / Answer, a Passages block first when
there is evidence) and the parser that reads the reasoning and the answer back: strictly (the
`Answer:` text, the headline) and flexibly (also a short final sentence of the model's own).

A prompt is returned as (prefix, body): the prefix is the few-shot block shared by every
prompt of the same kind, so the LM can compute its KV cache once. Its last line is the cue
(`Rationale:`) that the answer continues; the exemplars end with an `Answer:` line, which the
strict parser requires. Passages are cut to `retrieval.passage_words` words: with five passages
prefill dominates an answer's cost on the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillrag.data.schema import Passage
from skillrag.prompts import load_prompt
from skillrag.text import ANSWER_LINE, normalized_tokens, split_sentences

# A completed `Answer:` line (the answer-line pattern followed by a line break) ends the
# generation and is kept: instruct models (Qwen) go on past it ("To answer these questions,
# ...") to the token budget, which costs decode time and pools text that is not the answer into
# the prober's states. The parser reads the first such line.
COMPLETED_ANSWER_LINE = re.compile(ANSWER_LINE.pattern + r"(?=\n)", ANSWER_LINE.flags)
STOP = ("\nQuestion:", "\n\nPassages:", "\n\n\n", COMPLETED_ANSWER_LINE)


@dataclass(frozen=True)
class Prompt:
    prefix: str
    body: str

    @property
    def text(self) -> str:
        return self.prefix + self.body


def format_passages(passages: Sequence[Passage], max_words: int | None) -> str:
    """One `[rank] title: text` line per passage, its text cut to `max_words` words (marked
    `...`); None keeps every word."""
    lines = []
    for rank, passage in enumerate(passages, start=1):
        words = passage.text.split()
        text = " ".join(words[:max_words]) + (" ..." if max_words is not None and len(words) > max_words else "")
        lines.append(f"[{rank}] {passage.title}: {text}")
    return "\n".join(lines)


def cot_prompt(question: str, passages: Sequence[Passage] = (), passage_words: int | None = None) -> Prompt:
    """Few-shot CoT prompt; with passages, the RAG variant with a Passages block first, each
    passage cut to `passage_words` words (`retrieval.passage_words`; None: whole)."""
    if not passages:
        return Prompt(load_prompt("cot_fewshot"), f"Question: {question}\nRationale:")
    block = format_passages(passages, passage_words)
    return Prompt(load_prompt("cot_passages_fewshot"), f"Passages:\n{block}\nQuestion: {question}\nRationale:")


_UNFINISHED = re.compile(r"[^.!?]*$")
_ANSWER_IS = re.compile(r"^(so,?\s+)?the answer is\b\s*:?\s*", re.IGNORECASE)
FLEXIBLE_MAX_WORDS = 12
COPY_NGRAM = 4


@dataclass(frozen=True)
class ParsedAnswer:
    """A generation read back. `answer` is the strict extraction: the text after the first
    `Answer:` (own line or inline) to the end of that line, "" when there is none (scored
    wrong). `flexible` is the strict answer when there is one, else the generation's short final
    sentence when it is not copied from the prompt, else "" (see `flexible_answer`)."""

    reasoning: str
    answer: str
    flexible: str


def parse_answer(generated: str, prompt: str = "", truncated: bool = False) -> ParsedAnswer:
    """Reasoning, strict and flexible answers of the text generated after `Rationale:`.
    `prompt` is the text the model saw (passages, exemplars, question), which the flexible
    answer must not copy; `truncated`: the generation was cut by the token budget."""
    match = ANSWER_LINE.search(generated)
    if match:
        answer = match.group("answer").strip()
        reasoning = generated[: match.start()].strip()
    else:
        answer, reasoning = "", generated.strip()
    return ParsedAnswer(reasoning, answer, answer or flexible_answer(reasoning, prompt, truncated))


def flexible_answer(reasoning: str, prompt: str, truncated: bool = False) -> str:
    """The final sentence of `reasoning` (less a leading "The answer is", the label small models
    write instead of `Answer:`) when it has at most FLEXIBLE_MAX_WORDS words and no run of
    COPY_NGRAM normalised words that also occurs in `prompt`, else "". When `truncated`, the
    unfinished words after the last sentence end (. ! ?) are not a sentence and are dropped.

    A final sentence copied from a passage often contains the gold without answering (a 0.5B
    model's budget-cut rationale), so it must not count as an answer; a short answer that is
    an entity named in the passages (under COPY_NGRAM words) is how extractive answers look,
    so it stays.
    """
    if truncated:
        reasoning = _UNFINISHED.sub("", reasoning)
    lines = [line.strip() for line in reasoning.splitlines() if line.strip()]
    if not lines:
        return ""
    sentence = _ANSWER_IS.sub("", split_sentences(lines[-1])[-1].strip())
    words = normalized_tokens(sentence)
    if not words or len(sentence.split()) > FLEXIBLE_MAX_WORDS:
        return ""
    return "" if _ngrams(words) & _ngrams(normalized_tokens(prompt)) else sentence


def _ngrams(tokens: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + COPY_NGRAM]) for i in range(len(tokens) - COPY_NGRAM + 1)}
