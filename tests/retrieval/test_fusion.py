"""Reciprocal rank fusion on constructed rank lists, and the hybrid retriever's depth and top k."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from skillrag.data.schema import Passage
from skillrag.retrieval import Hit, HybridRetriever, open_retriever
from skillrag.retrieval.fusion import reciprocal_rank_fusion
from tests.retrieval.corpus import BuiltIndex


def test_the_fused_order_and_scores_are_rrfs() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=60)
    assert [pid for pid, _ in fused] == ["a", "c", "b", "d"]
    assert dict(fused) == pytest.approx({"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62, "d": 1 / 63})


def test_ties_go_to_the_best_single_rank_then_the_id_whatever_the_order_of_the_lists() -> None:
    lists = [["z", "b", "a"], ["c", "d", "a"]]  # k=1: z and c score 1/2 at rank 1, a 1/4 + 1/4 at rank 3
    expected = ["c", "z", "a", "b", "d"]
    assert [pid for pid, _ in reciprocal_rank_fusion(lists, k=1)] == expected
    assert [pid for pid, _ in reciprocal_rank_fusion(lists[::-1], k=1)] == expected


def test_a_larger_constant_flattens_the_ranks() -> None:
    lists = [["a", "b", "c", "d"], ["x", "y", "z", "d"]]
    assert reciprocal_rank_fusion(lists, k=1)[0][0] == "a"  # small k: a first place (1/2) beats two fourth places (2/5)
    assert reciprocal_rank_fusion(lists, k=100)[0][0] == "d"  # large k: being in both lists wins


class _Listed:
    """A retriever that returns fixed (id, score) hits for every query and records the k asked for."""

    def __init__(self, scored: Sequence[tuple[str, float]]):
        self.hits = [Hit(Passage(pid, pid.upper(), f"text {pid}"), score) for pid, score in scored]
        self.asked: list[int] = []

    def search(self, query: str, k: int) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.asked.append(k)
        return [self.hits[:k] for _ in queries]


def test_each_side_contributes_its_top_depth_and_k_hits_come_back() -> None:
    sparse = _Listed([("a", 9.0), ("b", 8.0), ("c", 7.0)])
    dense = _Listed([("d", 0.9), ("c", 0.8), ("e", 0.7)])
    hits = HybridRetriever(sparse, dense, fusion_k=60, depth=2).search("q", 2)
    assert [hit.passage.id for hit in hits] == ["a", "d"]  # c's sparse rank 3 is beyond the depth: only 1/62 from dense
    assert [hit.score for hit in hits] == pytest.approx([1 / 61, 1 / 61])
    assert hits[0].passage == Passage("a", "A", "text a")
    assert sparse.asked == dense.asked == [4]  # twice the depth, so ties at the cut are ranked by id
    deeper = HybridRetriever(sparse, dense, fusion_k=60, depth=3).search("q", 2)
    assert [hit.passage.id for hit in deeper] == ["c", "a"]  # c in both lists: 1/63 + 1/62


def test_k_beyond_the_depth_widens_the_depth() -> None:
    sparse, dense = _Listed([("a", 2.0), ("b", 1.0)]), _Listed([("c", 0.5), ("d", 0.4)])
    hits = HybridRetriever(sparse, dense, depth=1).search("q", 4)
    assert [hit.passage.id for hit in hits] == ["a", "c", "b", "d"]


def test_tied_bm25_scores_are_ranked_by_id_not_by_lucenes_order() -> None:
    sparse = _Listed([("b", 5.0), ("a", 5.0)])
    dense = _Listed([("x", 0.9)])
    assert [hit.passage.id for hit in HybridRetriever(sparse, dense).search("q", 3)] == ["a", "x", "b"]


def test_hybrid_over_the_built_index_returns_hits_of_both_sides(built: BuiltIndex) -> None:
    hybrid = open_retriever("hybrid", built.index_dir, fusion_depth=5, dense_dir=built.dense_dir)
    lucene, dense = open_retriever("lucene", built.index_dir), open_retriever("dense", built.index_dir, dense_dir=built.dense_dir)
    hits = hybrid.search("which scientist discovered penicillin", 6)
    assert len(hits) == 6 and hits[0].passage.id == "p09"
    assert all(isinstance(hit, Hit) for hit in hits)
    ids = {hit.passage.id for hit in hits}
    sides = [{hit.passage.id for hit in side.search("which scientist discovered penicillin", 6)} for side in (lucene, dense)]
    assert ids <= sides[0] | sides[1]
