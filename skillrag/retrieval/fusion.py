"""Hybrid retrieval: reciprocal rank fusion (Cormack, Clarke and Buettcher 2009) of Lucene BM25
and dense top lists.

RRF uses ranks only, so BM25 scores and cosine similarities, on unrelated scales, need no
calibration: a passage scores sum over lists of 1 / (k + rank), rank from 1, k = 60 by default
(the paper's value; `benchmarks/retrieval.py --fusion-k` sweeps it). Vocabulary mismatch, the
failure query rewriting repairs, is what the dense side adds: a passage that shares no word with
the question can still rank.
"""

from __future__ import annotations

from collections.abc import Sequence

from skillrag.retrieval.base import Hit, Retriever, check_k, ranked


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: float = 60) -> list[tuple[str, float]]:
    """Ids of the ranked lists `rankings` (best first) fused, best first, with their RRF scores.
    Ties are broken by the best rank the id reached in any list, then by id, so the order never
    depends on the order of the lists."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + rank)
            best[pid] = min(best.get(pid, rank), rank)
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], item[0]))


class HybridRetriever:
    """The RRF of `sparse` (Lucene BM25) and `dense`: each contributes its top `depth` (at least
    the `k` asked for), each list ordered by score then passage id so that fusion does not depend
    on how Lucene broke ties in this build. Both searches, the query's embedding included, happen
    inside `search`, so they are charged to the calling method's latency like any retrieval."""

    def __init__(self, sparse: Retriever, dense: Retriever, fusion_k: float = 60, depth: int = 20):
        self.sparse, self.dense, self.fusion_k, self.depth = sparse, dense, fusion_k, check_k(depth)

    def search(self, query: str, k: int) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        depth = max(self.depth, check_k(k))
        sides = [side.batch_search(queries, 2 * depth) for side in (self.sparse, self.dense)]
        return [self._fuse([ranked(hits, depth) for hits in lists], k) for lists in zip(*sides, strict=True)]

    def _fuse(self, lists: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
        passages = {hit.passage.id: hit.passage for hits in lists for hit in hits}
        fused = reciprocal_rank_fusion([[hit.passage.id for hit in hits] for hits in lists], self.fusion_k)
        return [Hit(passage=passages[pid], score=score) for pid, score in fused[:k]]
