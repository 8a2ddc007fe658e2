"""Stage `index` on another machine: a rebuild of the same corpus writes the same fingerprints
(data/fingerprints/index.json and dense.json), though Lucene's files differ, so no stage that reads
the index goes stale."""

from __future__ import annotations

import json
from pathlib import Path

from skillrag.config import Params
from skillrag.files import write_jsonl
from skillrag.paths import Paths
from skillrag.pipeline.stages import STAGES
from tests.retrieval.corpus import make_passages


def test_index_rebuilt_in_a_fresh_workspace_writes_the_same_fingerprints_and_gate_result(tmp_path: Path) -> None:
    corpus = tmp_path / "passages.jsonl"
    write_jsonl(corpus, ({"id": p.id, "title": p.title, "text": p.text} for p in make_passages()))
    params = Params(index={"corpus_file": str(corpus), "smoke_queries": 4, "threads": 2})
    first, second = Paths(tmp_path / "one"), Paths(tmp_path / "two")
    for paths in (first, second):
        STAGES["index"](params, paths)
    manifests = [json.loads((p.index / "manifest.json").read_text())["digest"] for p in (first, second)]
    assert manifests[0] != manifests[1]  # the index's bytes differ
    assert first.index_fingerprint.read_bytes() == second.index_fingerprint.read_bytes()
    assert first.dense_fingerprint.read_bytes() == second.dense_fingerprint.read_bytes()
    assert first.validation("index").read_bytes() == second.validation("index").read_bytes()
    smoke = json.loads(first.index_fingerprint.read_text())["smoke"]
    assert len(smoke["queries"]) == 4 and all(ids for ids in smoke["lucene"])
    assert json.loads(first.dense_fingerprint.read_text())["smoke"]["queries"] == smoke["queries"]
    assert "dense" not in first.index_fingerprint.read_text()  # the BM25 fingerprint is what it was
