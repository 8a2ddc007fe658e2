"""Generated tokens read as text, for the methods that decide token by token (FLARE, DRAGIN): where
each token's text starts, how many tokens a sentence takes, and which tokens are real words.

A generation's `pieces` are its tokens' texts; joined, they are the generated text. A *real word*
is a run of letters or digits that is not a stop word (skillrag.skills.queries.STOPWORDS): DRAGIN's
content-word filter, without a part-of-speech tagger.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from skillrag.lm.base import Generation
from skillrag.skills.queries import STOPWORDS
from skillrag.text import split_sentences

_WORD = re.compile(r"[^\W_]+")


def starts(pieces: Sequence[str]) -> list[int]:
    """The character offset of each piece in the joined text."""
    return [0, *accumulate(len(p) for p in pieces)][: len(pieces)]


def first_sentence(pieces: Sequence[str]) -> int:
    """How many leading tokens the first sentence (`skillrag.text.split_sentences`) takes: through
    the token holding its end; all of them when none ends."""
    found = split_sentences("".join(pieces))
    if len(found) < 2:
        return len(pieces)
    return sum(1 for start in starts(pieces) if start < len(found[0]))


def sentences(pieces: Sequence[str], text: str) -> list[tuple[str, int, int]]:
    """The consecutive sentences of a generation: (text, first token, end token) each. Their texts
    join to the generation's `text`: the last one ends as `text` does (cut at a stop string)."""
    found, start = [], 0
    while start < len(pieces):
        end = start + first_sentence(pieces[start:])
        found.append(("".join(pieces[start:end]), start, end))
        start = end
    if found:
        before = "".join(pieces[: found[-1][1]])
        last = text[len(before) :] if text.startswith(before) else found[-1][0]
        found[-1] = (last, *found[-1][1:])
    return found


@dataclass(frozen=True)
class Sentence:
    """One sentence of a generation: its text, tokens and their probabilities; `last`: nothing
    follows it and the generation ended on its own (a stop string or end of text); `newline`: a
    line break follows it."""

    text: str
    pieces: list[str]
    probs: list[float]
    last: bool
    newline: bool


def token_sentences(generation: Generation) -> list[Sentence]:
    """A generation as consecutive sentences (one empty sentence when nothing was generated)."""
    split = sentences(generation.pieces, generation.text) or [(generation.text, 0, 0)]
    stopped = generation.stopped_by != "length"
    found = []
    for i, (text, a, b) in enumerate(split):
        later = "".join(t for t, _, _ in split[i + 1 :])
        probs = [math.exp(lp) for lp in generation.logprobs[a:b]]
        found.append(Sentence(text, generation.pieces[a:b], probs, stopped and not later.strip(), later.startswith("\n")))
    return found


_LABELS = frozenset({"question", "rationale", "answer", "passages"})  # the CoT prompt's own field names


def is_real(word: str) -> bool:
    """Not a stop word, not one of the prompt's field labels, and not a lone letter (the "s" of "'s")."""
    return word.lower() not in STOPWORDS | _LABELS and (len(word) > 1 or word.isdigit())


def real_tokens(pieces: Sequence[str]) -> list[bool]:
    """Whether each token is part of a real word."""
    text, offsets = "".join(pieces), starts(pieces)
    spans = [m.span() for m in _WORD.finditer(text) if is_real(m.group())]
    return [
        any(a < start + len(piece) and start < b for a, b in spans) for start, piece in zip(offsets, pieces)
    ]


def real_words(
    text: str, weights: Sequence[float], offsets: Sequence[int], spans: Sequence[tuple[int, int]]
) -> list[tuple[str, float]]:
    """The real words of `text` inside `spans` (character ranges), in order, each with the summed
    weight of the tokens it overlaps (token i starts at `offsets[i]`; weights[i] is its weight)."""
    ends = [*offsets[1:], len(text)]
    found = []
    for lo, hi in spans:
        for match in _WORD.finditer(text, lo, hi):
            a, b = match.span()
            if is_real(match.group()):
                weight = sum(w for w, s, e in zip(weights, offsets, ends) if s < b and a < e)
                found.append((match.group(), weight))
    return found
