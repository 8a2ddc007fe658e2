"""int8 weights for a float32 causal LM on the CPU (`lm.dtype: int8`), the path chosen by
measurement (docs/models.md, "int8 on the CPU"; benchmarks/quantization.py):

torchao's `Int8DynamicActivationInt8WeightConfig` on every nn.Linear (the LM head too): int8
weights scaled per output channel, activations quantized per token at run time, so a row's
result does not depend on its batch neighbours. Each Linear is then compiled (`torch.compile`):
in eager mode torchao's int8 products are slower than float32 on the CPU, compiled they are
several times faster. torch.ao's `quantize_dynamic` is faster still, but it scales activations
per tensor (the whole batch), and Qwen's outlier activations made its per-layer error 22%
against 4% per token.

Embeddings, norms, attention and the hidden states the prober reads stay float32.
"""

from __future__ import annotations

import torch

# Graphs per compiled code object: every Linear shares one, and a model has one graph per weight
# shape and per batch-size class (1 or more): torch's default of 8 is too few for a whole LM.
RECOMPILE_LIMIT = 64


def quantize_int8(model: torch.nn.Module) -> torch.nn.Module:
    """`model` (float32, on the CPU) with int8 Linear weights, in place; returns it."""
    import torch._dynamo
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.compile(dynamic=True)
    return model
