"""`load_lm(spec)`: one entry point for bundled models, local model directories and hub ids."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from skillrag.errors import ConfigError
from skillrag.lm.bundled import BUNDLED, PromptFormat, bundled_digest, bundled_dir
from skillrag.lm.hf import HFCausalLM
from skillrag.lm.int8 import quantize_int8

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INT8 = "int8"  # int8 Linear weights, float32 everything else (skillrag.lm.int8)


class ModelLoadError(ConfigError):
    """A model spec that names nothing loadable here; the message says what was tried."""


def resolve_device(device: str = "auto") -> torch.device:
    """With "auto", CUDA when present, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} asked for, but torch sees no CUDA device")
    return torch.device(device)


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU computes bfloat16 natively (x86 avx512_bf16 or AMX, Arm bf16): there
    bfloat16 doubles prefill speed (measured here); elsewhere it is emulated and slower than
    float32. Unknown (no /proc/cpuinfo) counts as no."""
    try:
        flags = cpuinfo.read_text()
    except OSError:
        return False
    return re.search(r"\b(avx512_bf16|amx_bf16|bf16)\b", flags) is not None


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """The dtype the model loads and computes in. With "auto", bfloat16 on a GPU and on a CPU that
    computes it natively, else float32; "int8" loads float32 (on the CPU only) and its Linear
    weights are then made int8 (`skillrag.lm.int8`)."""
    if dtype == "auto":
        native = device.type == "cuda" or (device.type == "cpu" and cpu_has_bf16())
        return torch.bfloat16 if native else torch.float32
    if dtype == INT8:
        if device.type != "cpu":
            raise ConfigError(f"lm.dtype int8 runs on the CPU only (its kernels are CPU ones), not on {device}: use bfloat16 there")
        return torch.float32
    if dtype not in _DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r} (have: auto, {', '.join(_DTYPES)}, {INT8})")
    return _DTYPES[dtype]


def precision(dtype: str, device: torch.device) -> str:
    """The precision a model runs in as its identity records it: "int8", or the resolved dtype's
    name ("float32", "bfloat16", "float16"). States and generations differ across precisions, so
    artifacts made under one are refused under another (skillrag.provenance)."""
    return INT8 if dtype == INT8 else str(resolve_dtype(dtype, device)).removeprefix("torch.")


def resolve_prompt_format(spec: str, prompt_format: str = "auto") -> PromptFormat:
    """With "auto", the format the registry measured best for a bundled model, else plain (the
    project's few-shot prompts: every model measured here followed them better than its chat
    template)."""
    if prompt_format == "auto":
        return BUNDLED[spec].prompt_format if spec in BUNDLED else "plain"
    if prompt_format not in ("plain", "chat"):
        raise ConfigError(f"unknown prompt format {prompt_format!r} (have: auto, plain, chat)")
    return prompt_format  # type: ignore[return-value]


def load_lm(spec: str, device: str = "auto", dtype: str = "auto", prompt_format: str = "auto") -> HFCausalLM:
    """Load `spec`: a bundled model name (see `skillrag.lm.bundled.BUNDLED`), a local directory
    with a transformers model, or a Hugging Face hub id (from the local cache when offline), in
    `dtype` (`resolve_dtype`; "int8" quantizes once, here); `prompt_format` says whether prompts
    reach it plain or in its chat template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    if spec in BUNDLED:
        source = str(bundled_dir(spec))
    elif _looks_like_path(spec):
        directory = Path(spec).expanduser()
        if not directory.is_dir():
            raise ModelLoadError(f"no model directory at {spec!r}")
        if not (directory / "config.json").is_file():
            # Without this check transformers guesses a tokenizer and fails on sentencepiece.
            raise ModelLoadError(
                f"{spec!r} is a directory but not a transformers model (no config.json): point lm.model "
                f"at a model directory, a bundled model ({', '.join(BUNDLED)}) or a Hugging Face id"
            )
        source = str(directory)
    else:
        source = spec  # a hub id
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
    except OSError as err:
        raise ModelLoadError(
            f"cannot load model {spec!r}: it is not a bundled model ({', '.join(BUNDLED)}), "
            "not a local model directory, and not a Hugging Face id that can be fetched or found "
            "in the local cache (offline runs, HF_HUB_OFFLINE=1, only see the cache).\n"
            f"cause: {err}"
        ) from err
    if dtype == INT8:
        model = quantize_int8(model)
    chat = resolve_prompt_format(spec, prompt_format) == "chat"
    return HFCausalLM(model.to(torch_device), tokenizer, name=spec, chat=chat)


def model_identity(spec: str, device: str = "auto", dtype: str = "auto") -> dict[str, Any]:
    """The model's name, the dtype it runs in, a digest of its weights and its licence (probe.json
    and each run's settings carry them). A bundled model's digest is that of its conversion
    manifest (every file's sha256); a directory's or cached hub snapshot's covers its files'
    names and sizes (hashing gigabytes on every run does not pay)."""
    from skillrag.provenance import listing_digest

    licence = None
    if spec in BUNDLED:
        digest: str | None = bundled_digest(spec)
        licence = {"spdx": BUNDLED[spec].licence.spdx, "note": BUNDLED[spec].licence.note}
    elif Path(spec).expanduser().is_dir():
        digest = listing_digest(Path(spec).expanduser())
    else:  # a hub id: its snapshot in the local cache, if any
        from huggingface_hub import snapshot_download

        try:
            digest = listing_digest(snapshot_download(spec, local_files_only=True))
        except Exception:  # noqa: BLE001 - not cached: the name and dtype are all we know
            digest = None
    return {"name": spec, "dtype": precision(dtype, resolve_device(device)), "digest": digest, "licence": licence}


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or Path(spec).exists()
