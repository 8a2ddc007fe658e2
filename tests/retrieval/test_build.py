from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillrag.data.schema import Passage
from skillrag.files import DataError
from skillrag.retrieval import build as build_module
from skillrag.retrieval import build_indexes
from tests.retrieval.corpus import BuiltIndex, make_passages

REPO = Path(__file__).resolve().parents[2]


def test_counts_agree_across_corpus_and_every_index(built: BuiltIndex) -> None:
    n = len(built.passages)
    assert (built.stats.passages, built.stats.lucene_docs, built.stats.bm25s_docs) == (n, n, n)
    assert built.stats.seconds > 0


def test_collection_is_a_sharded_pyserini_json_collection(built: BuiltIndex) -> None:
    shards = sorted(built.corpus_dir.glob("*.jsonl"))
    assert len(shards) == 2
    docs = [json.loads(line) for shard in shards for line in shard.read_text().splitlines()]
    assert sorted(docs, key=lambda d: d["id"]) == [
        {"id": p.id, "contents": p.contents} for p in built.passages
    ]


def test_every_index_lives_under_the_index_dir(built: BuiltIndex) -> None:
    assert any((built.index_dir / "lucene").glob("segments_*"))
    assert (built.index_dir / "bm25s" / "params.index.json").exists()
    assert not (built.index_dir / "dense").exists()  # built on first use, in a root of its own
    assert {p.name for p in (built.dense_dir / "dense").iterdir()} == {"vectors.faiss", "passages.jsonl", "encoder.json"}


@pytest.mark.parametrize(
    ("passages", "message"),
    [
        ([], "corpus is empty"),
        (make_passages()[:3] + [Passage("p01", "Again", "a second passage with the same id")], "'p01'"),
        ([Passage("blank", "Title", "   ")], "empty text: 'blank'"),
        ([Passage("nl", "Two\nlines", "text")], "newline: 'nl'"),
    ],
    ids=["empty-corpus", "duplicate-id", "empty-text", "newline-title"],
)
def test_bad_corpus_is_rejected_before_anything_is_written(
    tmp_path: Path, passages: list[Passage], message: str
) -> None:
    with pytest.raises(DataError, match=message):
        build_indexes(passages, tmp_path / "corpus", tmp_path / "index")
    assert list(tmp_path.iterdir()) == []


def test_duplicate_ids_are_all_named(tmp_path: Path) -> None:
    passages = make_passages()
    passages += [Passage("p03", "x", "dup one"), Passage("p07", "y", "dup two")]
    with pytest.raises(DataError, match="duplicate passage ids: 'p03', 'p07'"):
        build_indexes(passages, tmp_path / "corpus", tmp_path / "index")


def test_a_failing_build_keeps_the_previous_index(
    built: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus_dir, index_dir = tmp_path / "corpus", tmp_path / "index"
    build_indexes(make_passages()[:5], corpus_dir, index_dir)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    def fail(*args: object) -> int:
        raise RuntimeError("bm25s failed mid-build")

    monkeypatch.setattr(build_module, "build_bm25s_index", fail)
    with pytest.raises(RuntimeError, match="mid-build"):
        build_indexes(make_passages(), corpus_dir, index_dir)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_bm25s_files_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """bm25s numbers its vocabulary in set order; the build must not let that reach the files."""
    script = (
        "import sys; from pathlib import Path; from tests.retrieval.corpus import make_passages; "
        "from skillrag.retrieval.bm25s_backend import build_bm25s_index; "
        "build_bm25s_index(make_passages(), Path(sys.argv[1]), 0.9, 0.4)"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", script, str(tmp_path / seed)], check=True, env=env, cwd=REPO)
    files = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "2").iterdir())
    assert all((tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes() for name in files)
