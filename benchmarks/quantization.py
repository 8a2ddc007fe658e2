"""Which int8 path is fastest on this CPU, and how far it moves the outputs: every candidate on
one decoder block of the real model (its seven Linear layers, fed the activations the block sees
on a real few-shot prompt), timed alternately with float32 in one run.

    python benchmarks/quantization.py --model qwen2.5-coder-1.5b --layer 14

Candidates (int8 weights; activations as each path does them):
- `ao-<engine>-pertensor` / `-perchannel`: `torch.ao.quantization.quantize_dynamic` (deprecated
  in favour of torchao) with its default qconfig (one scale per weight matrix) or the per-channel
  one, on each quantized engine torch has (fbgemm, x86, onednn); activations are quantized per
  call with one scale for the whole input (every token of every row in the batch);
- `torchao-da8w8`, `torchao-w8`: torchao's `Int8DynamicActivationInt8WeightConfig` (activations
  scaled per token) and `Int8WeightOnlyConfig`, eager; `-compiled`: each Linear under
  `torch.compile(dynamic=True)` (`torchao-da8w8-compiled` is what `lm.dtype: int8` runs,
  `skillrag.lm.int8`). Skipped when torchao is not installed.

Columns: the time to build (and compile) the variant; prefill (`--tokens` tokens of one prompt)
and decode (16 rows, one token each) speed as the float32 time over the variant's, best of
alternating runs; the largest relative L2 error of the seven outputs against float32 at prefill;
and whether the first token's output is the same computed alone as inside the prefill batch
(`batch-free`: per-tensor activation scales make a row depend on its neighbours; float32 itself
may differ in the last bits between a batch of 1 and a larger one, so read it with float32's row).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm import QUESTIONS, read_prompts

from skillrag.lm.bundled import BUNDLED, bundled_dir
from skillrag.lm.int8 import quantize_int8

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
Inputs = dict[str, torch.Tensor]


def sharing_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of `module` whose submodules are new but whose parameters are the original tensors:
    quantizing the copy replaces its Linear layers only, at no float32 cost."""
    memo = {id(t): t for t in [*module.parameters(), *module.buffers()]}
    return copy.deepcopy(module, memo)


def candidates(block: torch.nn.Module) -> dict[str, Callable[[], torch.nn.Module]]:
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

    def ao(engine: str, qconfig) -> torch.nn.Module:
        torch.backends.quantized.engine = engine
        return torch.ao.quantization.quantize_dynamic(sharing_copy(block), {torch.nn.Linear: qconfig})

    made: dict[str, Callable[[], torch.nn.Module]] = {"float32": lambda: block}
    for engine in ("fbgemm", "x86", "onednn"):
        if engine in torch.backends.quantized.supported_engines:
            made[f"ao-{engine}-pertensor"] = lambda e=engine: ao(e, default_dynamic_qconfig)
            made[f"ao-{engine}-perchannel"] = lambda e=engine: ao(e, per_channel_dynamic_qconfig)
    try:
        import torchao.quantization as tq
    except ImportError:
        print("torchao is not installed: its candidates are skipped")
        return made

    def eager(config: str, compiled: bool = False) -> torch.nn.Module:
        variant = sharing_copy(block)
        tq.quantize_(variant, getattr(tq, config)())
        if compiled:
            for module in variant.modules():
                if isinstance(module, torch.nn.Linear):
                    module.compile(dynamic=True)
        return variant

    made["torchao-da8w8"] = lambda: eager("Int8DynamicActivationInt8WeightConfig")
    made["torchao-w8"] = lambda: eager("Int8WeightOnlyConfig")
    made["torchao-da8w8-compiled"] = lambda: quantize_int8(sharing_copy(block))
    made["torchao-w8-compiled"] = lambda: eager("Int8WeightOnlyConfig", compiled=True)
    return made


def block_inputs(model: torch.nn.Module, tokenizer, layer: int) -> Inputs:
    """What each Linear of decoder layer `layer` reads on the first benchmark prompt, [tokens, in]."""
    block = model.model.layers[layer]
    seen: Inputs = {}
    hooks = [
        block.get_submodule(name).register_forward_pre_hook(lambda m, args, name=name: seen.__setitem__(name, args[0][0].clone()))
        for name in LINEARS
    ]
    with torch.inference_mode():
        model(**tokenizer([read_prompts(QUESTIONS, 1)[0].text], return_tensors="pt"))
    for hook in hooks:
        hook.remove()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(BUNDLED))
    parser.add_argument("--layer", type=int, default=14, help="decoder layer (0-based) whose Linear layers are compared")
    parser.add_argument("--tokens", type=int, default=512, help="prefill tokens (at most the prompt's)")
    parser.add_argument("--only", nargs="*", help="candidate names to run (default: all)")
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = bundled_dir(args.model)
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    seen = block_inputs(model, tokenizer, args.layer)
    block = torch.nn.ModuleDict({name.replace(".", "_"): model.model.layers[args.layer].get_submodule(name) for name in LINEARS})
    prefill = {name: x[: args.tokens] for name, x in seen.items()}
    decode = {name: x[-16:] for name, x in seen.items()}

    def run(module: torch.nn.Module, inputs: Inputs, engine: str) -> Inputs:
        torch.backends.quantized.engine = engine
        with torch.inference_mode():
            return {name: module[name.replace(".", "_")](x) for name, x in inputs.items()}

    def best(call: Callable[[], object], repeats: int) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return min(times)

    engine = torch.backends.quantized.engine
    reference = run(block, prefill, engine)
    tokens = len(next(iter(prefill.values())))
    print(
        f"int8 paths | {args.model} decoder layer {args.layer}, its {len(LINEARS)} Linear layers | prefill {tokens} tokens, "
        f"decode 16 rows | torch {torch.__version__} | {torch.backends.cpu.get_cpu_capability()} | threads {torch.get_num_threads()}"
    )
    print(f"{'path':26} {'build s':>8} {'prefill x':>10} {'decode x':>9} {'max rel err':>12} {'batch-free':>10}", flush=True)
    for name, build in candidates(block).items():
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        variant = build()
        mine = torch.backends.quantized.engine
        run(variant, prefill, mine), run(variant, decode, mine)  # warm up (and compile)
        built = time.perf_counter() - start
        pairs = [
            (best(partial(run, variant, x, mine), n), best(partial(run, block, x, engine), n))
            for x, n in ((prefill, 2), (decode, 5))
            for _ in range(3)
        ]
        prefill_x = min(b for _, b in pairs[:3]) / min(v for v, _ in pairs[:3])
        decode_x = min(b for _, b in pairs[3:]) / min(v for v, _ in pairs[3:])
        out = run(variant, prefill, mine)
        alone = run(variant, {n: x[:1] for n, x in prefill.items()}, mine)
        error = max(float((out[n] - reference[n]).norm() / reference[n].norm()) for n in out)
        free = all(torch.equal(alone[n][0], out[n][0]) for n in out)
        print(f"{name:26} {built:8.0f} {prefill_x:9.2f}x {decode_x:8.2f}x {error:12.4f} {free!s:>10}", flush=True)


if __name__ == "__main__":
    main()
