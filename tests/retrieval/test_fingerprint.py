"""The index fingerprint: the same corpus gives the same bytes however Lucene lays out its files,
and another corpus or other BM25 settings give another identity."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from skillrag.files import write_json
from skillrag.retrieval import IndexMissingError, build_indexes, index_fingerprint, index_identity
from skillrag.retrieval.fingerprint import smoke_queries
from tests.retrieval.corpus import BuiltIndex


def _fingerprint_file(corpus: Path, index: Path, out: Path, passages, k1: float = 0.9, b: float = 0.4) -> Path:
    queries = smoke_queries([p.title for p in passages], 5)
    write_json(out, index_fingerprint(corpus, index, k1, b, queries))
    return out


def test_two_builds_of_one_corpus_give_byte_identical_fingerprints_though_their_files_differ(built: BuiltIndex, tmp_path: Path) -> None:
    build_indexes(built.passages, tmp_path / "corpus", tmp_path / "index", threads=2)
    first = _fingerprint_file(built.corpus_dir, built.index_dir, tmp_path / "first.json", built.passages)
    second = _fingerprint_file(tmp_path / "corpus", tmp_path / "index", tmp_path / "second.json", built.passages)
    manifests = [json.loads((d / "manifest.json").read_text())["digest"] for d in (built.index_dir, tmp_path / "index")]
    assert manifests[0] != manifests[1]  # Lucene's random segment ids: the bytes differ
    assert first.read_bytes() == second.read_bytes()
    assert index_identity(first) == index_identity(second)
    recorded = json.loads(first.read_text())
    assert recorded["documents"] == {"lucene": len(built.passages), "bm25s": len(built.passages)}
    assert set(recorded["versions"]) == {"pyserini", "lucene", "bm25s"} and all(recorded["versions"].values())
    assert len(recorded["smoke"]["queries"]) == 5 and all(recorded["smoke"]["lucene"]) and all(recorded["smoke"]["bm25s"])
    assert "time" not in first.read_text()


def test_another_corpus_or_other_bm25_settings_change_the_identity(built: BuiltIndex, tmp_path: Path) -> None:
    base = _fingerprint_file(built.corpus_dir, built.index_dir, tmp_path / "base.json", built.passages)
    passages = [replace(built.passages[0], text=built.passages[0].text + " Edited."), *built.passages[1:]]
    build_indexes(passages, tmp_path / "corpus", tmp_path / "index", threads=2)
    edited = _fingerprint_file(tmp_path / "corpus", tmp_path / "index", tmp_path / "edited.json", passages)
    build_indexes(built.passages, tmp_path / "corpus2", tmp_path / "index2", threads=2, k1=1.2, b=0.75)
    tuned = _fingerprint_file(tmp_path / "corpus2", tmp_path / "index2", tmp_path / "tuned.json", built.passages, 1.2, 0.75)
    assert len({index_identity(p) for p in (base, edited, tuned)}) == 3


def test_a_missing_fingerprint_names_the_rebuild_command(tmp_path: Path) -> None:
    with pytest.raises(IndexMissingError, match=r"no index fingerprint at .*: rebuild it with `skillrag index`"):
        index_identity(tmp_path / "index.json")
