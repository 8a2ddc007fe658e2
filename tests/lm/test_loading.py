"""load_lm: local directories, hub ids that cannot be reached, device, dtype and prompt-format defaults,
the model identity."""

from __future__ import annotations

import pytest
import torch

from skillrag.lm import ModelLoadError, load_lm, loading
from skillrag.lm.bundled import BUNDLED, MANIFEST
from skillrag.lm.loading import (
    cpu_has_bf16,
    model_identity,
    resolve_device,
    resolve_dtype,
    resolve_prompt_format,
)
from skillrag.provenance import write_manifest


def test_load_lm_reads_a_local_model_directory(tmp_path, llama):
    llama.model.save_pretrained(tmp_path)
    llama.tokenizer.save_pretrained(tmp_path)
    loaded = load_lm(str(tmp_path), device="cpu", dtype="float32")
    assert loaded.num_layers == 3 and loaded.hidden_size == 32
    assert loaded.model.dtype == torch.float32
    assert loaded.generate(["Hi"], 5)[0].token_ids == llama.generate(["Hi"], 5)[0].token_ids


def test_a_missing_directory_is_named(tmp_path):
    with pytest.raises(ModelLoadError, match="no model directory"):
        load_lm(str(tmp_path / "absent"))


def test_a_directory_that_is_not_a_model_says_so_in_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ModelLoadError, match=r"is a directory but not a transformers model \(no config\.json\)") as info:
        load_lm(str(tmp_path), device="cpu")
    assert "\n" not in str(info.value) and "sentencepiece" not in str(info.value)


def test_a_hub_id_that_cannot_be_loaded_says_why():
    with pytest.raises(ModelLoadError, match="not a bundled model.*HF_HUB_OFFLINE"):
        load_lm("skillrag-tests/no-such-model", device="cpu")


def test_auto_dtype_is_bfloat16_on_gpu_and_on_cpus_that_compute_it(monkeypatch):
    monkeypatch.setattr(loading, "cpu_has_bf16", lambda: False)
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(loading, "cpu_has_bf16", lambda: True)
    assert resolve_dtype("auto", torch.device("cpu")) == torch.bfloat16
    assert resolve_dtype("float16", torch.device("cpu")) == torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("int4", torch.device("cpu"))


@pytest.mark.parametrize(
    ("flags", "native"),
    [("fpu avx2 avx512f avx512_bf16", True), ("fpu amx_tile amx_bf16", True), ("fp asimd bf16", True), ("fpu avx2 avx512f", False)],
)
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, flags, native):
    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert cpu_has_bf16(tmp_path / "cpuinfo") is native
    assert cpu_has_bf16(tmp_path / "absent") is False


def test_auto_prompt_format_is_the_registrys_for_bundled_models_else_plain():
    assert resolve_prompt_format("qwen2.5-coder-1.5b") == BUNDLED["qwen2.5-coder-1.5b"].prompt_format
    assert resolve_prompt_format("some/hub-model") == "plain"
    assert resolve_prompt_format("smollm2-135m", "chat") == "chat"
    with pytest.raises(ValueError, match="unknown prompt format 'json'"):
        resolve_prompt_format("smollm2-135m", "json")


def test_a_bundled_models_identity_carries_its_digest_and_licence(monkeypatch, tmp_path):
    monkeypatch.setenv("SKILLRAG_CACHE", str(tmp_path))
    target = tmp_path / "models" / "qwen2.5-coder-1.5b"
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"weights")
    manifest = write_manifest(target / MANIFEST, target, [target / "model.safetensors"])
    identity = model_identity("qwen2.5-coder-1.5b", device="cpu", dtype="bfloat16")
    assert identity == {
        "name": "qwen2.5-coder-1.5b",
        "dtype": "bfloat16",
        "digest": manifest["digest"],
        "licence": {"spdx": "Apache-2.0", "note": BUNDLED["qwen2.5-coder-1.5b"].licence.note},
    }
    assert "state no licence" in identity["licence"]["note"]


def test_auto_device_uses_cuda_only_when_present():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="no CUDA device"):
            resolve_device("cuda")
