"""One vocabulary for "what this output was made from" (skillrag.provenance): digests, manifests,
model identities and code provenance, and the glossary that names them."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

import pytest

from skillrag import provenance
from skillrag.errors import ArtifactError
from skillrag.provenance import (
    ArtifactCorruptError,
    bytes_digest,
    check_identity,
    code_provenance,
    digest,
    listing_digest,
    read_manifest,
    text_digest,
    verify_files,
    write_manifest,
)

ROOT = Path(__file__).resolve().parents[1]
MODEL = {"name": "qwen2.5-1.5b", "dtype": "int8", "digest": "ab" * 32, "licence": "apache-2.0"}


def test_digests_are_sha256_of_the_content_whatever_its_form(tmp_path):
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    first.write_bytes(b"x" * (3 << 20))  # more than one read block
    second.write_bytes(b"tail")
    joined = hashlib.sha256(b"x" * (3 << 20) + b"tail").hexdigest()
    assert digest(first, second) == joined == bytes_digest(first.read_bytes(), b"tail")
    assert text_digest("é") == hashlib.sha256("é".encode()).hexdigest()
    before = listing_digest(tmp_path)
    second.write_bytes(b"longer tail")
    assert listing_digest(tmp_path) != before


def test_a_manifest_names_the_file_that_differs_and_the_fix(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"w" * 100)
    (tmp_path / "vocab.txt").write_text("a b c")
    manifest_file = tmp_path / "manifest.json"
    manifest = write_manifest(manifest_file, tmp_path, [tmp_path / "weights.bin", tmp_path / "vocab.txt"])
    assert read_manifest(manifest_file, "rebuild it") == manifest
    verify_files(tmp_path, manifest["files"], "rebuild it")
    (tmp_path / "weights.bin").write_bytes(b"w" * 50)
    with pytest.raises(ArtifactCorruptError, match=r"weights\.bin has 50 bytes, the manifest says 100 .*: rebuild it"):
        verify_files(tmp_path, manifest["files"], "rebuild it")
    (tmp_path / "weights.bin").write_bytes(b"v" * 100)
    with pytest.raises(ArtifactCorruptError, match=r"weights\.bin is corrupted"):
        verify_files(tmp_path, manifest["files"], "rebuild it")
    edited = json.loads(manifest_file.read_text())
    edited["files"]["vocab.txt"]["size"] = 6
    manifest_file.write_text(json.dumps(edited))
    with pytest.raises(ArtifactCorruptError, match=r"not a valid manifest .*: rebuild it"):
        read_manifest(manifest_file, "rebuild it")


def test_an_artifact_of_another_model_dtype_or_weights_is_refused_naming_both():
    check_identity(dict(MODEL, licence="other"), MODEL, "data/probe", "`skillrag train-probe`")  # licence: recorded only
    for key, other in (("name", "smollm2-135m"), ("dtype", "float32"), ("digest", "cd" * 32)):
        with pytest.raises(ArtifactError, match=r"data/probe was built from .* but the current model is .*skillrag train-probe"):
            check_identity(dict(MODEL, **{key: other}), MODEL, "data/probe", "`skillrag train-probe`")
    with pytest.raises(ArtifactError, match="records no model identity"):
        check_identity({"name": "qwen2.5-1.5b"}, MODEL, "data/probe", "`skillrag train-probe`")


def test_code_provenance_names_the_commit_and_the_package_versions():
    recorded = code_provenance()
    assert set(recorded) == {"git_commit", "git_dirty", "torch", "transformers", "skillrag"}
    assert all(recorded[package] for package in ("torch", "transformers", "skillrag"))


def test_nothing_else_computes_a_sha256_and_the_glossary_names_every_provenance_function():
    computing = []
    for file in sorted((ROOT / "skillrag").rglob("*.py")):
        if file.name == "provenance.py" and file.parent.name == "skillrag":
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "sha256" and getattr(node.value, "id", None) == "hashlib":
                computing.append(f"{file.relative_to(ROOT)}:{node.lineno}")
    assert computing == [], "use skillrag.provenance instead"
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    section = glossary.split("## Provenance", 1)[1]
    public = [name for name in vars(provenance) if callable(getattr(provenance, name)) and not name.startswith("_")
              and getattr(getattr(provenance, name), "__module__", None) == provenance.__name__]
    assert public, "skillrag.provenance defines no function"
    assert [name for name in public if not re.search(rf"`{name}`", section)] == []
