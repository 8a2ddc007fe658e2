"""Speed of the LM runtime on real few-shot CoT prompts, as side-by-side ratios from one run.

    python benchmarks/lm.py --model smollm2-135m --n 8 --max-new-tokens 48

Each pair is timed alternately `--repeats` times and the best time of each side is kept, so load
from other processes hurts both sides alike. Decode speed is (time for N tokens - time for 1
token), which leaves prefill out of the comparison with `model.generate`.

Precision (`--precision`, on by default): bfloat16 against float32, the same model loaded in
each, prefill (a whole few-shot prompt, no prefix cache) and decode throughput side by side.
On a CPU without native bfloat16 (no avx512_bf16 / AMX) expect bfloat16 to be slower.

Then evaluation throughput (`--eval-questions`, 0 to skip): the same questions through every
method (`--methods`, over the `--index`), one question at a time as before versus
`--concurrency` questions at once with their LM calls batched (up to `--n` prompts), without and
with generation reuse; the reuse hit rate; and the share of answers the batched run gives
identically (1.0 expected in float32; in bfloat16 a row's numbers depend a little on its batch).
The gated methods use the trained prober in `--probe` when it fits the model, else a stand-in
that rejects every answer (every round runs: the costliest path), as the output says.
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

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO.parent / "shared" / "data" / "hotpotqa" / "questions.jsonl"


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


class RejectEverything:
    """A stand-in prober for a model without a trained one: every answer is rejected, so the
    gated methods run every round."""

    def __init__(self, layers: list[int]) -> None:
        self.layers = layers

    def score(self, hidden) -> float:
        return 0.0

    def accepts(self, score: float) -> bool:
        return False


def evaluation_speed(lm: HFCausalLM, args: argparse.Namespace) -> None:
    """Questions per second through every method: one at a time (no reuse) vs batched across
    questions, without and with generation reuse, on the same questions."""
    import tempfile

    from skillrag.data.schema import Question
    from skillrag.eval.runner import run_method
    from skillrag.lm.loading import model_identity
    from skillrag.methods import Components, ReusingLM, build_method
    from skillrag.probe import Prober
    from skillrag.probe.prober import ProbeError
    from skillrag.retrieval import open_retriever

    with args.questions.open() as lines:
        rows = [json.loads(line) for line, _ in zip(lines, range(args.eval_questions))]
    questions = [Question(r["id"], r["dataset"], r["question"], r["answers"], "eval") for r in rows]
    retriever = open_retriever(args.backend, args.index)
    try:
        identity = model_identity(args.model, args.device, args.dtype)
        prober, prober_note = Prober.load(args.probe, identity, lm.hidden_size), f"trained prober {args.probe}"
    except ProbeError as err:  # none, or one for another model: the stand-in, and the output says why
        prober = RejectEverything(default_layers(lm.num_layers))
        prober_note = f"stand-in prober that rejects every answer ({type(err).__name__}: {str(err)[:80]})"

    def run(concurrency: int, reuse: int, items: list[Question] = questions) -> tuple[float, dict, float]:
        memory = ReusingLM(lm, reuse)
        parts = Components(memory, retriever, prober, k=args.k, max_new_tokens=args.max_new_tokens)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            traces = {
                name: run_method(
                    build_method(name, parts), items, Path(tmp) / f"{name}.jsonl", {},
                    concurrency=concurrency, batch_size=args.n,
                )
                for name in args.methods
            }
            seconds = time.perf_counter() - start
        return seconds, traces, memory.stats.as_dict()["hit_rate"]

    run(1, 0, questions[:1])  # warm up: every prompt prefix in the prefix cache
    one, one_traces, _ = run(1, 0)
    batched, batched_traces, _ = run(args.concurrency, 0)
    reused, reused_traces, hit_rate = run(args.concurrency, args.reuse_cache)
    pairs = [
        (a.answer, b.answer)
        for runs in (batched_traces, reused_traces)
        for name in args.methods
        for a, b in zip(one_traces[name], runs[name])
    ]
    same = sum(a == b for a, b in pairs) / len(pairs)
    answered = len(questions) * len(args.methods)
    print(
        f"\nevaluation | {len(questions)} questions x {len(args.methods)} methods ({', '.join(args.methods)}) | "
        f"{args.backend} top-{args.k} | {args.max_new_tokens} new tokens | {prober_note} | "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    show = _table((52, 13, 13, 7, 8))
    show("measure", "this path", "baseline", "ratio", "target")
    for label, seconds in (
        (f"batched, concurrency {args.concurrency} / 1 at a time", batched),
        ("batched + reuse / 1 at a time", reused),
    ):
        rates = f"{answered / seconds:.2f}", f"{answered / one:.2f}"
        show(f"answers/s: {label}", *rates, f"{one / seconds:.2f}x", ">= 3x")
    show("generation reuse hit rate (batched + reuse)", f"{hit_rate:.1%}", "", "", "")
    show("answers identical to 1 at a time", f"{same:.1%}", "", "", "1.0 in fp32")


def _table(widths: tuple[int, ...]):
    def show(*cells: str) -> None:
        print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)))

    return show


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=8, help="prompts, and the batch size")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--runtime", action=argparse.BooleanOptionalAction, default=True, help="the LM runtime part")
    parser.add_argument("--precision", action=argparse.BooleanOptionalAction, default=True, help="bfloat16 vs float32")
    parser.add_argument("--eval-questions", type=int, default=40, help="questions for evaluation throughput (0: skip)")
    parser.add_argument("--methods", nargs="+", default=["no_retrieval", "single_step", "probing_rag", "skill_rag"])
    parser.add_argument("--concurrency", type=int, default=8, help="questions at once in the batched runs")
    parser.add_argument("--reuse-cache", type=int, default=1024)
    parser.add_argument("--index", type=Path, default=REPO / "data" / "index")
    parser.add_argument("--backend", default="bm25s")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--probe", type=Path, default=REPO / "data" / "probe")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.precision:
        precision_speed(args)
    if not (args.runtime or args.eval_questions):
        return
    lm = load_lm(args.model, device=args.device, dtype=args.dtype)
    if args.runtime:
        runtime_speed(lm, args)
    if args.eval_questions:
        evaluation_speed(lm, args)


def precision_speed(args: argparse.Namespace) -> None:
    """Prefill and decode throughput of bfloat16 against float32: the model loaded in each, the
    same prompts, timed alternately. Prefill: one token after the whole prompt, no prefix cache;
    decode: (time for N tokens - time for 1 token) over the decode tokens, prefix cached."""
    prompts = read_prompts(args.questions, args.n)
    texts, prefix = [p.text for p in prompts], prompts[0].prefix
    models = {dtype: load_lm(args.model, device=args.device, dtype=dtype) for dtype in ("bfloat16", "float32")}
    new = args.max_new_tokens

    def prefill(lm: HFCausalLM):
        return lambda: lm.generate(texts, 1)

    def decode(lm: HFCausalLM, max_new: int):
        return lambda: lm.generate(texts, max_new, prefix=prefix)

    for lm in models.values():
        decode(lm, 2)()  # warm up, fill the prefix cache
    prompt_tokens = sum(len(lm.encode(text)) for text in texts)
    generated = {dtype: sum(len(g.token_ids) for g in decode(lm, new)()) - args.n for dtype, lm in models.items()}
    bf16, fp32 = models["bfloat16"], models["float32"]
    prefill_bf16, prefill_fp32, full_bf16, one_bf16, full_fp32, one_fp32 = best_times(
        args.repeats, prefill(bf16), prefill(fp32), decode(bf16, new), decode(bf16, 1), decode(fp32, new), decode(fp32, 1)
    )
    decode_bf16 = generated["bfloat16"] / (full_bf16 - one_bf16)
    decode_fp32 = generated["float32"] / (full_fp32 - one_fp32)
    print(
        f"precision | model {args.model} | device {bf16.device} | torch threads {torch.get_num_threads()} | "
        f"{args.n} prompts ({prompt_tokens} prompt tokens), {new} new tokens | best of {args.repeats} | "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    show = _table((44, 11, 11, 7, 9))
    show("measure", "bfloat16", "float32", "ratio", "target")
    show(
        "prefill tok/s (whole prompts, no cache)",
        f"{prompt_tokens / prefill_bf16:.1f}",
        f"{prompt_tokens / prefill_fp32:.1f}",
        f"{prefill_fp32 / prefill_bf16:.2f}x",
        "",
    )
    show(f"decode tok/s, batch {args.n}", f"{decode_bf16:.1f}", f"{decode_fp32:.1f}", f"{decode_bf16 / decode_fp32:.2f}x", "")
    same = [a.token_ids == b.token_ids for a, b in zip(decode(bf16, new)(), decode(fp32, new)())]
    show("generations identical to float32", f"{sum(same)} of {len(same)}", "", "", "")
    print()


def runtime_speed(lm: HFCausalLM, args: argparse.Namespace) -> None:
    """Batching, the prefix cache, capture and decode speed of the runtime against model.generate."""
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
    show = _table((44, 11, 11, 7, 9))
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
