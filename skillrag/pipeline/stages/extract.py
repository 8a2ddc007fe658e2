"""Stage `extract`: the prober's training data (data/states/rows/ in git and data/states/vectors/ in
the DVC cache, skillrag.probe.state_store) and its gate.

For every train/dev question and every strategy (closed-book `no_retrieval`; `single_step` over
the BM25 top-k for the question) the LM answers through the one answer path the methods use
(`skillrag.answering.answer_batch`: same prompt, stop rule, parser and pooled states, all
three poolings captured in the same generation), so the prober is trained on exactly what the
gated methods score. Each row is labelled by the strict answer's ACC (a normalised gold's
tokens occur as a run in the `Answer:` text; no `Answer:` is wrong), and records whether it had
no answer or hit the budget, and its tokens' texts, log-probabilities and entropies.

Resumable: finished rows are checkpointed as shards in `<out>.partial/` every few rows or seconds
(`extract.checkpoint_rows`, `extract.checkpoint_seconds`); a re-run with the same inputs (same
fingerprint: model, retrieval backend and parameters, the index fingerprint, prompts, questions)
skips finished (question, strategy) pairs, and its rows and vectors replace `<out>`'s only when
every pair is done; an `<out>` already written with the same fingerprint is kept as it is, unless
its vectors are missing (a new machine has the rows from git only): then it is computed again.

Sharded (`shards`, `map_shards`): each worker runs `extract_states` on a contiguous slice of the
questions into a folder of its own, resumable as above, and `merge_states` writes `<out>` from
the finished folders with the rows in the order one run writes them. Heavy libraries are
imported inside the functions (skillrag.pipeline.stages).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.pipeline import runtime
from skillrag.pipeline.stages.common import ShardMap, in_process, shard_of
from skillrag.provenance import text_digest

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from skillrag.answering import Attempt
    from skillrag.data.schema import Question
    from skillrag.lm.base import LM
    from skillrag.retrieval.base import Retriever

Task = tuple["Question", str]  # (question, strategy)
States = dict[str, dict[int, "torch.Tensor"]]  # pooling -> layer -> [rows, hidden]


def extract(params: Params, paths: Paths, shards: int = 1, map_shards: ShardMap = in_process) -> dict[str, Any]:
    """Answer the train+dev questions per strategy with state capture into data/states/.

    `shards` > 1: each `map_shards` call (`extract_shard`) answers a contiguous slice of the
    questions into a folder of its own (data/states.parts/part-K-of-N/, resumable like the
    single-process run), and the finished folders are merged into data/states/ with the rows in
    single-process order (`merge_states`). Workers share no file."""
    if shards == 1:
        return extract_shard(params, paths, 0, 1)
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
    from skillrag.lm.base import resolve_layers

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


def gate_extract(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.states_gate import gate_states

    return gate_states(paths.states, paths.validation("states"))


def fingerprint(
    inputs: Mapping[str, Any], layers: Sequence[int], strategies: Sequence[str], max_new_tokens: int, questions: Sequence[Question]
) -> str:
    """Everything that changes the rows: a partial run is resumed only when this matches.
    `inputs`: the identities of the model and of the retrieval (the knobs its backend reads, `RetrievalParams.recorded`,
    and what it retrieves from, `runtime.retrieval_identity`)."""
    from skillrag.prompts import load_prompt

    material = json.dumps(
        {
            "inputs": dict(inputs),
            "layers": list(layers),
            "strategies": list(strategies),
            "max_new_tokens": max_new_tokens,
            "questions": [q.id for q in questions],
            "prompts": [load_prompt("cot_fewshot"), load_prompt("cot_passages_fewshot")],
        },
        sort_keys=True,
    )
    return text_digest(material)


def answer_tasks(
    lm: LM,
    retriever: Retriever | None,
    tasks: Sequence[Task],
    layers: Sequence[int],
    k: int,
    max_new_tokens: int,
    passage_words: int | None = None,
) -> tuple[list[dict[str, Any]], States]:
    """Answer every task through `answer_batch` (one generate call per few-shot prefix): its
    labelled rows and its states in every pooling, both in the order of `tasks`."""
    import torch

    from skillrag.answering import answer_batch
    from skillrag.lm.base import POOLINGS

    single_step = [q.question for q, strategy in tasks if strategy == "single_step"]
    if single_step and retriever is None:
        raise ValueError("strategy single_step needs a retriever")
    hits = iter(retriever.batch_search(single_step, k) if single_step else [])
    evidence = [[h.passage for h in next(hits)] if strategy == "single_step" else [] for _, strategy in tasks]
    attempts = answer_batch(lm, [q.question for q, _ in tasks], evidence, None, max_new_tokens, layers, passage_words)
    rows = [_row(question, strategy, attempt) for (question, strategy), attempt in zip(tasks, attempts)]
    states = {
        pooling: {layer: torch.stack([a.generation.pooled[pooling][layer] for a in attempts]) for layer in layers}
        for pooling in POOLINGS
    }
    return rows, states


def _row(question: Question, strategy: str, attempt: Attempt) -> dict[str, Any]:
    """One labelled row: em / acc of the strict answer (no `Answer:` scores wrong), whether it
    had none, whether the generation ended on the token budget, and its tokens."""
    from skillrag.metrics import score_answer

    gen = attempt.generation
    scores = score_answer(attempt.answer, question.answers)
    return {
        "id": question.id,
        "dataset": question.dataset,
        "split": question.split,
        "strategy": strategy,
        "prompt_hash": hashlib.sha1(attempt.prompt.encode()).hexdigest()[:12],
        "text": gen.text,
        "answer": attempt.answer,
        "em": int(scores["em"]),
        "acc": int(scores["acc"]),
        "no_answer": int(not attempt.answer),
        "budget_hit": int(attempt.budget_hit),
        "mean_entropy": sum(gen.entropies) / len(gen.entropies) if gen.entropies else 0.0,
        "prompt_tokens": gen.prompt_tokens,
        "new_tokens": len(gen.entropies),
        "logprobs": list(gen.logprobs),
        "entropies": list(gen.entropies),
        "pieces": list(gen.pieces),
    }


def _chunks(items: Sequence[Task], size: int) -> Iterator[Sequence[Task]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def extract_states(
    lm: LM,
    retriever: Retriever | None,
    questions: Sequence[Question],
    out_dir: Path,
    *,
    inputs: Mapping[str, Any],
    strategies: Sequence[str],
    layers: Sequence[int],
    k: int,
    max_new_tokens: int,
    batch_size: int,
    checkpoint_rows: int,
    checkpoint_seconds: float,
    passage_words: int | None = None,
) -> dict[str, Any]:
    """Write `out_dir` (see skillrag.probe.state_store); returns a summary with row counts per label.

    Finished rows are checkpointed as a shard after `checkpoint_rows` rows or `checkpoint_seconds`,
    whichever comes first (checked after each batch of `batch_size` tasks), so an interrupt or a
    kill loses little. A signal (skillrag.interrupts) stops the run after the last whole shard;
    the rows in flight are dropped. `inputs`: see `fingerprint` (it must name `passage_words`,
    e.g. in the retrieval params, as the stage's does)."""
    from tqdm import tqdm

    from skillrag import interrupts
    from skillrag.probe.state_store import publish_states, read_rows, shard_names, write_meta, write_shard

    out_dir = Path(out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    meta = {
        "model": lm.name,
        "identity": inputs.get("model"),  # name, dtype, weights digest, licence: recorded in probe.json
        "layers": list(layers),
        "hidden_size": lm.hidden_size,
        "fingerprint": fingerprint(inputs, layers, strategies, max_new_tokens, questions),
    }
    if _done(out_dir, meta["fingerprint"]):
        return _summary(read_rows(out_dir), len(shard_names(out_dir)))
    if work.exists() and not _done(work, meta["fingerprint"], complete=False):
        shutil.rmtree(work)  # inputs changed: the partial rows would be wrong
    write_meta(work, meta)
    finished = read_rows(work)
    done = set(zip(finished["id"], finished["strategy"]))
    todo = [(q, s) for s in strategies for q in questions if (q.id, s) not in done]
    shard = len(shard_names(work))
    rows: list[dict[str, Any]] = []
    pending: list[States] = []
    saved = time.monotonic()
    with tqdm(total=len(questions) * len(strategies), initial=len(done), desc="extract", unit="answer") as bar:
        for number, batch in enumerate(_chunks(todo, batch_size), start=1):
            batch_rows, batch_states = answer_tasks(lm, retriever, batch, layers, k, max_new_tokens, passage_words)
            interrupts.check()  # rows cut short by a signal are never written
            bar.update(len(batch))
            rows += batch_rows
            pending.append(batch_states)
            last = number * batch_size >= len(todo)
            if last or len(rows) >= checkpoint_rows or time.monotonic() - saved >= checkpoint_seconds:
                with interrupts.deferred():  # a checkpoint is written whole
                    write_shard(work, shard, rows, _concat(pending))
                shard, rows, pending, saved = shard + 1, [], [], time.monotonic()
    publish_states(work, out_dir)
    shutil.rmtree(work)
    return _summary(read_rows(out_dir), shard)


def _done(directory: Path, fingerprint: str, complete: bool = True) -> bool:
    """Whether `directory` holds states made with `fingerprint`, with all their vectors when `complete`."""
    from skillrag.probe.state_store import has_vectors, read_meta, rows_dir

    if not (rows_dir(directory) / "meta.json").exists() or read_meta(directory)["fingerprint"] != fingerprint:
        return False
    return not complete or has_vectors(directory)


def _concat(parts: Sequence[States]) -> States:
    import torch

    return {
        pooling: {layer: torch.cat([part[pooling][layer] for part in parts]) for layer in by_layer}
        for pooling, by_layer in parts[0].items()
    }


def merge_states(
    parts: Sequence[Path],
    out_dir: Path,
    *,
    inputs: Mapping[str, Any],
    strategies: Sequence[str],
    max_new_tokens: int,
    questions: Sequence[Question],
    checkpoint_rows: int,
) -> dict[str, Any]:
    """Write `out_dir` from `parts`, the finished outputs of `extract_states` over contiguous slices
    of `questions` (same inputs and settings): the rows in the order one run over all `questions`
    writes them (strategy, then question), in shards of `checkpoint_rows`, with the meta one run
    writes. Published as `extract_states` publishes; returns its summary."""
    import tempfile

    import pandas as pd
    import torch

    from skillrag.lm.base import POOLINGS
    from skillrag.probe.state_store import (
        ROW_COLUMNS,
        load_features,
        publish_states,
        read_meta,
        read_rows,
        write_meta,
        write_shard,
    )

    metas = [read_meta(part) for part in parts]
    frames = [read_rows(part) for part in parts]
    layers = metas[0]["layers"]
    states = {}
    for pooling in POOLINGS:
        features = [load_features(part, frame, pooling) for part, frame in zip(parts, frames)]
        states[pooling] = {layer: torch.cat([f[layer] for f in features]) for layer in layers}
    rows = pd.concat(frames, ignore_index=True)
    position = {(q.id, strategy): n for n, (strategy, q) in enumerate((s, q) for s in strategies for q in questions)}
    order = sorted(range(len(rows)), key=lambda i: position[(rows.at[i, "id"], rows.at[i, "strategy"])])
    rows = rows.iloc[order][ROW_COLUMNS].reset_index(drop=True)
    # the parts' meta differs only in the fingerprint, which covers their own questions
    meta = {**metas[0], "fingerprint": fingerprint(inputs, layers, strategies, max_new_tokens, questions)}
    starts = range(0, len(rows), checkpoint_rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".merge.", dir=out_dir.parent) as tmp:
        for number, start in enumerate(starts):
            chosen = order[start : start + checkpoint_rows]
            write_shard(
                Path(tmp), number, rows.iloc[start : start + checkpoint_rows].to_dict("records"),
                {pooling: {layer: t[chosen] for layer, t in by_layer.items()} for pooling, by_layer in states.items()},
            )
        write_meta(Path(tmp), meta)
        publish_states(Path(tmp), out_dir)
    return _summary(read_rows(out_dir), len(starts))


def _summary(rows: pd.DataFrame, shards: int) -> dict[str, Any]:
    return {
        "rows": len(rows),
        "shards": shards,
        "by_split_strategy_label": {
            f"{split}/{strategy}/acc={label}": int(n)
            for (split, strategy, label), n in rows.groupby(["split", "strategy", "acc"]).size().items()
        },
    }


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
        inputs["retrieval"] = {**params.retrieval.recorded(), "index": runtime.retrieval_identity(params, paths)}
    return inputs


def _part(paths: Paths, shard: int, shards: int) -> Path:
    return paths.states.with_name("states.parts") / f"part-{shard}-of-{shards}"
