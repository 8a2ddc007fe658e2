"""Read the passage corpus (`{"id", "title", "text"}` per JSONL line), validating as it goes."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path

from skillrag.data.schema import Passage
from skillrag.errors import DataError
from skillrag.files import read_jsonl


def read_corpus(path: str | Path, max_passages: int | None = None, keep: Collection[str] = ()) -> Iterator[Passage]:
    """Yield passages in file order: the first `max_passages` (all when None), and after them the
    passages whose id is in `keep` (a small index that still holds some questions' evidence).
    Duplicate ids, missing fields or empty text raise DataError naming file:line, and an empty
    corpus raises too (an index over nothing is a mistake)."""
    seen: set[str] = set()
    for number, row in enumerate(read_jsonl(path), start=1):
        full = max_passages is not None and len(seen) >= max_passages
        if full and not keep:
            break
        where = f"{path}:{number}"
        pid = str(row.get("id", "")).strip()
        if full and pid not in keep:
            continue
        if not pid:
            raise DataError(f"{where}: passage without an id")
        if pid in seen:
            raise DataError(f"{where}: duplicate passage id {pid!r}")
        text = str(row.get("text", "")).strip()
        if not text:
            raise DataError(f"{where}: passage {pid!r} has empty text")
        seen.add(pid)
        yield Passage(id=pid, title=str(row.get("title", "")).strip(), text=text)
    if not seen:
        raise DataError(f"{path}: the corpus is empty")
