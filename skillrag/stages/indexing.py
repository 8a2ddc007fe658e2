"""Stage `index`: the corpus collection and both BM25 indexes (data/corpus/, data/index/; DVC cache
only, rebuilt on a new machine in seconds), their fingerprint (data/fingerprints/index.json, in
git: what the stages that read the index depend on and what their runs record) and the gate.

A build that reproduces the recorded fingerprint is a rebuild (`IndexStats.rebuild`): on a fresh
clone the committed timing stays the recorded run's. The user-facing commands that read the index
build a missing one themselves (`ensure_index`); the dense index (minutes, not seconds) is built
only when a dense or hybrid backend first needs it (`skillrag.runtime.ensure_dense`, data/dense/)."""

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
    saying so: `ask`, `search` and the evaluate stages call it before opening a retriever (in the
    pipeline the index is a DVC dependency, so it is there and this does nothing)."""
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
