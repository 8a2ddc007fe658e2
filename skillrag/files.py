"""Atomic file writes, JSONL reading with errors that name the file and line, and the
exclusive lock a stage holds on its outputs.

Every artifact is written to a temporary sibling, fsynced, and renamed into place, so a stage
interrupted or killed at any instant leaves the old artifact or the new one, never a half-written
one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from skillrag.errors import DataError, UserError


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


def _fsync_one(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync(path: str | Path) -> None:
    """Flush a new artifact to disk before it is published: a file, or a directory with every
    file and folder under it (only what the stage just wrote, never a shared parent)."""
    path = Path(path)
    for item in [path] if path.is_file() else [*sorted(path.rglob("*")), path]:
        if item.is_file() or item.is_dir():  # not sockets, pipes or dangling links
            _fsync_one(item)


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `target` (file or directory); `publish` it on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _restore(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent)) / target.name
    try:
        yield tmp
        publish(tmp, target)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def _restore(target: Path) -> Path:
    """Finish a directory swap that a crash cut short (see `publish`); returns the aside path."""
    aside = target.with_name(f".{target.name}.old")
    if aside.exists():
        if target.exists():
            shutil.rmtree(aside)
        else:
            os.replace(aside, target)
    return aside


def publish(source: str | Path, target: str | Path) -> None:
    """fsync `source` (a file or directory on the same filesystem) and move it to `target`.

    A file is replaced by one rename. A directory cannot be swapped by one rename: the old one is
    renamed aside to `.<name>.old`, the new one moved in, then the old one deleted. A crash
    between the two renames leaves the old one aside, and the next write to `target` puts it
    back first, so a crash at any instant leaves the old directory or the new one.
    """
    source, target = Path(source), Path(target)
    aside = _restore(target)
    fsync(source)
    if target.is_dir() and not target.is_symlink():
        os.replace(target, aside)
        os.replace(source, target)
        _fsync_one(target.parent)  # the renames themselves
        shutil.rmtree(aside)
    else:
        os.replace(source, target)
        _fsync_one(target.parent)


def replace_text(path: str | Path, text: str) -> None:
    """Replace a text file's content atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows atomically; returns how many were written."""
    count = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_json(path: str | Path, obj: Any) -> None:
    replace_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


class WorkspaceBusy(UserError):
    """Another process holds the lock on a stage's outputs; the message names it."""


@contextmanager
def exclusive(lock_file: str | Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` for the block, or raise WorkspaceBusy at once, naming
    the holder (its pid and command, kept in the `.owner` file beside the lock while held).

    Two runs of one stage on one workspace would both do all the work and write each trace twice."""
    lock_file = Path(lock_file)
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    owner = lock_file.with_name(lock_file.name + ".owner")
    lock = FileLock(lock_file, blocking=False)
    try:
        lock.acquire()
    except Timeout:
        holder = owner.read_text(encoding="utf-8").strip() if owner.exists() else "another process"
        raise WorkspaceBusy(
            f"{what} is already running on this workspace ({holder}): wait for it to finish or stop it, then rerun"
        ) from None
    try:
        owner.write_text(f"pid {os.getpid()}: {' '.join(Path(sys.argv[0]).name.split() + sys.argv[1:])}", encoding="utf-8")
        yield
    finally:
        owner.unlink(missing_ok=True)
        lock.release()
