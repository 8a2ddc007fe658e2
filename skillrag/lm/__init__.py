"""The language model: load (bundled GGUF, local dir, hub id) and generate with hidden-state capture.

The runtime names load lazily, so modules that only need the `LM` protocol (skills, probes,
methods with a scripted LM) do not pay for importing transformers.
"""

from importlib import import_module

from skillrag.lm.base import (
    LM,
    POOLINGS,
    Attention,
    Choice,
    Generation,
    Option,
    default_layers,
    state_vector,
)
from skillrag.lm.calls import ChooseCall, GenerateCall, RequestLM, ScoreCall

_LAZY = {
    "HFCausalLM": "skillrag.lm.hf",
    "ModelLoadError": "skillrag.lm.loading",
    "load_lm": "skillrag.lm.loading",
}

__all__ = [
    "LM",
    "POOLINGS",
    "Attention",
    "Choice",
    "ChooseCall",
    "GenerateCall",
    "Generation",
    "HFCausalLM",
    "ModelLoadError",
    "Option",
    "RequestLM",
    "ScoreCall",
    "default_layers",
    "load_lm",
    "state_vector",
]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
