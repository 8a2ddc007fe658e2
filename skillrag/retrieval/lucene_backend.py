"""Lucene BM25 through Anserini (pyserini's jar): the default backend, the paper's retriever.

Both building and searching use Anserini's default English analyzer (lower-casing, Lucene's
33-word English stop list, Porter stemming) over the `contents` field, title + "\\n" + text.
The raw JSON document is stored in the index, so a hit is turned back into a Passage without
reading the corpus files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillrag.data.schema import Passage
from skillrag.files import DataError
from skillrag.retrieval.base import Hit, check_k, require_index
from skillrag.retrieval.index_manifest import verify_index
from skillrag.retrieval.java import java_class


def build_lucene_index(collection_dir: Path, out_dir: Path, threads: int) -> int:
    """Index a JsonCollection directory into `out_dir` with Anserini; returns the index's doc count.

    Runs `IndexCollection` from its `Args` object rather than through `IndexCollection.main`, so
    that its counters can be read afterwards: a document Anserini skipped is an error here, not a
    line in a log.
    """
    args = java_class("io.anserini.index.IndexCollection$Args")()
    args.collectionClass = "JsonCollection"
    args.generatorClass = "DefaultLuceneDocumentGenerator"
    args.input = str(collection_dir)
    args.index = str(out_dir)
    args.threads = threads
    args.storeRaw = True
    args.quiet = True
    indexer = java_class("io.anserini.index.IndexCollection")(args)
    indexer.run()
    counters = indexer.getCounters()
    failed = {name: getattr(counters, name).get() for name in ("skipped", "errors", "empty", "unindexable")}
    if any(failed.values()):
        raise DataError(f"Lucene indexing of {collection_dir} rejected documents: {failed}")
    return count_lucene_docs(out_dir)


def count_lucene_docs(index_dir: Path) -> int:
    """Documents in a built Lucene index, read from the index itself."""
    searcher = java_class("io.anserini.search.SimpleSearcher")(str(index_dir))
    try:
        return int(searcher.get_total_num_docs())
    finally:
        searcher.close()


def _passage_from_raw(raw: str) -> Passage:
    doc = json.loads(raw)
    title, _, text = doc["contents"].partition("\n")
    return Passage(id=doc["id"], title=title, text=text)


class LuceneRetriever:
    """BM25 (k1, b set on the searcher) over the Lucene index in `<index_dir>/lucene`."""

    def __init__(self, index_dir: str | Path, k1: float = 0.9, b: float = 0.4, threads: int | None = None):
        path = require_index(Path(index_dir) / "lucene", "segments_*", "Lucene")
        verify_index(index_dir, "lucene")
        self._searcher = java_class("io.anserini.search.SimpleSearcher")(str(path))
        self._searcher.set_bm25(float(k1), float(b))
        self.threads = threads or os.cpu_count() or 1
        self._array_list = java_class("java.util.ArrayList")

    def search(self, query: str, k: int) -> list[Hit]:
        return [self._hit(doc) for doc in self._searcher.search(query, check_k(k))]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Anserini's multi-threaded batch search; results come back in the order of `queries`."""
        qids = [str(i) for i in range(len(queries))]
        results = self._searcher.batch_search(
            self._java_list(queries), self._java_list(qids), check_k(k), self.threads
        )
        return [[self._hit(doc) for doc in results.get(qid)] for qid in qids]

    def close(self) -> None:
        self._searcher.close()

    def _java_list(self, items: Sequence[str]) -> Any:
        array = self._array_list()
        for item in items:
            array.add(item)
        return array

    @staticmethod
    def _hit(doc: Any) -> Hit:
        return Hit(passage=_passage_from_raw(doc.lucene_document.get("raw")), score=float(doc.score))
