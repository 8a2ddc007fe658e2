"""`load_lm(spec)`: one entry point for bundled models, local model directories and hub ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from skillrag.lm.bundled import BUNDLED, bundled_dir
from skillrag.lm.hf import HFCausalLM

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ModelLoadError(RuntimeError):
    """A model spec that names nothing loadable here; the message says what was tried."""


def resolve_device(device: str = "auto") -> torch.device:
    """With "auto", CUDA when present, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} asked for, but torch sees no CUDA device")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """With "auto", bfloat16 on a GPU and float32 on the CPU (CPU half precision is slow and lossy)."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (have: auto, {', '.join(_DTYPES)})")
    return _DTYPES[dtype]


def load_lm(spec: str, device: str = "auto", dtype: str = "auto") -> HFCausalLM:
    """Load `spec`: a bundled model name (see `skillrag.lm.bundled.BUNDLED`), a local directory
    with a transformers model, or a Hugging Face hub id (from the local cache when offline)."""
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
    return HFCausalLM(model.to(torch_device), tokenizer, name=spec)


def model_identity(spec: str, device: str = "auto", dtype: str = "auto") -> dict[str, Any]:
    """The model's name, the dtype it runs in, and a digest of its files' names and sizes (a
    re-converted or re-downloaded model with other weights differs; hashing gigabytes does not pay)."""
    from skillrag.files import listing_digest

    if spec in BUNDLED:
        folder: Path | None = bundled_dir(spec)
    elif Path(spec).expanduser().is_dir():
        folder = Path(spec).expanduser()
    else:  # a hub id: its snapshot in the local cache, if any
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(spec, local_files_only=True))
        except Exception:  # noqa: BLE001 - not cached: the name and dtype are all we know
            folder = None
    resolved = resolve_dtype(dtype, resolve_device(device))
    return {
        "name": spec,
        "dtype": str(resolved).removeprefix("torch."),
        "files": listing_digest(folder) if folder is not None else None,
    }


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or Path(spec).exists()
