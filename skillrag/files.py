"""Atomic file writes and JSONL reading with errors that name the file and line.

Every artifact is written to a temporary sibling and renamed into place, so an interrupted
or failing stage never leaves a half-written output behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class DataError(ValueError):
    """Input data that cannot be used; the message names the file (and line) at fault."""


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield one object per non-blank line; a malformed line raises DataError naming file:line."""
    return (row for _, row in numbered_jsonl(path))


def numbered_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line. Lines are decoded one by one, so bytes that are not
    UTF-8 raise DataError naming file:line too, not a bare UnicodeDecodeError."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"{path}:{number}: not UTF-8 (byte {raw[err.start]:#04x} at byte {err.start + 1})") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{number}: malformed JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            yield number, row


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `target` (file or directory); move it into place on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent)) / target.name
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows atomically; returns how many were written."""
    count = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def digest(*files: str | Path) -> str:
    """sha256 over the bytes of `files` in order: identifies an artifact without its path."""
    hasher = hashlib.sha256()
    for file in files:
        hasher.update(Path(file).read_bytes())
    return hasher.hexdigest()
