"""The index manifest (`<index_dir>/manifest.json`): every Lucene and bm25s file's size and sha256
(the dense index's own root holds one for its files), written with the index and checked (sizes and
hashes; 0.03 s on the default 38,675-passage BM25 index) before a backend opens its files, so a
damaged file is one line naming it, never a Java, numpy or faiss traceback. It is not the index's
identity (skillrag.retrieval.fingerprint): Lucene writes random segment ids, so two builds of the
same corpus differ byte-wise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillrag.provenance import ArtifactCorruptError, read_manifest, verify_files, write_manifest
from skillrag.retrieval.base import IndexMissingError

MANIFEST = "manifest.json"
BM25_DIRS = ("lucene", "bm25s")  # the index stage's folders in data/index, one per backend
DENSE_DIR = "dense"  # the dense index's folder in its own root (data/dense)
REBUILD = "rebuild it with `skillrag index` (or `dvc repro index`)"


class IndexCorruptError(ArtifactCorruptError):
    """An index file that differs from the manifest written with it; the message names the file."""


def _rebuild(index_dir: Path, backend: str) -> str:
    """How a damaged index comes back: the index stage for the BM25 ones, deletion for the dense
    one (its backends rebuild it on first use)."""
    return f"delete {index_dir}: a dense or hybrid backend rebuilds it on first use" if backend == DENSE_DIR else REBUILD


def write_index_manifest(index_dir: Path, backends: Sequence[str]) -> dict[str, Any]:
    """Record every file under the `backends` folders of `index_dir`."""
    files = [p for backend in backends for p in (index_dir / backend).rglob("*") if p.is_file()]
    return write_manifest(index_dir / MANIFEST, index_dir, files)


def _read(index_dir: Path, backend: str) -> dict[str, Any]:
    path = index_dir / MANIFEST
    if not path.exists():
        raise IndexMissingError(f"no index manifest at {path}: {_rebuild(index_dir, backend)}")
    try:
        return read_manifest(path, _rebuild(index_dir, backend))
    except ArtifactCorruptError as err:
        raise IndexCorruptError(str(err)) from None


def verify_index(index_dir: str | Path, backend: str) -> None:
    """Check every file of `backend` ("lucene", "bm25s" or "dense") against the manifest: present, same size,
    same sha256, and no file the build did not write. Raises IndexCorruptError naming the file."""
    index_dir = Path(index_dir)
    rebuild = _rebuild(index_dir, backend)
    listed = {name: entry for name, entry in _read(index_dir, backend)["files"].items() if name.startswith(f"{backend}/")}
    if not listed:
        raise IndexCorruptError(f"the manifest in {index_dir} lists no {backend} files: {rebuild}")
    verify_files(index_dir, listed, rebuild, IndexCorruptError)
    unknown = sorted(
        name
        for name in (p.relative_to(index_dir).as_posix() for p in (index_dir / backend).rglob("*") if p.is_file())
        if name not in listed
    )
    if unknown:
        raise IndexCorruptError(f"{index_dir / unknown[0]} is not part of the built {backend} index: {rebuild}")
