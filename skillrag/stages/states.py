"""Stage `extract`: the prober's training data (data/states/) and its gate."""

from __future__ import annotations

from typing import Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.stages.common import exclusive


@exclusive
def extract(params: Params, paths: Paths) -> dict[str, Any]:
    """Answer the train+dev questions per strategy with state capture into data/states/."""
    from skillrag.data.splits import load_split
    from skillrag.lm.loading import model_identity
    from skillrag.probe.extract import extract_states, resolve_layers

    questions = [q for split in ("train", "dev") for qs in load_split(paths.questions, split, params.prepare.max_question_chars).values() for q in qs]
    retriever = runtime.open_retriever(params, paths) if "single_step" in params.extract.strategies else None
    lm = runtime.open_lm(params)
    inputs: dict[str, Any] = {"model": model_identity(params.lm.model, params.lm.device, params.lm.dtype)}
    if retriever is not None:
        from skillrag.retrieval.manifest import index_digest

        inputs["retrieval"] = {**params.retrieval.model_dump(), "index": index_digest(paths.index)}
    return extract_states(
        lm,
        retriever,
        questions,
        paths.states,
        inputs=inputs,
        strategies=params.extract.strategies,
        layers=resolve_layers(params.lm.layers, lm.num_layers),
        k=params.retrieval.k,
        max_new_tokens=params.lm.max_new_tokens,
        batch_size=params.lm.batch_size,
        checkpoint_rows=params.extract.checkpoint_rows,
        checkpoint_seconds=params.extract.checkpoint_seconds,
    )


def gate_extract(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.states import gate_states

    return gate_states(paths.states)
