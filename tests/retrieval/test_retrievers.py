from __future__ import annotations

from pathlib import Path

import pytest

from skillrag.errors import ArtifactError
from skillrag.retrieval import (
    BACKENDS,
    BM25_BACKENDS,
    BM25sRetriever,
    IndexMissingError,
    Retriever,
    open_retriever,
)
from tests.retrieval.corpus import BuiltIndex

QUERIES = {
    "which scientist discovered penicillin": "p09",
    "highest mountain in the Himalayas": "p03",
    "wrought-iron lattice tower": "p00",
    "portrait painted by Leonardo da Vinci": "p08",
    "ocean liner that sank in 1912": "p12",
}


@pytest.fixture(params=BM25_BACKENDS)
def retriever(request: pytest.FixtureRequest, built: BuiltIndex) -> Retriever:
    return open_retriever(request.param, built.index_dir)


@pytest.fixture(params=BACKENDS)
def any_retriever(request: pytest.FixtureRequest, built: BuiltIndex) -> Retriever:
    return open_retriever(request.param, built.index_dir, dense_dir=built.dense_dir)


@pytest.mark.parametrize(("query", "expected"), QUERIES.items())
def test_the_passage_with_the_query_terms_ranks_first(
    retriever: Retriever, query: str, expected: str
) -> None:
    hits = retriever.search(query, k=5)
    assert hits[0].passage.id == expected
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_hits_rebuild_the_original_passage(any_retriever: Retriever, built: BuiltIndex) -> None:
    hit = any_retriever.search("Marie Curie radioactivity", k=1)[0]
    assert hit.passage == built.passages[5]


def test_batch_search_equals_single_search(any_retriever: Retriever) -> None:
    queries = [*QUERIES, "Paris France capital", "zzqx unknownword"]
    assert any_retriever.batch_search(queries, k=3) == [any_retriever.search(q, k=3) for q in queries]


def test_k_caps_the_hits_and_only_matching_passages_come_back(retriever: Retriever) -> None:
    assert len(retriever.search("the largest planet river desert", k=2)) == 2
    assert {hit.passage.id for hit in retriever.search("Paris", k=10)} == {"p00", "p19"}


@pytest.mark.parametrize("query", ["", "the of and", "zzqx unknownword"])
def test_a_query_without_indexed_terms_finds_nothing(retriever: Retriever, query: str) -> None:
    assert retriever.search(query, k=5) == []


def test_backends_agree_on_the_top_hit(built: BuiltIndex) -> None:
    lucene, bm25s = (open_retriever(backend, built.index_dir) for backend in BM25_BACKENDS)
    for query in QUERIES:
        assert lucene.search(query, 1)[0].passage.id == bm25s.search(query, 1)[0].passage.id


def test_lucene_takes_bm25_parameters_at_query_time(built: BuiltIndex) -> None:
    default = open_retriever("lucene", built.index_dir).search("Paris", k=2)
    other = open_retriever("lucene", built.index_dir, k1=1.5, b=1.0).search("Paris", k=2)
    assert [h.score for h in default] != [h.score for h in other]


def test_bm25s_refuses_parameters_it_was_not_built_with(built: BuiltIndex) -> None:
    with pytest.raises(ArtifactError, match="built with k1=0.9, b=0.4"):
        BM25sRetriever(built.index_dir, k1=1.2, b=0.75)


@pytest.mark.parametrize("backend", BACKENDS)
def test_searching_without_an_index_says_how_to_build_it(tmp_path: Path, backend: str) -> None:
    with pytest.raises(IndexMissingError, match=r"run `skillrag index` \(or `dvc repro index`\)"):
        open_retriever(backend, tmp_path / "index")


def test_unknown_backend_is_rejected(built: BuiltIndex) -> None:
    with pytest.raises(ValueError, match="unknown retrieval backend 'faiss'"):
        open_retriever("faiss", built.index_dir)


@pytest.mark.parametrize("k", [0, -3])
def test_k_below_one_is_a_parameter_error_on_every_backend(any_retriever: Retriever, k: int) -> None:
    with pytest.raises(ValueError, match=rf"k \(passages per query\) must be an integer >= 1, got {k}"):
        any_retriever.search("Paris", k)
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        any_retriever.batch_search(["Paris", "Jupiter"], k)
