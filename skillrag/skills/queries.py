"""Query text helpers shared by the skills, the routers and Probing-RAG's re-query.

BM25 ranks by content words, so two queries with the same content words retrieve the same
passages: a query's identity (`query_key`) is its set of SQuAD-normalised tokens minus stop
words, and an *echo* is a query whose content words nearly equal the question's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from skillrag.text import normalize

_STOPWORDS = """a an the and or but if then than of in on at to for from by with about as into onto over
under between after before during since until while is are was were be been being am do does did done
has have had having it its this that these those there here which who whom whose what when where why how
i you he she we they me him her us them my your his our their not no yes so such can could would should
will shall may might must also any some all each both either neither one ones other another same very
just only most more many much"""
STOPWORDS = frozenset(_STOPWORDS.split())
ECHO_JACCARD = 0.8
MAX_QUERY_WORDS = 32


def keywords(text: str) -> list[str]:
    """Content tokens of `text` in first-seen order, normalised, without stop words or repeats."""
    return list(dict.fromkeys(t for t in normalize(text).split() if t not in STOPWORDS))


def query_key(query: str) -> frozenset[str]:
    """What makes two queries 'the same' to BM25: their content-word sets."""
    return frozenset(keywords(query))


def is_echo(query: str, question: str, threshold: float = ECHO_JACCARD) -> bool:
    """True when the query's content words overlap the question's by Jaccard >= threshold."""
    a, b = query_key(query), query_key(question)
    return bool(a) and len(a & b) / len(a | b) >= threshold


def fresh(queries: Iterable[str], issued: Iterable[frozenset[str]]) -> list[str]:
    """The queries with content words that were not issued before (nor twice in `queries`)."""
    seen = set(issued)
    kept = []
    for query in queries:
        key = query_key(query)
        if key and key not in seen:
            seen.add(key)
            kept.append(query)
    return kept


_LABEL = re.compile(
    r"^\s*(?:[-*•]|\d+[.)]|(?:sub-?)?(?:query|question|search query)\s*\d*\s*:)\s*", re.IGNORECASE
)


def clean_query(line: str) -> str:
    """One generated line as a query: no bullet, numbering, `Query:` label or quotes; capped length."""
    text = line.strip()
    while (stripped := _LABEL.sub("", text, count=1)) != text:
        text = stripped
    words = text.strip().strip("\"'`").split()
    return " ".join(words[:MAX_QUERY_WORDS]).rstrip("?.!")


def join_terms(*parts: Sequence[str]) -> str:
    """The unique terms of the parts, in order, as one query string (capped like any query)."""
    return " ".join(list(dict.fromkeys(t for part in parts for t in part))[:MAX_QUERY_WORDS])
