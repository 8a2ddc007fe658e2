"""The index manifest: every index file's size and sha256, written by the index stage and checked
before a backend opens its files.

A truncated or overwritten Lucene or bm25s file would otherwise surface as a Java stack trace or
a numpy load error far from its cause; the check turns it into one line naming the file and the
command that rebuilds it. Opening checks sizes and sha256 of the backend's files: hashing the
whole default index (38,675 passages) takes well under a second, so there is no fast path.

The manifest's `digest` (sha256 over every file's path, size and hash) is the index's identity: run
settings record it, so traces made on one index are never resumed on another.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from skillrag.files import DataError
from skillrag.retrieval.base import IndexMissingError

MANIFEST = "manifest.json"
BACKEND_DIRS = ("lucene", "bm25s")
REBUILD = "rebuild it with `skillrag index` (or `dvc repro index`)"


class IndexCorruptError(DataError):
    """An index file that differs from the manifest written with it; the message names the file."""


def file_sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def write_manifest(index_dir: Path) -> dict[str, Any]:
    """Record size and sha256 of every file under the backend directories of `index_dir`."""
    files = {
        path.relative_to(index_dir).as_posix(): {"size": path.stat().st_size, "sha256": file_sha256(path)}
        for backend in BACKEND_DIRS
        for path in sorted((index_dir / backend).rglob("*"))
        if path.is_file()
    }
    manifest = {"digest": _digest(files), "files": files}
    (index_dir / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _digest(files: dict[str, dict[str, Any]]) -> str:
    lines = "".join(f"{name}\t{entry['size']}\t{entry['sha256']}\n" for name, entry in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    path = Path(index_dir) / MANIFEST
    if not path.exists():
        raise IndexMissingError(f"no index manifest at {path}: {REBUILD}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files, digest = manifest["files"], manifest["digest"]
    except (ValueError, KeyError, TypeError):
        raise IndexCorruptError(f"{path} is not a valid index manifest: {REBUILD}") from None
    if not isinstance(files, dict) or _digest(files) != digest:
        raise IndexCorruptError(f"{path} does not match its own digest: {REBUILD}")
    return manifest


def index_digest(index_dir: str | Path) -> str:
    """The identity of the index in `index_dir` (both backends): the manifest's digest."""
    return str(read_manifest(index_dir)["digest"])


def verify_index(index_dir: str | Path, backend: str) -> None:
    """Check every file of `backend` ("lucene" or "bm25s") against the manifest: present, same size,
    same sha256, and no file the build did not write. Raises IndexCorruptError naming the file."""
    index_dir = Path(index_dir)
    listed = {name: entry for name, entry in read_manifest(index_dir)["files"].items() if name.startswith(f"{backend}/")}
    if not listed:
        raise IndexCorruptError(f"the manifest in {index_dir} lists no {backend} files: {REBUILD}")
    for name, entry in sorted(listed.items()):
        path = index_dir / name
        if not path.is_file():
            raise IndexCorruptError(f"{path} is missing from the {backend} index: {REBUILD}")
        size = path.stat().st_size
        if size != entry["size"]:
            raise IndexCorruptError(f"{path} has {size} bytes, the manifest says {entry['size']} (truncated or overwritten): {REBUILD}")
        if file_sha256(path) != entry["sha256"]:
            raise IndexCorruptError(f"{path} is corrupted (its sha256 differs from the manifest): {REBUILD}")
    extra = sorted(
        p.relative_to(index_dir).as_posix() for p in (index_dir / backend).rglob("*") if p.is_file()
    )
    unknown = [name for name in extra if name not in listed]
    if unknown:
        raise IndexCorruptError(f"{index_dir / unknown[0]} is not part of the built {backend} index: {REBUILD}")
