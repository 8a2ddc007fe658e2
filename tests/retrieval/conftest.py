"""The small corpus indexed once per session with both backends (the JVM starts once)."""

from __future__ import annotations

import pytest

from skillrag.retrieval import build_indexes
from tests.retrieval.corpus import BuiltIndex, make_passages


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuiltIndex:
    root = tmp_path_factory.mktemp("retrieval")
    passages = make_passages()
    stats = build_indexes(passages, root / "corpus", root / "index", threads=2)
    return BuiltIndex(passages, root / "corpus", root / "index", stats)
