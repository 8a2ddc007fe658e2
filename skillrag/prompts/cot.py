"""The chain-of-thought QA prompt (Question / Rationale / Answer, a Passages block first when
there is evidence) and the parser that reads the reasoning and the answer back.

A prompt is returned as (prefix, body): the prefix is the few-shot block shared by every
prompt of the same kind, so the LM can compute its KV cache once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillrag.data.schema import Passage
from skillrag.prompts import load_prompt

STOP = ("\nQuestion:", "\n\nPassages:", "\n\n\n")
MAX_PASSAGE_CHARS = 600


@dataclass(frozen=True)
class Prompt:
    prefix: str
    body: str

    @property
    def text(self) -> str:
        return self.prefix + self.body


def format_passages(passages: Sequence[Passage], max_chars: int = MAX_PASSAGE_CHARS) -> str:
    lines = []
    for rank, passage in enumerate(passages, start=1):
        text = " ".join(passage.text.split())
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0] + " ..."
        lines.append(f"[{rank}] {passage.title}: {text}")
    return "\n".join(lines)


def cot_prompt(question: str, passages: Sequence[Passage] = ()) -> Prompt:
    """Few-shot CoT prompt; with passages, the RAG variant with a Passages block first."""
    if not passages:
        return Prompt(load_prompt("cot_fewshot"), f"Question: {question}\nRationale:")
    block = format_passages(passages)
    return Prompt(load_prompt("cot_passages_fewshot"), f"Passages:\n{block}\nQuestion: {question}\nRationale:")


_ANSWER = re.compile(r"^\s*Answer\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_answer(generated: str) -> tuple[str, str]:
    """(reasoning, answer) from the text generated after `Rationale:`.

    The answer is the first `Answer:` line; without one, the last non-empty line stands in
    (small models sometimes skip the label). Empty generations give ("", "").
    """
    match = _ANSWER.search(generated)
    if match:
        return generated[: match.start()].strip(), match.group(1).strip()
    lines = [line.strip() for line in generated.strip().splitlines() if line.strip()]
    if not lines:
        return "", ""
    return "\n".join(lines[:-1]), lines[-1]
