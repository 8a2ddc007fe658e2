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

Then the retry (`--retry-questions`, 0 to skip; on by default, and the only part run with
`--only-retry`): the router's `choose_and_generate` on `--n` failure states served in one batch
against one at a time (and whether the choices are identical), and single_step, probing_rag and
skill_rag side by side on the same questions (`--concurrency` at once, batches of `--n`, every
answer rejected so every retry runs, params.yaml's methods section): wall seconds per question, the
latency charged per retry round against a retrieval round, and the prompt tokens per retry under
`methods.max_passages`. Over `--index` when it holds a bm25s index, else over a bm25s index built
in memory from `--corpus` (its first `--corpus-passages`, plus the questions' gold passages).

    python benchmarks/lm.py --model smollm2-135m --only-retry --retry-questions 8

Answer cost per precision (`--only-answers`): seconds per closed-book answer and per answer over
three passages (the extract / no_retrieval / single_step answer path, `--n` prompts in one
batch, params.yaml's lm.max_new_tokens), and prefill and decode tokens/s, for each of `--dtypes`
(bfloat16 only where the CPU computes it natively) with its ratio to float32, the precisions
timed alternately; with `--avx2`, the same again in a child process limited to AVX2
(ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2), so an AVX2-only host is represented.

    python benchmarks/lm.py --model qwen2.5-coder-1.5b --only-answers --n 16 --avx2
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
CORPUS = REPO.parent / "shared" / "data" / "corpus" / "passages.jsonl"


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

    pooling = "generated_mean"

    def __init__(self, layers: list[int]) -> None:
        self.layers = layers

    def score(self, hidden) -> float:
        return 0.0

    def accepts(self, score: float, stage: str = "") -> bool:
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
        components = Components(memory, retriever, prober, k=args.k, max_new_tokens=args.max_new_tokens)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            traces = {
                name: run_method(
                    build_method(name, components), items, Path(tmp) / f"{name}.jsonl", {},
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


def retry_retriever(args: argparse.Namespace, questions: list):
    """The bm25s index in `--index` when there is one, else one built from `--corpus` in a
    temporary folder (the questions' gold passages included, so retries can find them)."""
    import tempfile

    from skillrag.data.corpus import read_corpus
    from skillrag.retrieval import open_retriever
    from skillrag.retrieval.bm25s_backend import build_bm25s_index
    from skillrag.retrieval.index_manifest import write_index_manifest

    if (args.index / "bm25s").is_dir():
        return open_retriever("bm25s", args.index)
    gold = {pid for q in questions for pid in q.meta.get("gold_passage_ids", [])}
    passages = list(read_corpus(args.corpus, args.corpus_passages, gold))
    folder = Path(tempfile.mkdtemp(prefix="skillrag-bench-index-"))
    build_bm25s_index(passages, folder / "bm25s", 0.9, 0.4)
    write_index_manifest(folder, ("bm25s",))
    return open_retriever("bm25s", folder)


def retry_speed(lm: HFCausalLM, args: argparse.Namespace) -> None:
    """The router's call batched vs one at a time, and Skill-RAG's retries vs Probing-RAG's."""
    import tempfile

    from skillrag.config import load_params
    from skillrag.data.sources import load_local
    from skillrag.eval.runner import run_method
    from skillrag.lm.calls import ChooseCall
    from skillrag.methods import Components, ReusingLM, build_method
    from skillrag.skills.base import FailureState, render
    from skillrag.skills.router import OPTIONS

    params = load_params(REPO / "params.yaml")
    questions = load_local(args.questions.parents[1], args.questions.parent.name)[: args.retry_questions]
    retriever = retry_retriever(args, questions)
    k = params.retrieval.k

    # The router's call: failure states of the first retrieval (no answer yet), one prefix.
    calls = []
    for question in questions[: args.n]:
        passages = tuple(hit.passage for hit in retriever.search(question.question, k))
        prefix, body = render(FailureState(question.question, "", "", passages, None, 1).fields())
        calls.append(ChooseCall(prefix + body, tuple(OPTIONS.values()), prefix))
    lm.serve_choices(calls[:1])  # warm up: the router prefix in the prefix cache
    batched, alone = best_times(args.repeats, lambda: lm.serve_choices(calls), lambda: [lm.serve_choices([c]) for c in calls])
    many, one = lm.serve_choices(calls), [lm.serve_choices([c])[0] for c in calls]
    same = sum(
        (a.index, a.generation and a.generation.text) == (b.index, b.generation and b.generation.text)
        for a, b in zip(many, one)
    )
    print(
        f"\nretry | model {args.model} | {lm.model.dtype} | torch threads {torch.get_num_threads()} | "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    show = _table((52, 13, 13, 7, 8))
    show("measure", "this path", "baseline", "ratio", "target")
    show(f"router calls/s: batch {len(calls)} / 1 at a time", f"{len(calls) / batched:.2f}", f"{len(calls) / alone:.2f}",
         f"{alone / batched:.2f}x", ">= 2x")
    show("router choices identical to 1 at a time", f"{same} of {len(calls)}", "", "", "all")

    # The methods side by side, every answer rejected so that every retry runs.
    prober = RejectEverything(default_layers(lm.num_layers))
    runs = {}
    for name in ("single_step", "probing_rag", "skill_rag"):
        components = Components.from_params(params, ReusingLM(lm, 0), retriever, prober)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            traces = run_method(build_method(name, components), questions, Path(tmp) / "runs.jsonl", {},
                                concurrency=args.concurrency, batch_size=args.n)
            runs[name] = (time.perf_counter() - start) / len(questions), traces

    def retries(name: str) -> list:
        return [r for t in runs[name][1] for r in t.rounds[2:] if r.queries]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else float("nan")

    retrieval_s = mean([r.cost.latency_s for t in runs["single_step"][1] for r in t.rounds])
    print(f"\n{len(questions)} questions ({args.questions.parent.name}), concurrency {args.concurrency}, batch {args.n}, "
          f"k {k}, methods.max_passages {params.methods.max_passages}, max_rounds {params.methods.max_rounds}, "
          "every answer rejected")
    show("measure", "skill_rag", "probing_rag", "ratio", "target")
    skill_wall, probing_wall = runs["skill_rag"][0], runs["probing_rag"][0]
    show("wall s per question (whole method)", f"{skill_wall:.2f}", f"{probing_wall:.2f}",
         f"{skill_wall / probing_wall:.2f}x", "<= 2x")
    skill_retry, probing_retry = (mean([r.cost.latency_s for r in retries(m)]) for m in ("skill_rag", "probing_rag"))
    show("latency charged per retry round, s", f"{skill_retry:.2f}", f"{probing_retry:.2f}",
         f"{skill_retry / probing_retry:.2f}x", "")
    show("retry / retrieval round (single_step), charged", f"{skill_retry / retrieval_s:.2f}x",
         f"{probing_retry / retrieval_s:.2f}x", "", "<= 2.5x")
    show("prompt tokens per retry round", f"{mean([r.cost.tokens_in for r in retries('skill_rag')]):.0f}",
         f"{mean([r.cost.tokens_in for r in retries('probing_rag')]):.0f}", "", "")
    show("passages per retry answer", f"{mean([len(r.passage_ids) for r in retries('skill_rag')]):.1f}",
         f"{mean([len(r.passage_ids) for r in retries('probing_rag')]):.1f}", "", "")
    show("prompt tokens per retrieval round (single_step)",
         f"{mean([r.cost.tokens_in for t in runs['single_step'][1] for r in t.rounds]):.0f}", "", "", "")


AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def answer_speed(args: argparse.Namespace) -> None:
    """Seconds per answer, closed-book and over three passages, and prefill / decode tokens/s of
    each precision in `--dtypes`, side by side (see the module docstring)."""
    import subprocess
    import sys

    from skillrag.answering import answer_batch
    from skillrag.config import load_params
    from skillrag.data.sources import load_local
    from skillrag.lm.loading import cpu_has_bf16
    from skillrag.prompts.cot import cot_prompt

    params = load_params(REPO / "params.yaml")
    limited = os.environ.get("ATEN_CPU_CAPABILITY") == "avx2"
    dtypes = [d for d in args.dtypes if d != "bfloat16" or (cpu_has_bf16() and not limited)]
    questions = load_local(args.questions.parents[1], args.questions.parent.name)[: args.n]
    retriever = retry_retriever(args, questions)
    texts = [q.question for q in questions]
    passages = [[hit.passage for hit in hits] for hits in retriever.batch_search(texts, params.retrieval.k)]
    closed_prompts = [cot_prompt(t).text for t in texts]
    prefix = cot_prompt(texts[0]).prefix
    new, words = params.lm.max_new_tokens, params.retrieval.passage_words
    models = {dtype: load_lm(args.model, device="cpu", dtype=dtype) for dtype in dtypes}

    def closed(lm: HFCausalLM):
        return lambda: answer_batch(lm, texts, [[] for _ in texts], None, new, passage_words=words)

    def over_passages(lm: HFCausalLM):
        return lambda: answer_batch(lm, texts, passages, None, new, passage_words=words)

    def prefill(lm: HFCausalLM):
        return lambda: lm.generate(closed_prompts, 1)

    def decode(lm: HFCausalLM, steps: int):
        return lambda: lm.generate(closed_prompts, steps, prefix=prefix)

    for lm in models.values():  # warm up: compile (int8), prefix caches
        answer_batch(lm, texts[:2], passages[:2], None, 4, passage_words=words)
        answer_batch(lm, texts[:2], [[], []], None, 4, passage_words=words)
        decode(lm, 2)()
    runs = [run for lm in models.values() for run in (closed(lm), over_passages(lm), prefill(lm), decode(lm, 32), decode(lm, 1))]
    times = best_times(args.repeats, *runs)
    prompt_tokens = sum(len(next(iter(models.values())).encode(t)) for t in closed_prompts)
    decoded = len(closed_prompts) * 31  # every row decodes 32 tokens (no stop), the first comes from the prefill
    measured = {dtype: times[5 * i : 5 * i + 5] for i, dtype in enumerate(dtypes)}
    print(
        f"\nanswers | model {args.model} | {'AVX2 only (' + ', '.join(f'{k}={v}' for k, v in AVX2_ENV.items()) + ')' if limited else torch.backends.cpu.get_cpu_capability()} "
        f"| torch threads {torch.get_num_threads()} | batch {args.n} | {new} new tokens at most | k {params.retrieval.k}, "
        f"{words} words per passage | best of {args.repeats}, alternating | load average {os.getloadavg()[0]:.1f}"
    )
    show = _table((10, 14, 8, 16, 8, 13, 8, 12, 8))
    show("precision", "s/closed-book", "x fp32", "s/over passages", "x fp32", "prefill tok/s", "x fp32", "decode tok/s", "x fp32")
    base = measured.get("float32")
    for dtype, (closed_s, passages_s, prefill_s, decode_full, decode_one) in measured.items():
        ratio = (lambda mine, theirs: f"{theirs / mine:.2f}x") if base else (lambda mine, theirs: "")
        show(
            dtype, f"{closed_s / args.n:.2f}", ratio(closed_s, base[0]) if base else "",
            f"{passages_s / args.n:.2f}", ratio(passages_s, base[1]) if base else "",
            f"{prompt_tokens / prefill_s:.0f}", ratio(prefill_s, base[2]) if base else "",
            f"{decoded / (decode_full - decode_one):.1f}", ratio(decode_full - decode_one, base[3] - base[4]) if base else "",
        )
    if args.avx2 and not limited:
        argv = [a for a in sys.argv[1:] if a != "--avx2"]
        subprocess.run([sys.executable, __file__, *argv, "--no-avx2"], env={**os.environ, **AVX2_ENV}, check=True)


def _table(widths: tuple[int, ...]):
    def show(*cells: str) -> None:
        print("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)))

    return show


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    parser.add_argument("--retry-questions", type=int, default=8, help="questions for the retry comparison (0: skip)")
    parser.add_argument("--only-retry", action="store_true", help="run only the retry comparison")
    parser.add_argument("--only-answers", action="store_true", help="run only the answer cost per precision")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "int8", "bfloat16"], help="precisions for --only-answers")
    parser.add_argument("--avx2", action=argparse.BooleanOptionalAction, default=False,
                        help="--only-answers again in a child process limited to AVX2")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="corpus for the in-memory bm25s index")
    parser.add_argument("--corpus-passages", type=int, default=5000, help="corpus passages it indexes")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.only_answers:
        answer_speed(args)
        return
    if args.only_retry:
        retry_speed(load_lm(args.model, device=args.device, dtype=args.dtype), args)
        return

    if args.precision:
        precision_speed(args)
    if not (args.runtime or args.eval_questions or args.retry_questions):
        return
    lm = load_lm(args.model, device=args.device, dtype=args.dtype)
    if args.runtime:
        runtime_speed(lm, args)
    if args.eval_questions:
        evaluation_speed(lm, args)
    if args.retry_questions:
        retry_speed(lm, args)


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
