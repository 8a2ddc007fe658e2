"""Speed of the LM runtime on real few-shot CoT prompts, as side-by-side ratios from one run.

    python benchmarks/lm.py --model smollm2-135m --n 8 --max-new-tokens 48

Each pair is timed alternately `--repeats` times and the best time of each side is kept, so load
from other processes hurts both sides alike. Decode speed is (time for N tokens - time for 1
token), which leaves prefill out of the comparison with `model.generate`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from skillrag.lm import HFCausalLM, default_layers, load_lm
from skillrag.prompts.cot import Prompt, cot_prompt

QUESTIONS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "hotpotqa" / "questions.jsonl"


def read_prompts(path: Path, n: int) -> list[Prompt]:
    with path.open() as lines:
        questions = [json.loads(line)["question"] for line, _ in zip(lines, range(n))]
    return [cot_prompt(question) for question in questions]


def best_times(repeats: int, *runs: Callable[[], object]) -> list[float]:
    """Best wall time of each run, the runs alternating so that background load hits all alike."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def hf_generate(lm: HFCausalLM, texts: list[str], max_new_tokens: int, layers: list[int]) -> list[dict]:
    """The plain way: `model.generate` with hidden states of every step, pooled afterwards."""
    tokenizer = lm.tokenizer
    tokenizer.padding_side = "left"  # HFCausalLM pads by itself and ignores this setting
    inputs = tokenizer(texts, return_tensors="pt", padding=True).to(lm.device)
    with torch.inference_mode():
        out = lm.model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=lm.pad_id,
            output_hidden_states=True,
            return_dict_in_generate=True,
        )
    # out.hidden_states[step][layer]: step 0 is the prompt, step s > 0 the token chosen at s - 1.
    steps = out.hidden_states[1:]
    if not steps:
        return [{} for _ in texts]
    return [
        {layer: torch.stack([s[layer][row, -1] for s in steps]).mean(0) for layer in layers}
        for row in range(len(texts))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=8, help="prompts, and the batch size")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    lm = load_lm(args.model, device=args.device)
    prompts = read_prompts(args.questions, args.n)
    texts, prefix = [p.text for p in prompts], prompts[0].prefix
    layers = default_layers(lm.num_layers)
    new, reps = args.max_new_tokens, args.repeats

    def ours(max_new: int, capture: list[int] | None = layers, use_prefix: bool = True, batch=texts):
        return lm.generate(batch, max_new, capture=capture, prefix=prefix if use_prefix else None)

    ours(2)  # warm up and fill the prefix cache
    hf_generate(lm, texts[:1], 2, layers)
    tokens = sum(len(g.token_ids) for g in ours(new))

    capture_on, capture_off = best_times(reps, lambda: ours(new), lambda: ours(new, capture=None))
    batched, single = best_times(reps, lambda: ours(new), lambda: [ours(new, batch=[t]) for t in texts])
    cached, uncached = best_times(reps, lambda: ours(1), lambda: ours(1, use_prefix=False))
    ours_full, ours_one, hf_full, hf_one = best_times(
        reps,
        lambda: ours(new),
        lambda: ours(1),
        lambda: hf_generate(lm, texts, new, layers),
        lambda: hf_generate(lm, texts, 1, layers),
    )
    plain_one_by_one = best_times(reps, lambda: [hf_generate(lm, [t], new, layers) for t in texts])[0]
    decode_tokens = tokens - args.n  # every row's first token comes out of the prefill
    ours_tps = decode_tokens / (ours_full - ours_one)
    hf_tps = decode_tokens / (hf_full - hf_one)

    print(
        f"model {args.model} | device {lm.device} | torch threads {torch.get_num_threads()} | "
        f"{args.n} prompts x {new} new tokens ({tokens} generated), capture {len(layers)} layers | "
        f"best of {reps} | load average {os.getloadavg()[0]:.1f}"
    )
    widths = (44, 11, 11, 7, 9)

    def show(*cells: str) -> None:
        print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)))

    n = args.n
    show("measure", "this path", "baseline", "ratio", "target")
    show(
        "time: with capture / without",
        f"{capture_on:.2f} s",
        f"{capture_off:.2f} s",
        f"{capture_on / capture_off:.2f}x",
        "<= 1.05x",
    )
    show(
        f"tok/s: batch {n} / batch 1",
        f"{tokens / batched:.1f}",
        f"{tokens / single:.1f}",
        f"{single / batched:.2f}x",
        ">= 3x",
    )
    show(
        "prefill time: no prefix / cached prefix",
        f"{cached:.2f} s",
        f"{uncached:.2f} s",
        f"{uncached / cached:.2f}x",
        ">= 3x",
    )
    show(
        f"decode tok/s: ours / model.generate, batch {n}",
        f"{ours_tps:.1f}",
        f"{hf_tps:.1f}",
        f"{ours_tps / hf_tps:.2f}x",
        ">= 2x",
    )
    show(
        f"tok/s: ours batch {n} / model.generate 1 by 1",
        f"{tokens / batched:.1f}",
        f"{tokens / plain_one_by_one:.1f}",
        f"{plain_one_by_one / batched:.2f}x",
        "",
    )


if __name__ == "__main__":
    main()
