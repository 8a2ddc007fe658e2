"""Stage `index` on another machine: a rebuild of the same corpus writes the same fingerprint
(data/fingerprints/index.json), though Lucene's files differ, so no stage that reads the index goes
stale, and it leaves the committed timing and gate result to the recorded run. The BM25 indexes
are built in seconds by whichever command needs them; the dense index only by a dense or hybrid
backend, on first use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from skillrag.config import Params
from skillrag.files import write_jsonl
from skillrag.paths import Paths
from skillrag.pipeline import runtime
from skillrag.pipeline.stages import STAGES, ensure_index
from skillrag.pipeline.timing import rebuilds_log
from tests.retrieval.corpus import make_passages


@pytest.fixture
def params(tmp_path: Path) -> Params:
    corpus = tmp_path / "passages.jsonl"
    write_jsonl(corpus, ({"id": p.id, "title": p.title, "text": p.text} for p in make_passages()))
    return Params(index={"corpus_file": str(corpus), "smoke_queries": 4, "threads": 2})


def _fresh_clone(paths: Paths) -> None:
    """What a clone holds of a finished index stage: its git-tracked outputs, no cache-only ones."""
    shutil.rmtree(paths.index)
    shutil.rmtree(paths.corpus)


def test_index_rebuilt_in_a_fresh_workspace_writes_the_same_fingerprint_and_gate_result(tmp_path: Path, params: Params) -> None:
    first, second = Paths(tmp_path / "one"), Paths(tmp_path / "two")
    for paths in (first, second):
        STAGES["index"](params, paths)
    manifests = [json.loads((p.index / "manifest.json").read_text())["digest"] for p in (first, second)]
    assert manifests[0] != manifests[1]  # the index's bytes differ
    assert first.index_fingerprint.read_bytes() == second.index_fingerprint.read_bytes()
    assert first.validation("index").read_bytes() == second.validation("index").read_bytes()
    smoke = json.loads(first.index_fingerprint.read_text())["smoke"]
    assert len(smoke["queries"]) == 4 and all(ids for ids in smoke["lucene"])
    assert "dense" not in first.index_fingerprint.read_text()  # the BM25 fingerprint is what it was


def test_the_index_stage_builds_no_dense_index(tmp_path: Path, params: Params) -> None:
    paths = Paths(tmp_path / "ws")
    STAGES["index"](params, paths)
    assert not (paths.index / "dense").exists() and not paths.dense_index.exists()


def test_rebuilding_the_recorded_index_leaves_its_committed_timing_and_gate_result(tmp_path: Path, params: Params) -> None:
    paths = Paths(tmp_path / "ws")
    STAGES["index"](params, paths)
    committed = {f: f.read_bytes() for f in (paths.timing("index"), paths.validation("index"), paths.index_fingerprint)}
    _fresh_clone(paths)
    stats = STAGES["index"](params, paths)
    assert stats.rebuild
    assert {f: f.read_bytes() for f in committed} == committed
    (logged,) = [json.loads(line) for line in rebuilds_log(paths).read_text().splitlines()]
    assert logged["stage"] == "index" and logged["rebuild"] is True


def test_an_index_of_other_settings_is_recorded_as_a_new_run(tmp_path: Path, params: Params) -> None:
    paths = Paths(tmp_path / "ws")
    STAGES["index"](params, paths)
    paths.timing("index").write_text("{}")
    changed = params.model_copy(update={"retrieval": params.retrieval.model_copy(update={"k1": 1.2})})
    assert not STAGES["index"](changed, paths).rebuild
    assert json.loads(paths.timing("index").read_text())["stage"] == "index"


def test_a_command_that_needs_the_index_builds_a_missing_one_and_says_so(tmp_path: Path, params: Params) -> None:
    paths = Paths(tmp_path / "ws")
    said: list[str] = []
    ensure_index(params, paths, said.append)
    assert (paths.index / "manifest.json").is_file() and paths.index_fingerprint.is_file()
    assert said and said[0].startswith(f"no index at {paths.index}") and "Lucene" in said[0]
    said.clear()
    ensure_index(params, paths, said.append)  # present: nothing to do
    assert said == []


def test_a_dense_backend_builds_the_dense_index_on_first_use_only(tmp_path: Path, params: Params, capsys) -> None:
    paths = Paths(tmp_path / "ws")
    STAGES["index"](params, paths)
    dense = params.model_copy(update={"retrieval": params.retrieval.model_copy(update={"backend": "hybrid"})})
    retriever = runtime.open_retriever(dense, paths)
    assert "needs the dense index" in capsys.readouterr().err
    assert retriever.search("Penicillin", 1)[0].passage.title == "Penicillin"
    assert json.loads(paths.dense_fingerprint.read_text())["vectors"] == len(make_passages())
    assert json.loads((paths.dense_index / "validation.json").read_text())["success"]
    runtime.open_retriever(dense, paths)
    assert capsys.readouterr().err == ""  # built once


def test_a_small_index_with_question_evidence_holds_the_written_questions_gold_passages(tmp_path: Path, params: Params) -> None:
    """`index.max_passages` keeps the corpus's first passages; `index.question_evidence` adds the
    gold passages of the written questions (the quick profile), so retrieval can find them."""
    from skillrag.files import write_jsonl
    from skillrag.retrieval import open_retriever

    paths = Paths(tmp_path / "ws")
    gold = make_passages()[9]  # past the first three
    write_jsonl(paths.question_file("eval", "nq"), [
        {"id": "nq-0", "dataset": "nq", "question": "who discovered penicillin", "answers": ["Fleming"], "split": "eval",
         "meta": {"gold_passage_ids": [gold.id]}},
    ])
    small = params.model_copy(update={"index": params.index.model_copy(update={"max_passages": 3, "smoke_queries": 2})})
    assert STAGES["index"](small, paths).passages == 3
    with_evidence = small.model_copy(update={"index": small.index.model_copy(update={"question_evidence": True})})
    assert STAGES["index"](with_evidence, paths).passages == 4
    hits = open_retriever("lucene", paths.index).search("penicillin", 1)
    assert hits[0].passage.id == gold.id
