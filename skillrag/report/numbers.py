"""Numbers in prose are generated or dated.

A measured number in the README, the docs or a params.yaml comment goes stale the day the code
or the machine changes (issue 45 found "15 s" for an index build the timings record as 865 s).
So each such number either comes from a committed file through a generator (`skillrag readme`:
the block between its markers) or names when, at which commit and on which machine it was
measured, with a marker in the same paragraph (for params.yaml: the same comment line):

    (measured 2026-12-03, 7d9dd55, Xeon 2 cores AMX)

What counts as measured (MEASURED): a number with a unit of time, size, throughput or speed-up
("2.2x"), a percentage, or a fraction with three decimals (an AUROC, a rate). Not read: inline code
and code blocks (commands and settings, not claims), the paper's settings cited as "paper: N", and
the level of an interval ("95% interval"). A limit the text sets rather than measures ("at most 20
minutes") is read like a measurement: write it as a setting in code (`checkpoint_seconds: 1200`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from skillrag.report.readme import BEGIN, END

DATED = re.compile(r"\(measured\s+\d{4}-\d{2}-\d{2},\s+[0-9a-f]{7,40},\s+[^)]+\)")
_NUMBER = r"(?<![\w.])\d+(?:[.,]\d+)*"
MEASURED = re.compile(
    _NUMBER + r"(?:"
    r"\s?(?:ms|s|sec|seconds?|min|minutes?|h|hours?)\b(?!-)"  # time
    r"|\s?(?:[KMGT]i?B)\b"  # size
    r"|\s?(?:tok(?:ens)?|passages?|questions?|answers?)/s\b"  # throughput
    r"|[x×](?!\w)"  # speed-up ("2.2x"; "30 x 5" is a product)
    r"|\s?%"  # percentage
    r")"
    r"|(?<![\w.])0\.\d{3}\b"  # a rate or AUROC to three decimals
)
# code spans, the paper's settings ("paper: 3000"), an interval's level ("95% interval")
NOT_CLAIMS = re.compile(r"```.*?```|`[^`\n]*`|\bpaper: [\d.,]+|\b\d+% (?:[\w-]+ )?(?:interval|confidence|CI)\b",
                        re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Undated:
    file: Path
    line: int
    number: str
    text: str

    def __str__(self) -> str:
        return (f"{self.file}:{self.line}: {self.number!r} is neither generated nor dated: move it into a generated "
                f"block (`skillrag readme`) or add '(measured YYYY-MM-DD, <commit>, <machine>)' to its "
                f"{'comment' if self.file.suffix in ('.yaml', '.yml') else 'paragraph'}: {self.text.strip()[:120]}")


def _blank_code(text: str) -> str:
    """`text` with what makes no claim (NOT_CLAIMS) replaced by spaces (newlines kept, so line
    numbers stay)."""
    return NOT_CLAIMS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _blank_generated(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def undated_in_markdown(file: Path, text: str) -> Iterator[Undated]:
    """Measured numbers of a markdown text outside generated blocks and code, in paragraphs (and
    tables) without a dated marker."""
    plain = _blank_code(_blank_generated(text))
    lines = text.splitlines()
    start, caption = 0, ""
    for block in re.split(r"(\n\s*\n)", plain):
        if not block.strip():
            start += block.count("\n")
            continue
        original = text_of(lines, start, block)
        # a table is dated by its own rows or by the paragraph just before it (its caption)
        dated = DATED.search(original) or (block.lstrip().startswith("|") and DATED.search(caption))
        if not dated:
            for offset, line in enumerate(block.split("\n")):
                for match in MEASURED.finditer(line):
                    yield Undated(file, start + offset + 1, match.group(0), lines[start + offset])
        caption = original
        start += block.count("\n")


def text_of(lines: list[str], start: int, block: str) -> str:
    """The original lines (code included: a marker may sit next to a command) a blanked block covers."""
    return "\n".join(lines[start:start + block.count("\n") + 1])


def undated_in_yaml_comments(file: Path, text: str) -> Iterator[Undated]:
    """Measured numbers in the comments of a YAML file, per comment line."""
    for number, line in enumerate(text.splitlines(), 1):
        if "#" not in line:
            continue
        comment = _blank_code(line.split("#", 1)[1])
        if DATED.search(line):
            continue
        for match in MEASURED.finditer(comment):
            yield Undated(file, number, match.group(0), line)


def undated_numbers(root: Path) -> list[Undated]:
    """Every undated, ungenerated measured number of the README, docs/ and params.yaml."""
    found: list[Undated] = []
    for file in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        if file.is_file():
            found += undated_in_markdown(file.relative_to(root), file.read_text(encoding="utf-8"))
    params = root / "params.yaml"
    if params.is_file():
        found += undated_in_yaml_comments(params.relative_to(root), params.read_text(encoding="utf-8"))
    return found
