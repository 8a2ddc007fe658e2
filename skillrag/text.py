"""SQuAD answer normalisation: the bottom layer every package may import (it imports nothing of skillrag).

`normalize` is `normalize_answer` of the SQuAD v1.1 evaluation script: lower-case, drop
punctuation, drop the articles a/an/the, fold whitespace. Data deduplication, skill queries and
the answer metrics all compare text through it, so they agree on what "the same words" means.
"""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """SQuAD-normalised text: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalized_tokens(text: str) -> list[str]:
    """The whitespace tokens of `normalize(text)`."""
    return normalize(text).split()
