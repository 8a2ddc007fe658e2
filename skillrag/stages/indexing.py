"""Stage `index`: the corpus collection and both BM25 indexes (data/corpus/, data/index/; DVC cache
only, rebuilt on a new machine in seconds), their fingerprint (data/fingerprints/index.json, in
git: what the stages that read the index depend on and what their runs record) and the gate.

A build that reproduces the recorded fingerprint is a rebuild (`IndexStats.rebuild`): on a fresh
clone the committed timing stays the recorded run's. The user-facing commands that read the index
build a missing one themselves (`ensure_index`), and the dense index (minutes, not seconds) is
built only when a dense or hybrid backend first needs it (`ensure_dense`, data/dense/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths

Say = Callable[[str], None]


def index(params: Params, paths: Paths) -> Any:
    """Corpus -> data/corpus (JsonCollection) + data/index/{lucene,bm25s}, then their fingerprint
    (skillrag.retrieval.fingerprint); returns IndexStats, a `rebuild` when the fingerprint is the
    one already recorded."""
    from skillrag.data.corpus import read_corpus
    from skillrag.files import write_json
    from skillrag.retrieval import build_indexes, index_fingerprint
    from skillrag.retrieval.fingerprint import smoke_queries

    passages = list(read_corpus(params.index.corpus_file, params.index.max_passages))
    stats = build_indexes(
        passages, paths.corpus, paths.index, params.index.threads, params.retrieval.k1, params.retrieval.b
    )
    queries = smoke_queries([p.title for p in passages], params.index.smoke_queries)
    fingerprint = index_fingerprint(paths.corpus, paths.index, params.retrieval.k1, params.retrieval.b, queries)
    recorded = paths.index_fingerprint
    rebuild = recorded.is_file() and json.loads(recorded.read_text(encoding="utf-8")) == json.loads(json.dumps(fingerprint))
    write_json(recorded, fingerprint)
    return replace(stats, rebuild=rebuild)


def gate_index(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.index import gate_index as run

    return run(paths.corpus, paths.index, params.index, params.retrieval.k1, params.retrieval.b, paths.validation("index"))


def ensure_index(params: Params, paths: Paths, say: Say) -> None:
    """Build the BM25 indexes (stage `index`, seconds) when they are absent, as on a fresh clone,
    saying so: `ask`, `search` and `evaluate --questions` need them, and nothing else
    (`skillrag.runtime.open_retriever` calls it)."""
    from skillrag.retrieval.fingerprint import MANIFEST
    from skillrag.stages import STAGES

    if (paths.index / MANIFEST).is_file():
        return
    paths = replace(paths, custom=None)  # the pipeline's index stage (its lock, gate and timing), shared by named runs
    say(f"no index at {paths.index} (a fresh clone keeps none): building the Lucene and bm25s indexes of "
        f"{params.index.corpus_file} (seconds)")
    stats = STAGES["index"](params, paths)
    kept = "the recorded one" if stats.rebuild else f"a new one, recorded in {paths.index_fingerprint}"
    say(f"index: {stats.passages} passages in {stats.seconds:.1f} s, {kept}")


def ensure_dense(params: Params, paths: Paths, say: Say) -> None:
    """Build the dense index of the BM25 index's passages (data/corpus/) in data/dense/ when it is
    absent or made from another corpus, then gate it and write its fingerprint beside it (neither in git nor a DVC
    output: each machine builds its own, on first use by a dense or hybrid backend)."""
    from skillrag.files import exclusive, write_json
    from skillrag.quality.index import gate_dense
    from skillrag.retrieval import build_dense, dense_fingerprint
    from skillrag.retrieval.fingerprint import corpus_digest
    from skillrag.retrieval.index import read_collection

    ensure_index(params, paths, say)
    with exclusive(paths.locks / "dense.lock", "building the dense index"):
        corpus = corpus_digest(paths.corpus)
        built = paths.dense_fingerprint
        if built.is_file() and json.loads(built.read_text(encoding="utf-8")).get("corpus_sha256") == corpus:
            return
        passages = read_collection(paths.corpus)
        say(f"the {params.retrieval.backend} backend needs the dense index, absent at {paths.dense_index}: embedding "
            f"{len(passages):,} passages with all-MiniLM-L6-v2 once (~110 passages/s on two cores)")
        build_dense(passages, paths.dense_index)
        gate_dense(paths.corpus, paths.dense_index, params.index.smoke_queries, paths.dense_index / "validation.json")
        queries = json.loads(paths.index_fingerprint.read_text(encoding="utf-8"))["smoke"]["queries"]  # the index's own
        write_json(built, dense_fingerprint(paths.corpus, paths.dense_index, queries))
