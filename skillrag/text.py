"""How the project reads text: the bottom layer every package may import (it imports nothing of skillrag).

`normalize` is `normalize_answer` of the SQuAD v1.1 evaluation script: lower-case, drop
punctuation, drop the articles a/an/the, fold whitespace. Data deduplication, skill queries and
the answer metrics all compare text through it, so they agree on what "the same words" means.

`ANSWER_LINE` is the one pattern of the CoT answer line (`Answer: <text>`): the prompt's parser
reads the answer with it, generation stops at it, and the LM pools the answer's hidden states
over its tokens (skillrag.prompts.cot, skillrag.lm.hf). It lives here, not in prompts/, so the
LM layer can use it without importing the prompts. `split_sentences` is the one sentence
splitter (the flexible answer, IRCoT's steps, FLARE's and DRAGIN's token sentences).
"""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)

ANSWER_LINE = re.compile(r"\banswer[ \t]*:[ \t]*(?P<answer>[^\n]*)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")


def normalize(text: str) -> str:
    """SQuAD-normalised text: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalized_tokens(text: str) -> list[str]:
    """The whitespace tokens of `normalize(text)`."""
    return normalize(text).split()


def answer_span(text: str) -> tuple[int, int] | None:
    """Where the answer text of the first `Answer:` line lies in `text` (start, end; surrounding
    blanks excluded), None when there is no such line or it is empty."""
    match = ANSWER_LINE.search(text)
    if match is None or not match.group("answer").strip():
        return None
    answer = match.group("answer")
    start = match.start("answer") + len(answer) - len(answer.lstrip())
    return start, start + len(answer.strip())


def split_sentences(text: str) -> list[str]:
    """`text` as consecutive sentences that join back to it. A sentence runs from the previous
    one's end (the blanks between them open it) through `.`, `!` or `?` before whitespace, or
    through a line break after some text; the last one takes the rest. "" has none."""
    found, start = [], 0
    while start < len(text):
        begin = len(text) - len(text[start:].lstrip())
        end = _SENTENCE_END.search(text, begin)
        stop = end.end() if end else len(text)
        found.append(text[start:stop])
        start = stop
    return found
