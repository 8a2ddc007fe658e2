"""BM25 with bm25s: a pure-Python (numpy) backend for machines without a JVM.

Tokenisation follows Lucene's default English analysis as closely as bm25s allows, so the two
backends rank alike: lower-casing, the same 33-word English stop list (bm25s "en" is Lucene's
list), and Snowball English stemming (PyStemmer; Lucene uses the older Porter stemmer, which
differs on a few suffixes). bm25s splits on `\\w\\w+`, so one-character tokens are dropped.
Scoring is bm25s' "lucene" variant, the same formula Lucene uses.

bm25s computes the BM25 weights when it indexes, so k1 and b are fixed by the build: opening
the index with other values is an error rather than a silent mismatch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
import Stemmer
from bm25s.tokenization import Tokenized

from skillrag.data.schema import Passage
from skillrag.errors import ArtifactError
from skillrag.retrieval.base import Hit, check_k, require_index
from skillrag.retrieval.index_manifest import verify_index

_STEMMER = Stemmer.Stemmer("english")
_PARAMS_FILE = "params.index.json"


def tokenize(texts: Sequence[str], return_ids: bool = False, show_progress: bool = False) -> Any:
    """What BM25 sees, for documents and queries alike: token strings per text, or (with
    `return_ids`) bm25s' Tokenized ids + vocabulary, which indexes faster."""
    return bm25s.tokenize(
        list(texts), stopwords="en", stemmer=_STEMMER, return_ids=return_ids, show_progress=show_progress
    )


def build_bm25s_index(passages: Sequence[Passage], out_dir: Path, k1: float, b: float) -> int:
    """Index `passages` (title + text) into `out_dir`, storing them for retrieval; returns the
    index's doc count as saved on disk."""
    model = bm25s.BM25(k1=k1, b=b, method="lucene")
    model.index(
        _sorted_vocabulary(tokenize([p.contents for p in passages], return_ids=True, show_progress=True))
    )
    model.save(out_dir, corpus=[p.to_dict() for p in passages], show_progress=False)
    return count_bm25s_docs(out_dir)


def _sorted_vocabulary(tokenized: Tokenized) -> Tokenized:
    """Renumber the vocabulary in sorted token order. bm25s numbers it in set order, which follows
    Python's per-process hash seed, so without this every build would save different files."""
    tokens = sorted(tokenized.vocab)
    new_id = {tokenized.vocab[token]: i for i, token in enumerate(tokens)}
    return Tokenized(
        ids=[[new_id[i] for i in doc] for doc in tokenized.ids], vocab={t: i for i, t in enumerate(tokens)}
    )


def count_bm25s_docs(index_dir: Path) -> int:
    """Documents in a saved bm25s index, from its parameters file."""
    return int(json.loads((index_dir / _PARAMS_FILE).read_text())["num_docs"])


class BM25sRetriever:
    """BM25 over the bm25s index in `<index_dir>/bm25s`; no JVM involved."""

    def __init__(self, index_dir: str | Path, k1: float = 0.9, b: float = 0.4):
        path = require_index(Path(index_dir) / "bm25s", _PARAMS_FILE, "bm25s")
        verify_index(index_dir, "bm25s")
        self._model = bm25s.BM25.load(path, load_corpus=True, show_progress=False)
        if (self._model.k1, self._model.b) != (k1, b):
            raise ArtifactError(
                f"the bm25s index at {path} was built with k1={self._model.k1}, b={self._model.b}, "
                f"not k1={k1}, b={b}; bm25s fixes them at build time: rebuild with `skillrag index`"
            )
        self._num_docs = int(self._model.scores["num_docs"])

    def search(self, query: str, k: int) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Score every query; like Lucene, return only documents that match some query term."""
        check_k(k)
        vocab = self._model.vocab_dict
        token_ids = [[vocab[t] for t in tokens if t in vocab] for tokens in tokenize(queries)]
        results: list[list[Hit]] = [[] for _ in queries]
        answerable = [i for i, ids in enumerate(token_ids) if ids]
        if not answerable:
            return results
        docs, scores = self._model.retrieve(
            [token_ids[i] for i in answerable], k=min(k, self._num_docs), show_progress=False
        )
        for i, row_docs, row_scores in zip(answerable, docs, scores, strict=True):
            results[i] = [
                Hit(passage=Passage(**doc), score=float(score))
                for doc, score in zip(row_docs, row_scores, strict=True)
                if score > 0
            ]
        return results
