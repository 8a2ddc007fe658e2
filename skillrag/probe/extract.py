"""Stage `extract`: the prober's training data.

For every train/dev question and every strategy (closed-book `no_retrieval`; `single_step` over
the BM25 top-k for the question) the LM answers with the same CoT prompt the methods use at
inference time, capturing the hidden states of the prober's layers in the same generation.
Each row is labelled by the strict answer's ACC (a normalised gold's tokens occur as a run in the
`Answer:` text; no `Answer:` is wrong), and records whether it had no answer or hit the budget.

Resumable: finished rows are checkpointed as shards in `<out>.partial/` every few rows or seconds
(`extract.checkpoint_rows`, `extract.checkpoint_seconds`); a re-run with the same inputs (same
fingerprint: model, retrieval backend and parameters, index, prompts, questions) skips finished
(question, strategy) pairs, and the folder replaces `<out>` only when every pair is done; an
`<out>` already written with the same fingerprint is kept as it is.

Sharded (skillrag.stages.states): each worker runs `extract_states` on a contiguous slice of the
questions into a folder of its own, resumable as above, and `merge_states` writes `<out>` from
the finished folders with the rows in the order one run writes them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from skillrag import interrupts
from skillrag.data.schema import Question
from skillrag.eval.metrics import score_answer
from skillrag.files import atomic_path, publish, write_json
from skillrag.lm.base import LM, Generation, default_layers
from skillrag.probe.states import (
    DEFAULT_POOLING,
    ROW_COLUMNS,
    load_features,
    read_meta,
    read_rows,
    write_shard,
)
from skillrag.prompts import load_prompt
from skillrag.prompts.cot import STOP, Prompt, cot_prompt, parse_answer
from skillrag.retrieval.base import Retriever

Task = tuple[Question, str]  # (question, strategy)


def resolve_layers(spec: str | Sequence[int], num_layers: int) -> list[int]:
    """`posterior_two_thirds` (paper §3.1), `all`, or explicit 1-based layer ids (validated)."""
    if spec == "posterior_two_thirds":
        return default_layers(num_layers)
    if spec == "all":
        return list(range(1, num_layers + 1))
    layers = sorted(set(int(x) for x in spec))
    bad = [x for x in layers if not 1 <= x <= num_layers]
    if bad:
        raise ValueError(f"layers {bad} do not exist: the model has layers 1..{num_layers}")
    return layers


def fingerprint(
    inputs: Mapping[str, Any], layers: Sequence[int], strategies: Sequence[str], max_new_tokens: int, questions: Sequence[Question]
) -> str:
    """Everything that changes the rows: a partial run is resumed only when this matches.
    `inputs`: the identities of the model and of the retrieval (backend, k, k1, b, index digest)."""
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
    return hashlib.sha256(material.encode()).hexdigest()


def _chunks(items: Sequence[Task], size: int) -> Iterator[Sequence[Task]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _prompts(tasks: Sequence[Task], retriever: Retriever | None, k: int, passage_words: int | None) -> list[Prompt]:
    needs_passages = [q.question for q, strategy in tasks if strategy == "single_step"]
    if needs_passages and retriever is None:
        raise ValueError("strategy single_step needs a retriever")
    hits = iter(retriever.batch_search(needs_passages, k) if needs_passages else [])
    return [
        cot_prompt(q.question, [h.passage for h in next(hits)] if strategy == "single_step" else (), passage_words)
        for q, strategy in tasks
    ]


def _row(question: Question, strategy: str, prompt: Prompt, gen: Generation) -> dict[str, Any]:
    """One labelled row: em / acc of the strict answer (no `Answer:` scores wrong), whether it
    had none, and whether the generation ended on the token budget."""
    answer = parse_answer(gen.text).answer
    scores = score_answer(answer, question.answers)
    return {
        "id": question.id,
        "dataset": question.dataset,
        "split": question.split,
        "strategy": strategy,
        "prompt_hash": hashlib.sha1(prompt.text.encode()).hexdigest()[:12],
        "text": gen.text,
        "answer": answer,
        "em": int(scores["em"]),
        "acc": int(scores["acc"]),
        "no_answer": int(not answer),
        "budget_hit": int(gen.stopped_by == "length"),
        "mean_entropy": float(np.mean(gen.entropies)) if len(gen.entropies) else 0.0,
        "prompt_tokens": gen.prompt_tokens,
        "new_tokens": len(gen.entropies),
        "logprobs": list(gen.logprobs),
        "entropies": list(gen.entropies),
        "pieces": list(gen.pieces),
    }


def run_chunk(
    lm: LM,
    retriever: Retriever | None,
    tasks: Sequence[Task],
    layers: Sequence[int],
    k: int,
    max_new_tokens: int,
    batch_size: int,
    on_batch: Callable[[int], None] = lambda n: None,
    passage_words: int | None = None,
) -> tuple[list[dict[str, Any]], dict[int, torch.Tensor]]:
    """Answer every task, batching prompts that share a few-shot prefix; `on_batch(n)` after each
    batch; passages cut to `passage_words` words."""
    prompts = _prompts(tasks, retriever, k, passage_words)
    rows: list[dict[str, Any]] = []
    hidden: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    for start in range(0, len(tasks), batch_size):
        batch = list(range(start, min(start + batch_size, len(tasks))))
        for prefix in dict.fromkeys(prompts[i].prefix for i in batch):
            group = [i for i in batch if prompts[i].prefix == prefix]
            gens = lm.generate([prompts[i].text for i in group], max_new_tokens, stop=STOP, capture=layers, prefix=prefix)
            for i, gen in zip(group, gens):
                question, strategy = tasks[i]
                rows.append(_row(question, strategy, prompts[i], gen))
                if gen.hidden is None:
                    raise RuntimeError(f"LM {lm.name!r} returned no hidden states for layers {list(layers)}")
                for layer in layers:
                    hidden[layer].append(gen.hidden[layer].float().cpu())
        on_batch(len(batch))
    order = {(r["id"], r["strategy"]): n for n, r in enumerate(rows)}
    position = [order[(q.id, s)] for q, s in tasks]
    return [rows[n] for n in position], {layer: torch.stack(ts)[position] for layer, ts in hidden.items()}


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
    """Write `out_dir` (see skillrag.probe.states); returns a summary with row counts per label.

    Finished rows are checkpointed as a shard after `checkpoint_rows` rows or `checkpoint_seconds`,
    whichever comes first (checked after each batch), so an interrupt or a kill loses little.
    A signal (skillrag.interrupts) stops the run after the last whole shard; the rows in flight
    are dropped. `inputs`: see `fingerprint` (it must name `passage_words`, e.g. in the retrieval
    params, as the stage's does)."""
    out_dir = Path(out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    meta = {
        "model": lm.name,
        "identity": inputs.get("model"),  # name, dtype, weights digest, licence: recorded in probe.json
        "layers": list(layers),
        "hidden_size": lm.hidden_size,
        "fingerprint": fingerprint(inputs, layers, strategies, max_new_tokens, questions),
    }
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["fingerprint"] == meta["fingerprint"]:
        return _summary(read_rows(out_dir), len(list(out_dir.glob("shard-*.parquet"))))
    recorded = json.loads((work / "meta.json").read_text()) if (work / "meta.json").exists() else {}
    if work.exists() and recorded.get("fingerprint") != meta["fingerprint"]:
        shutil.rmtree(work)  # inputs changed: the partial rows would be wrong
    work.mkdir(parents=True, exist_ok=True)
    write_json(work / "meta.json", meta)
    finished = read_rows(work)
    done = set(zip(finished["id"], finished["strategy"]))
    todo = [(q, s) for s in strategies for q in questions if (q.id, s) not in done]
    shard = len(list(work.glob("shard-*.parquet")))
    rows: list[dict[str, Any]] = []
    hidden: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    saved = time.monotonic()
    with tqdm(total=len(questions) * len(strategies), initial=len(done), desc="extract", unit="answer") as bar:
        for number, batch in enumerate(_chunks(todo, batch_size), start=1):
            batch_rows, batch_hidden = run_chunk(
                lm, retriever, batch, layers, k, max_new_tokens, batch_size, bar.update, passage_words
            )
            interrupts.check()  # rows cut short by a signal are never written
            rows += batch_rows
            for layer in layers:
                hidden[layer].append(batch_hidden[layer])
            last = number * batch_size >= len(todo)
            if last or len(rows) >= checkpoint_rows or time.monotonic() - saved >= checkpoint_seconds:
                with interrupts.deferred():  # a checkpoint is written whole
                    write_shard(work, shard, rows, {DEFAULT_POOLING: {layer: torch.cat(ts) for layer, ts in hidden.items()}})
                shard, rows, saved = shard + 1, [], time.monotonic()
                hidden = {layer: [] for layer in layers}
    publish(work, out_dir)
    return _summary(read_rows(out_dir), shard)


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
    writes. Published atomically; returns `extract_states`' summary."""
    metas = [read_meta(part) for part in parts]
    frames = [read_rows(part) for part in parts]
    features = [load_features(part, frame) for part, frame in zip(parts, frames)]
    layers = metas[0]["layers"]
    rows = pd.concat(frames, ignore_index=True)
    hidden = {layer: torch.cat([f[layer] for f in features]) for layer in layers}
    position = {(q.id, strategy): n for n, (strategy, q) in enumerate((s, q) for s in strategies for q in questions)}
    order = sorted(range(len(rows)), key=lambda i: position[(rows.at[i, "id"], rows.at[i, "strategy"])])
    rows = rows.iloc[order][ROW_COLUMNS].reset_index(drop=True)
    # the parts' meta differs only in the fingerprint, which covers their own questions
    meta = {**metas[0], "fingerprint": fingerprint(inputs, layers, strategies, max_new_tokens, questions)}
    starts = range(0, len(rows), checkpoint_rows)
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        for number, start in enumerate(starts):
            chosen = order[start : start + checkpoint_rows]
            write_shard(
                tmp, number, rows.iloc[start : start + checkpoint_rows].to_dict("records"),
                {DEFAULT_POOLING: {layer: hidden[layer][chosen] for layer in layers}},
            )
        write_json(tmp / "meta.json", meta)
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

