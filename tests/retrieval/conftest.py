"""The small corpus indexed once per session with both BM25 backends and the dense one (the JVM starts once)."""

from __future__ import annotations

import pytest

from skillrag.retrieval import build_dense, build_indexes
from tests.retrieval.corpus import BuiltIndex, make_passages


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltIndex:
    root = tmp_path_factory.mktemp("retrieval")
    passages = make_passages()
    stats = build_indexes(passages, root / "corpus", root / "index", threads=2)
    build_dense(passages, root / "dense")
    return BuiltIndex(passages, root / "corpus", root / "index", stats, root / "dense")
