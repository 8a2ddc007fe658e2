"""File manifests: each file's size and sha256, recorded when an artifact is built and checked
before it is used.

A truncated or overwritten artifact file would otherwise surface far from its cause (a Java stack
trace, a numpy or safetensors load error, or silently wrong numbers); the check turns it into one
line naming the file and the command that rebuilds it. Hashing is fast enough to do on every
open (0.5-0.9 s for the 540 MB SmolLM2 file on two busy cores, 0.03 s for the default index).

A manifest is `{"digest": ..., "files": {relative path: {"size", "sha256"}}}`; the digest (sha256
over every path, size and hash) identifies the artifact's content as a whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillrag.errors import ArtifactError


class ArtifactCorruptError(ArtifactError):
    """An artifact file that differs from its manifest; the message names the file and the fix."""


def file_sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def _digest(files: dict[str, dict[str, Any]]) -> str:
    lines = "".join(f"{name}\t{entry['size']}\t{entry['sha256']}\n" for name, entry in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def write_manifest(manifest_file: Path, root: Path, files: Iterable[Path]) -> dict[str, Any]:
    """Record `files` (paths under `root`) in `manifest_file`; returns the manifest."""
    entries = {
        path.relative_to(root).as_posix(): {"size": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(files)
    }
    manifest = {"digest": _digest(entries), "files": entries}
    manifest_file.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def read_manifest(manifest_file: Path, rebuild: str) -> dict[str, Any]:
    """The manifest in `manifest_file`; ArtifactCorruptError (saying `rebuild`) when it is unreadable
    or was edited. A missing file is the caller's to report (it knows what is missing)."""
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        files, digest = manifest["files"], manifest["digest"]
        intact = isinstance(files, dict) and _digest(files) == digest
    except (ValueError, KeyError, TypeError):
        intact = False
    if not intact:
        raise ArtifactCorruptError(f"{manifest_file} is not a valid manifest (damaged or edited): {rebuild}")
    return manifest


def verify_files(root: Path, entries: dict[str, dict[str, Any]], rebuild: str, error: type[ArtifactCorruptError] = ArtifactCorruptError) -> None:
    """Check each listed file under `root`: present, same size, same sha256. Raises `error` naming
    the first file that differs, with `rebuild` (the command that rebuilds the artifact)."""
    for name, entry in sorted(entries.items()):
        path = root / name
        if not path.is_file():
            raise error(f"{path} is missing: {rebuild}")
        size = path.stat().st_size
        if size != entry["size"]:
            raise error(f"{path} has {size} bytes, the manifest says {entry['size']} (truncated or overwritten): {rebuild}")
        if file_sha256(path) != entry["sha256"]:
            raise error(f"{path} is corrupted (its sha256 differs from the manifest): {rebuild}")
