"""Stage `extract`: the prober's training data (data/states/) and its gate; its questions may be
sharded across workers (`shards`, `map_shards`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.stages.common import ShardMap, in_process, shard_of


def extract(params: Params, paths: Paths, shards: int = 1, map_shards: ShardMap = in_process) -> dict[str, Any]:
    """Answer the train+dev questions per strategy with state capture into data/states/.

    `shards` > 1: each `map_shards` call (`extract_shard`) answers a contiguous slice of the
    questions into a folder of its own (data/states.parts/part-K-of-N/, resumable like the
    single-process run), and the finished folders are merged into data/states/ with the rows in
    single-process order (`skillrag.probe.extract.merge_states`). Workers share no file."""
    if shards == 1:
        return extract_shard(params, paths, 0, 1)
    from skillrag.probe.extract import merge_states

    map_shards(extract_shard, [(params, paths, shard, shards) for shard in range(shards)])
    summary = merge_states(
        [_part(paths, shard, shards) for shard in range(shards)],
        paths.states,
        inputs=_inputs(params, paths),
        strategies=params.extract.strategies,
        max_new_tokens=params.lm.max_new_tokens,
        questions=_questions(params, paths),
        checkpoint_rows=params.extract.checkpoint_rows,
    )
    shutil.rmtree(_part(paths, 0, shards).parent)
    return summary


def extract_shard(params: Params, paths: Paths, shard: int, shards: int) -> dict[str, Any]:
    """One worker's part of `extract`: the `shard`-th of `shards` slices of the questions, into
    data/states/ itself when unsharded."""
    from skillrag.probe.extract import extract_states, resolve_layers

    questions = shard_of(_questions(params, paths), shard, shards)
    retriever = runtime.open_retriever(params, paths) if "single_step" in params.extract.strategies else None
    lm = runtime.open_lm(params)
    return extract_states(
        lm,
        retriever,
        questions,
        paths.states if shards == 1 else _part(paths, shard, shards),
        inputs=_inputs(params, paths),
        strategies=params.extract.strategies,
        layers=resolve_layers(params.lm.layers, lm.num_layers),
        k=params.retrieval.k,
        max_new_tokens=params.lm.max_new_tokens,
        batch_size=params.lm.batch_size,
        checkpoint_rows=params.extract.checkpoint_rows,
        checkpoint_seconds=params.extract.checkpoint_seconds,
        passage_words=params.retrieval.passage_words,
    )


def _questions(params: Params, paths: Paths) -> list[Any]:
    from skillrag.data.splits import load_split

    return [
        q
        for split in ("train", "dev")
        for qs in load_split(paths.questions, split, params.prepare.max_question_chars).values()
        for q in qs
    ]


def _inputs(params: Params, paths: Paths) -> dict[str, Any]:
    """The identities of the model and the retrieval that the rows depend on (extract's fingerprint)."""
    from skillrag.lm.loading import model_identity

    inputs: dict[str, Any] = {"model": model_identity(params.lm.model, params.lm.device, params.lm.dtype)}
    if "single_step" in params.extract.strategies:
        from skillrag.retrieval.manifest import index_digest

        inputs["retrieval"] = {**params.retrieval.model_dump(), "index": index_digest(paths.index)}
    return inputs


def _part(paths: Paths, shard: int, shards: int) -> Path:
    return paths.states.with_name("states.parts") / f"part-{shard}-of-{shards}"


def gate_extract(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.states import gate_states

    return gate_states(paths.states)
