"""The dense index with the real bundled MiniLM: what is saved is what is computed, queries with no
word in common with their passage are found, and a damaged or foreign index is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from skillrag.errors import ArtifactError
from skillrag.files import write_json
from skillrag.retrieval import (
    DenseRetriever,
    IndexCorruptError,
    build_dense,
    build_indexes,
    dense_fingerprint,
    open_retriever,
)
from skillrag.retrieval import dense as dense_module
from skillrag.retrieval.dense import embed, embed_passages, stored_vectors
from skillrag.retrieval.fingerprint import smoke_queries
from tests.retrieval.corpus import BuiltIndex

# Questions that share no indexed word with their passage (vocabulary mismatch): Lucene cannot
# find the passage, the encoder can.
MISMATCHED = {
    "caffeinated morning drink": "p18",  # Coffee
    "how do leaves turn light into food": "p02",  # Photosynthesis
    "tallest peak in the world": "p03",  # Mount Everest
    "who found the first antibiotic": "p09",  # Penicillin
}


def test_saved_vectors_are_the_vectors_computed_afresh_and_have_unit_length(built: BuiltIndex) -> None:
    saved = stored_vectors(built.dense_dir / "dense")
    fresh = embed_passages(built.passages)
    assert saved.dtype == np.float32 and saved.shape == (len(built.passages), 384)
    assert np.array_equal(saved, fresh)
    assert np.allclose(np.linalg.norm(saved, axis=1), 1.0, atol=1e-5)
    alone = embed([built.passages[3].contents])[0]  # unpadded: equal up to float rounding only
    assert np.allclose(alone, saved[3], atol=1e-5)


def test_a_loaded_index_ranks_as_exact_cosine_search_over_fresh_vectors(built: BuiltIndex) -> None:
    retriever = DenseRetriever(built.dense_dir)
    fresh = embed_passages(built.passages)
    for query in ["Paris France capital", "a painting by an Italian artist", *MISMATCHED]:
        cosine = fresh @ embed([query])[0]
        expected = [built.passages[i].id for i in np.argsort(-cosine, kind="stable")[:5]]
        hits = retriever.search(query, 5)
        assert [hit.passage.id for hit in hits] == expected
        assert [hit.score for hit in hits] == pytest.approx(sorted(cosine, reverse=True)[:5], abs=1e-5)
    assert retriever.search("Paris", 5) == DenseRetriever(built.dense_dir).search("Paris", 5)  # loaded again


@pytest.mark.parametrize(("query", "expected"), MISMATCHED.items())
def test_dense_and_hybrid_find_what_lucene_cannot(built: BuiltIndex, query: str, expected: str) -> None:
    lucene, dense, hybrid = (open_retriever(backend, built.index_dir, dense_dir=built.dense_dir) for backend in ("lucene", "dense", "hybrid"))
    assert expected not in [hit.passage.id for hit in lucene.search(query, 10)]
    assert dense.search(query, 1)[0].passage.id == expected
    assert expected in [hit.passage.id for hit in hybrid.search(query, 3)]


def test_k_beyond_the_corpus_returns_every_passage_once(built: BuiltIndex) -> None:
    hits = DenseRetriever(built.dense_dir).search("Jupiter", 100)
    assert sorted(hit.passage.id for hit in hits) == sorted(p.id for p in built.passages)


@pytest.fixture
def index_copy(built: BuiltIndex, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built.dense_dir, tmp_path / "dense"))


def test_an_index_built_with_another_encoder_is_refused(index_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dense_module, "encoder_identity", lambda: {"name": "another/encoder", "revision": "9.9.9"})
    with pytest.raises(ArtifactError, match=r"built with encoder .*all-MiniLM-L6-v2.*, not the configured .*another/encoder.*rebuilt on first use"):
        DenseRetriever(index_copy)


def test_a_truncated_vector_file_is_named_in_one_line(index_copy: Path) -> None:
    victim = index_copy / "dense" / "vectors.faiss"
    with victim.open("r+b") as handle:
        handle.truncate(victim.stat().st_size - 100)
    with pytest.raises(IndexCorruptError, match=rf"^{victim} has \d+ bytes, the manifest says \d+ \(truncated or overwritten\): delete {index_copy}: a dense or hybrid backend rebuilds it on first use$") as info:
        open_retriever("dense", index_copy)
    assert "\n" not in str(info.value)


def test_two_builds_of_one_corpus_give_byte_identical_dense_fingerprints(built: BuiltIndex, tmp_path: Path) -> None:
    build_indexes(built.passages, tmp_path / "corpus", tmp_path / "index", threads=2)
    build_dense(built.passages, tmp_path / "dense")
    queries = smoke_queries([p.title for p in built.passages], 5)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    write_json(first, dense_fingerprint(built.corpus_dir, built.dense_dir, queries))
    write_json(second, dense_fingerprint(tmp_path / "corpus", tmp_path / "dense", queries))
    assert first.read_bytes() == second.read_bytes()
    recorded = dense_fingerprint(built.corpus_dir, built.dense_dir, queries)
    assert recorded["vectors"] == len(built.passages) and recorded["dim"] == 384
    assert recorded["encoder"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(recorded["smoke"]["dense"]) == 5 and all(len(ids) == 10 for ids in recorded["smoke"]["dense"])
