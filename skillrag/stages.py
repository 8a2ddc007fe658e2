"""One function per pipeline stage and one per quality gate, each taking (params, paths).

The DVC commands (`skillrag <stage>`) and the Prefect flows call exactly these, so both paths
produce byte-identical outputs. Heavy libraries are imported inside each function: a stage
pays only for what it uses.
"""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def prepare(params: Params, paths: Paths) -> dict[str, dict[str, int]]:
    """Sample the question splits into data/questions/<split>/<dataset>.jsonl; returns counts."""
    from skillrag.data.prepare import prepare_questions

    return prepare_questions(params.prepare, paths.questions)


def gate_prepare(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_questions

    return gate_questions(paths.questions, params.prepare)


def index(params: Params, paths: Paths) -> Any:
    """Corpus -> data/corpus (JsonCollection) + data/index/{lucene,bm25s}; returns IndexStats."""
    from skillrag.data.corpus import read_corpus
    from skillrag.retrieval import build_indexes

    passages = read_corpus(params.index.corpus_file, params.index.max_passages)
    return build_indexes(
        passages, paths.corpus, paths.index, params.index.threads, params.retrieval.k1, params.retrieval.b
    )


def gate_index(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.suites import gate_index as run

    return run(paths.corpus, paths.index, params.index, params.retrieval.k1, params.retrieval.b)
