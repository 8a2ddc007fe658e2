"""Answer committed question splits closed-book and over the top-k passages, exactly as the
extract stage does (`skillrag.pipeline.stages.extract.extract_states`: same prompts, batches, stop
rule, labels and pooled states), under one `lm.dtype`, into a states folder of its own.

    python experiments/int8-dev/answer.py --dtype float32 --splits dev --out experiments/int8-dev/work/float32-dev
    python experiments/int8-dev/answer.py --dtype int8 --splits train dev --out experiments/int8-dev/work/int8

Resumable like the stage (finished rows are checkpointed in `<out>.partial/`). Reads params.yaml,
the committed questions (data/questions/<split>/, in the stage's order: train, then dev) and the Lucene index in data/index/; writes
nothing of the default pipeline's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", required=True, help="lm.dtype for this run (float32, int8, bfloat16)")
    parser.add_argument("--splits", nargs="+", choices=("train", "dev"), default=["dev"])
    parser.add_argument("--out", type=Path, required=True, help="states folder to write (rows + vectors)")
    parser.add_argument("--threads", type=int, help="lm.threads (torch CPU threads; default: params.yaml's)")
    args = parser.parse_args()

    from skillrag.config import load_params
    from skillrag.data.splits import load_split
    from skillrag.lm.base import resolve_layers
    from skillrag.paths import Paths
    from skillrag.pipeline import runtime
    from skillrag.pipeline.stages.extract import extract_states

    overrides = [f"lm.dtype={args.dtype}", *([f"lm.threads={args.threads}"] if args.threads else [])]
    params = load_params(REPO / "params.yaml", overrides=overrides)
    paths = Paths(REPO)
    questions = [
        question
        for split in sorted(args.splits, key=("train", "dev").index)
        for by_dataset in load_split(paths.questions, split, params.prepare.max_question_chars).values()
        for question in by_dataset
    ]
    lm = runtime.open_lm(params)
    inputs = {  # what the extract stage records (its `_inputs`)
        "model": runtime.model_identity(params),
        "retrieval": {**params.retrieval.recorded(), "index": runtime.retrieval_identity(params, paths)},
    }
    summary = extract_states(
        lm,
        runtime.open_retriever(params, paths),
        questions,
        args.out,
        inputs=inputs,
        strategies=params.extract.strategies,
        layers=resolve_layers(params.lm.layers, lm.num_layers),
        k=params.retrieval.k,
        max_new_tokens=params.lm.max_new_tokens,
        batch_size=params.lm.batch_size,
        checkpoint_rows=params.extract.checkpoint_rows,
        checkpoint_seconds=params.extract.checkpoint_seconds,
        passage_words=params.retrieval.passage_words,
    )
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
