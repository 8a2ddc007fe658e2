"""load_lm: local directories, hub ids that cannot be reached, device and dtype defaults."""

from __future__ import annotations

import pytest
import torch

from skillrag.lm import ModelLoadError, load_lm
from skillrag.lm.loading import resolve_device, resolve_dtype


def test_load_lm_reads_a_local_model_directory(tmp_path, llama):
    llama.model.save_pretrained(tmp_path)
    llama.tokenizer.save_pretrained(tmp_path)
    loaded = load_lm(str(tmp_path), device="cpu")
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


def test_auto_dtype_is_bfloat16_on_gpu_and_float32_on_cpu():
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("float16", torch.device("cpu")) == torch.float16
    with pytest.raises(ValueError, match="unknown dtype"):
        resolve_dtype("int4", torch.device("cpu"))


def test_auto_device_uses_cuda_only_when_present():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="no CUDA device"):
            resolve_device("cuda")
