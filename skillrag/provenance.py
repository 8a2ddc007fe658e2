"""Provenance: what an output was made from, in one word family (docs/glossary.md, "Provenance").

- a **digest** is the sha256 of content: files' bytes (`digest`), a text (`text_digest`), bytes
  (`bytes_digest`: the prober's training tensors), or a
  directory's listing of paths and sizes where hashing every byte on each run would be slow
  (`listing_digest`: a model's weights, an index);
- a **manifest** records each file of an artifact with its size and digest when it is built, and
  is checked before the artifact is used (`write_manifest`, `read_manifest`, `verify_files`): a
  truncated or overwritten file then fails in one line naming it and the command that rebuilds
  it, not as a Java stack trace or silently wrong numbers (hashing on every open: 0.5-0.9 s for the
  540 MB SmolLM2 file on two busy cores, 0.03 s for the default index);
- a **model identity** (name, dtype, weights digest, licence) is recorded by every artifact
  learned from hidden states (the prober, the learned router, Adaptive-RAG's classifier) and
  compared when it is opened (`check_identity`): states of another model, dtype or weights make
  its scores meaningless;
- **code provenance** (commit, dirty tree, package versions) is recorded beside a run and never
  compared (`code_provenance`).

The index's **fingerprint** (skillrag.retrieval.fingerprint) is a manifest's digest plus the
corpus digest; a run's **settings** (skillrag.pipeline.settings) hold its input digests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

from skillrag.errors import ArtifactError
from skillrag.gitutil import head
from skillrag.paths import GENERATED


def digest(*files: str | Path) -> str:
    """sha256 over the bytes of `files` in order, read in blocks: identifies an artifact without
    its path."""
    hasher = hashlib.sha256()
    for file in files:
        with Path(file).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                hasher.update(block)
    return hasher.hexdigest()


def bytes_digest(*chunks: bytes) -> str:
    """sha256 over `chunks` in order (e.g. tensors' bytes)."""
    hasher = hashlib.sha256()
    for chunk in chunks:
        hasher.update(chunk)
    return hasher.hexdigest()


def text_digest(text: str) -> str:
    """sha256 of a text's UTF-8 bytes."""
    return bytes_digest(text.encode())


def listing_digest(directory: str | Path) -> str:
    """sha256 over the relative path and size of every file under `directory`: identifies a build
    cheaply where hashing every byte on each run would be slow (a model's weights, an index)."""
    directory = Path(directory)
    listing = sorted(
        (str(file.relative_to(directory)), file.stat().st_size)
        for file in directory.rglob("*")
        if file.is_file()
    )
    return text_digest(json.dumps(listing))


class ArtifactCorruptError(ArtifactError):
    """An artifact file that differs from its manifest; the message names the file and the fix."""


def _manifest_digest(files: dict[str, dict[str, Any]]) -> str:
    lines = "".join(f"{name}\t{entry['size']}\t{entry['sha256']}\n" for name, entry in sorted(files.items()))
    return text_digest(lines)


def write_manifest(manifest_file: Path, root: Path, files: Iterable[Path]) -> dict[str, Any]:
    """Record `files` (paths under `root`) in `manifest_file`; returns the manifest."""
    entries = {
        path.relative_to(root).as_posix(): {"size": path.stat().st_size, "sha256": digest(path)}
        for path in sorted(files)
    }
    manifest = {"digest": _manifest_digest(entries), "files": entries}
    manifest_file.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def read_manifest(manifest_file: Path, rebuild: str) -> dict[str, Any]:
    """The manifest in `manifest_file`; ArtifactCorruptError (saying `rebuild`) when it is unreadable
    or was edited. A missing file is the caller's to report (it knows what is missing)."""
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        files, recorded = manifest["files"], manifest["digest"]
        intact = isinstance(files, dict) and _manifest_digest(files) == recorded
    except (ValueError, KeyError, TypeError):
        intact = False
    if not intact:
        raise ArtifactCorruptError(f"{manifest_file} is not a valid manifest (damaged or edited): {rebuild}")
    return manifest


def verify_files(
    root: Path,
    entries: dict[str, dict[str, Any]],
    rebuild: str,
    error: type[ArtifactCorruptError] = ArtifactCorruptError,
) -> None:
    """Check each listed file under `root`: present, same size, same sha256. Raises `error` naming
    the first file that differs, with `rebuild` (the command that rebuilds the artifact)."""
    for name, entry in sorted(entries.items()):
        path = root / name
        if not path.is_file():
            raise error(f"{path} is missing: {rebuild}")
        size = path.stat().st_size
        if size != entry["size"]:
            raise error(
                f"{path} has {size} bytes, the manifest says {entry['size']} (truncated or overwritten): {rebuild}"
            )
        if digest(path) != entry["sha256"]:
            raise error(f"{path} is corrupted (its sha256 differs from the manifest): {rebuild}")


COMPARED = ("name", "dtype", "digest")  # the licence is recorded, not compared


def describe(identity: Mapping[str, Any]) -> str:
    """`name (dtype, weights digest 0123456789ab)`, as the error messages show an identity."""
    digest = identity.get("digest")
    return f"{identity.get('name')} ({identity.get('dtype')}, weights digest {str(digest)[:12] if digest else 'unknown'})"


def check_identity(recorded: Any, current: Mapping[str, Any], artifact: str, rebuild_command: str) -> None:
    """Raise ArtifactError unless `recorded` (what `artifact` was built from, as read from its
    record) has the name, dtype and weights digest of `current` (the model that runs now)."""
    if not isinstance(recorded, Mapping) or not set(COMPARED) <= set(recorded):
        raise ArtifactError(
            f"{artifact} records no model identity (name, dtype, weights digest), so it cannot be checked "
            f"against the current model {describe(current)}: rebuild it with {rebuild_command}"
        )
    if any(recorded[key] != current[key] for key in COMPARED):
        raise ArtifactError(
            f"{artifact} was built from {describe(recorded)}, but the current model is {describe(current)}: "
            f"rebuild it with {rebuild_command} (or set lm.model / lm.dtype back to the recorded ones)"
        )


def code_provenance() -> dict[str, Any]:
    """Which code made a run: the git commit (and whether the tree had uncommitted changes) and
    the versions of torch, transformers and skillrag. Recorded, never compared."""
    commit, dirty = head(Path(__file__).parent, ignoring=GENERATED) or (None, None)
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        **{package: version(package) for package in ("torch", "transformers", "skillrag")},
    }
