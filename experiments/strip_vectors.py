"""Take the hidden vectors out of an experiment's trace files before they go into git.

A trace round keeps the answer's hidden vector (`state`: 1,536 float32 for the bundled Qwen, ~8 KB
of base64 or ~30 KB as a JSON list), which made two thirds of the experiments' bytes in git. Nothing
an experiment reports reads them, and the experiment's own command writes them again, so the copy
in git keeps every round with `"state": null` (what `skillrag.methods.trace.Round` reads as "no
vector") and everything else byte for byte. Scripts that need the vectors (router-100's headroom.py)
say where to get them.

    python experiments/strip_vectors.py experiments/<name> [more folders or files ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def strip_line(line: str) -> str:
    """The trace line with every round's vector set to null (other lines pass through unchanged)."""
    row = json.loads(line)
    rounds = row.get("rounds") if isinstance(row, dict) else None
    if not rounds or all(r.get("state") is None for r in rounds):
        return line
    for r in rounds:
        r["state"] = None
    return json.dumps(row, ensure_ascii=False)  # the traces' own writer's format (json.dumps defaults)


def strip_file(path: Path) -> tuple[int, int]:
    """Strip `path` in place (written whole, then renamed); returns its size before and after."""
    text = path.read_text(encoding="utf-8")
    stripped = "".join(strip_line(line) + "\n" for line in text.splitlines() if line.strip())
    if stripped != text:
        partial = path.with_name(path.name + ".partial")
        partial.write_text(stripped, encoding="utf-8")
        partial.replace(path)
    return len(text.encode("utf-8")), len(stripped.encode("utf-8"))


def trace_files(targets: list[Path]) -> list[Path]:
    files = [f for t in targets for f in (sorted(t.rglob("*.jsonl")) if t.is_dir() else [t])]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    return files


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        raise SystemExit(__doc__)
    total_before = total_after = 0
    for path in trace_files([Path(a) for a in argv]):
        before, after = strip_file(path)
        total_before, total_after = total_before + before, total_after + after
        if after != before:
            print(f"{path}: {before / 1e6:.2f} -> {after / 1e6:.2f} MB")
    print(f"in all: {total_before / 1e6:.2f} -> {total_after / 1e6:.2f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
