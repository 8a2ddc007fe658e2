"""The index manifest: a damaged index file is named in one line with the command that rebuilds it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillrag.retrieval import IndexCorruptError, IndexMissingError, open_retriever
from skillrag.retrieval.index_manifest import BM25_DIRS as BACKEND_DIRS
from tests.retrieval.corpus import BuiltIndex

REPO = Path(__file__).resolve().parents[2]
REBUILD = r"rebuild it with `skillrag index` \(or `dvc repro index`\)"


@pytest.fixture
def index_copy(built: BuiltIndex, tmp_path: Path) -> Path:
    """A private copy of the session's index, to damage."""
    return Path(shutil.copytree(built.index_dir, tmp_path / "index"))


def _largest_file(index_dir: Path, backend: str) -> Path:
    return max((p for p in (index_dir / backend).rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def test_the_manifest_lists_every_file_of_every_index(built: BuiltIndex) -> None:
    manifest = json.loads((built.index_dir / "manifest.json").read_text())
    on_disk = {p.relative_to(built.index_dir).as_posix() for b in BACKEND_DIRS for p in (built.index_dir / b).rglob("*") if p.is_file()}
    assert set(manifest["files"]) == on_disk
    assert all(entry["size"] == (built.index_dir / name).stat().st_size for name, entry in manifest["files"].items())


@pytest.mark.parametrize("backend", BACKEND_DIRS)
def test_a_truncated_index_file_is_named_with_the_rebuild_command(index_copy: Path, backend: str) -> None:
    victim = _largest_file(index_copy, backend)
    with victim.open("r+b") as handle:
        handle.truncate(victim.stat().st_size // 2)
    with pytest.raises(IndexCorruptError, match=rf"^{victim} has \d+ bytes, the manifest says \d+ \(truncated or overwritten\): {REBUILD}$"):
        open_retriever(backend, index_copy)


@pytest.mark.parametrize("backend", BACKEND_DIRS)
def test_overwritten_bytes_of_the_same_size_are_caught_by_the_hash(index_copy: Path, backend: str) -> None:
    victim = _largest_file(index_copy, backend)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match=rf"^{victim} is corrupted \(its sha256 differs from the manifest\): {REBUILD}$"):
        open_retriever(backend, index_copy)


def test_a_missing_or_edited_manifest_is_refused(index_copy: Path) -> None:
    manifest_file = index_copy / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    next(iter(manifest["files"].values()))["size"] += 1
    manifest_file.write_text(json.dumps(manifest))
    with pytest.raises(IndexCorruptError, match=r"manifest\.json is not a valid manifest \(damaged or edited\)"):
        open_retriever("bm25s", index_copy)
    manifest_file.unlink()
    with pytest.raises(IndexMissingError, match=rf"no index manifest at .*: {REBUILD}"):
        open_retriever("bm25s", index_copy)


def test_an_unlisted_file_in_a_backend_is_refused(index_copy: Path) -> None:
    (index_copy / "lucene" / "_99.cfs").write_bytes(b"stray")
    with pytest.raises(IndexCorruptError, match=r"_99\.cfs is not part of the built lucene index"):
        open_retriever("lucene", index_copy)


def test_search_on_a_truncated_lucene_index_prints_one_line(index_copy: Path, tmp_path: Path) -> None:
    """Through the console script, as a user meets it: one error line, no Java stack trace."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    (tmp_path / "data").mkdir()
    shutil.move(index_copy, tmp_path / "data" / "index")
    victim = _largest_file(tmp_path / "data" / "index", "lucene")
    with victim.open("r+b") as handle:
        handle.truncate(100)
    result = subprocess.run(
        [str(Path(sys.executable).with_name("skillrag")), "--params", str(params_file), "search", "Paris", "--backend", "lucene"],
        check=False, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "400"}, timeout=120,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1
    assert len(lines) == 1 and victim.name in lines[0] and "skillrag index" in lines[0], result.stderr
