"""Stage `index`: the corpus collection and both BM25 indexes (data/corpus/, data/index/; DVC cache
only, rebuilt on a new machine in seconds), their fingerprint (data/fingerprints/index.json, in
git: what the stages that read the index depend on and what their runs record) and the gate.

A build that reproduces the recorded fingerprint is a rebuild (`IndexStats.rebuild`): on a fresh
clone the committed timing stays the recorded run's. The user-facing commands that read the index
build a missing one themselves (`skillrag.pipeline.stages.ensure_index`); the dense index (minutes, not seconds) is built
only when a dense or hybrid backend first needs it (`skillrag.pipeline.runtime.ensure_dense`, data/dense/)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def index(params: Params, paths: Paths) -> Any:
    """Corpus -> data/corpus (JsonCollection) + data/index/{lucene,bm25s}, then their fingerprint
    (skillrag.retrieval.fingerprint); returns IndexStats, a `rebuild` when the fingerprint is the
    one already recorded."""
    from skillrag.data.corpus import read_corpus
    from skillrag.data.splits import gold_passage_ids
    from skillrag.files import write_json
    from skillrag.retrieval import build_indexes, index_fingerprint
    from skillrag.retrieval.fingerprint import smoke_queries

    keep = gold_passage_ids(paths.questions) if params.index.question_evidence else set()
    passages = list(read_corpus(params.index.corpus_file, params.index.max_passages, keep))
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
    from skillrag.quality.index_gate import gate_index as run

    return run(paths.corpus, paths.index, params.index, params.retrieval.k1, params.retrieval.b, paths.validation("index"))
