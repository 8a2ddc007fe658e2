"""The index stage: the corpus as a pyserini JsonCollection and both BM25 indexes (seconds).

Both are built from the same validated passages in one go, so `retrieval.backend` can switch
between lucene and bm25s at query time without rebuilding. The dense index (16 minutes of two
cores for the default corpus) is built on first use instead (`skillrag.retrieval.dense.build_dense`).
The collection and the index directory are written atomically: a failing build leaves the
previous outputs (or nothing), never a half index.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

from tqdm import tqdm

from skillrag.data.schema import Passage
from skillrag.files import DataError, atomic_path
from skillrag.retrieval.bm25s_backend import build_bm25s_index
from skillrag.retrieval.index_manifest import BM25_DIRS, write_index_manifest
from skillrag.retrieval.lucene_backend import build_lucene_index

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexStats:
    """What the build produced and how long each part took; the index gate checks the counts.
    `rebuild`: the build reproduced the index the recorded run describes (the same fingerprint),
    so the stage's recorded timing stays that run's (skillrag.pipeline.timing)."""

    passages: int
    lucene_docs: int
    bm25s_docs: int
    collection_seconds: float
    lucene_seconds: float
    bm25s_seconds: float
    rebuild: bool = False

    @property
    def seconds(self) -> float:
        return self.collection_seconds + self.lucene_seconds + self.bm25s_seconds


def validate_passages(passages: Iterable[Passage]) -> list[Passage]:
    """The passages as a list; raises DataError on an empty corpus, duplicate ids, empty text, or a
    title with a newline (the stored `title\\ntext` could not be split back into title and text)."""
    passages = list(passages)
    if not passages:
        raise DataError("the corpus is empty: there is nothing to index")
    counts = Counter(p.id for p in passages)
    _reject([pid for pid, n in counts.items() if n > 1], "duplicate passage ids")
    _reject([p.id for p in passages if not p.text.strip()], "passages with empty text")
    _reject([p.id for p in passages if "\n" in p.title], "passage titles containing a newline")
    return passages


def _reject(ids: list[str], problem: str, shown: int = 10) -> None:
    if ids:
        more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
        raise DataError(f"{problem}: {', '.join(map(repr, ids[:shown]))}{more}")


def write_collection(passages: Sequence[Passage], out_dir: Path, shards: int) -> None:
    """Write `{"id", "contents"}` lines (pyserini JsonCollection) into `shards` files, one per
    indexing thread, since Anserini reads each file with a single thread."""
    out_dir.mkdir(parents=True)
    shards = max(1, min(shards, len(passages)))
    handles = [(out_dir / f"part-{i:05d}.jsonl").open("w", encoding="utf-8") for i in range(shards)]
    try:
        for number, passage in enumerate(tqdm(passages, desc="write collection", unit="doc")):
            doc = {"id": passage.id, "contents": passage.contents}
            handles[number % shards].write(json.dumps(doc, ensure_ascii=False) + "\n")
    finally:
        for handle in handles:
            handle.close()


def read_collection(corpus_dir: Path) -> list[Passage]:
    """The passages of a collection `write_collection` wrote, in corpus order (its shards hold
    passages round-robin): what the index holds, whatever `index.corpus_file` says now."""
    shards = [path.read_text(encoding="utf-8").splitlines() for path in sorted(Path(corpus_dir).glob("part-*.jsonl"))]
    lines = [shard[row] for row in range(max(map(len, shards), default=0)) for shard in shards if row < len(shard)]
    passages = []
    for line in lines:
        doc = json.loads(line)
        title, _, text = doc["contents"].partition("\n")
        passages.append(Passage(id=doc["id"], title=title, text=text))
    return passages


def build_indexes(
    passages: Iterable[Passage],
    corpus_dir: str | Path,
    index_dir: str | Path,
    threads: int = 2,
    k1: float = 0.9,
    b: float = 0.4,
) -> IndexStats:
    """Write the collection to `corpus_dir`, then `index_dir/lucene`, `index_dir/bm25s` and the
    manifest of their files (`index_dir/manifest.json`, checked whenever a backend opens).

    `k1` and `b` matter only to bm25s, which bakes them into its index; Lucene takes them at
    query time. Raises DataError on bad passages or when an index's count differs from the
    corpus count.
    """
    passages = validate_passages(passages)
    with atomic_path(corpus_dir) as corpus_tmp, atomic_path(index_dir) as index_tmp:
        index_tmp.mkdir(parents=True)
        start = perf_counter()
        write_collection(passages, corpus_tmp, shards=threads)
        written = perf_counter()
        log.info("indexing %d passages with Lucene (%d threads)", len(passages), threads)
        lucene_docs = build_lucene_index(corpus_tmp, index_tmp / "lucene", threads)
        lucene_done = perf_counter()
        bm25s_docs = build_bm25s_index(passages, index_tmp / "bm25s", k1, b)
        bm25s_done = perf_counter()
        if not len(passages) == lucene_docs == bm25s_docs:
            raise DataError(f"doc counts differ: corpus {len(passages)}, Lucene {lucene_docs}, bm25s {bm25s_docs}")
        write_index_manifest(index_tmp, BM25_DIRS)
    return IndexStats(
        passages=len(passages),
        lucene_docs=lucene_docs,
        bm25s_docs=bm25s_docs,
        collection_seconds=written - start,
        lucene_seconds=lucene_done - written,
        bm25s_seconds=bm25s_done - lucene_done,
    )
