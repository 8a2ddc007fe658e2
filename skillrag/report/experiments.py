"""The side experiments beside the committed run, one generated line each: what it asked, what it
found, where it lives.

An experiment is a folder `experiments/<name>/` (or, where older ones still live,
`data/custom/<name>/`) with a README.md. Its line reads, from the README:

- the title: the first `# ` heading (else the folder name);
- the question: a line `**Question:** ...` (else the README's first paragraph after the title);
- the result: a line `**Result:** ...` (else the first paragraph or line starting "Result:");

and adds what its committed results say, computed here: every method's pooled ACC over its
questions from the experiment's metrics.json (`reports/custom/<name>/` or any under its folder),
or the router's choosing accuracy from a router_metrics.json. A folder with no README is listed
with what its results say and a note that it states no question.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillrag.report.inputs import in_method_order

ROOTS = ("experiments", "data/custom")  # where experiments live, the current place first
RESULTS = "reports/custom"  # `evaluate --questions --name NAME` writes NAME's metrics here
SENTENCE_CHARS = 320  # a README paragraph quoted in a line is cut at a sentence end before this


@dataclass(frozen=True)
class Experiment:
    name: str
    folder: Path
    title: str
    question: str | None
    result: str | None
    measured: str | None  # computed from its committed results


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _field(text: str, name: str) -> str | None:
    """The paragraph that starts with `**Name:**` or `Name:`, without that label."""
    for paragraph in _paragraphs(text):
        match = re.match(rf"(?:\*\*{name}:?\*\*:?|{name}:)\s*(.+)$", paragraph, re.IGNORECASE)
        if match:
            return _brief(match.group(1))
    return None


def _brief(text: str, limit: int = SENTENCE_CHARS) -> str:
    """`text` cut after the last sentence that ends within `limit` characters ("…" if none does)."""
    if len(text) <= limit:
        return text
    ends = [m.end() for m in re.finditer(r"\.(?=\s)", text[:limit])]
    return text[: ends[-1]] if ends else text[: limit - 1] + "…"


def _from_readme(readme: Path) -> tuple[str | None, str | None, str | None]:
    """(title, question, result) as the README states them (None where it does not)."""
    text = readme.read_text(encoding="utf-8")
    title_match = re.search(r"^# (.+)$", text, re.MULTILINE)
    body = text[title_match.end():] if title_match else text
    paragraphs = _paragraphs(body)
    prose = [p for p in paragraphs if not p.startswith(("#", "`", "-", "|"))] or paragraphs
    question = _field(text, "Question") or (_brief(prose[0]) if prose else None)
    result = _field(text, "Result")
    return (title_match.group(1).strip() if title_match else None), question, result


def _pooled_acc(metrics: dict[str, dict[str, dict[str, Any]]]) -> str:
    parts, sizes = [], set()
    for method in in_method_order(metrics):
        by = metrics[method].values()
        n = sum(int(s["n"]) for s in by)
        sizes.add(n)
        parts.append(f"{method} {100 * sum(s['acc'] * s['n'] for s in by) / n:.1f}")
    count = f"{sizes.pop()} questions" if len(sizes) == 1 else "questions as each method answered"
    return f"ACC % over {count}: " + ", ".join(parts)


def _router(metrics: dict[str, Any]) -> str | None:
    as_run = metrics.get("router_as_run") or {}
    if not as_run.get("states"):
        return None
    majority = as_run["majority"]
    return (f"router as configured: accuracy {as_run['accuracy']:.2f} on {as_run['states']} failure states "
            f"(always `{majority['label']}` {majority['accuracy']:.2f}), fixed {as_run['fixed']} of {as_run['fixable']} fixable")


def _measured(root: Path, name: str, folder: Path) -> str | None:
    candidates = [root / RESULTS / name / "metrics.json", *sorted(folder.rglob("metrics.json"))]
    metrics = next((c for c in candidates if c.is_file()), None)
    if metrics is not None:
        return _pooled_acc(json.loads(metrics.read_text(encoding="utf-8")))
    router = next(iter(sorted(folder.rglob("router_metrics.json"))), None)
    return _router(json.loads(router.read_text(encoding="utf-8"))) if router else None


def find_experiments(root: Path) -> list[Experiment]:
    """Every experiment folder under ROOTS (a name found in both: the first root's), by name."""
    found: dict[str, Experiment] = {}
    for base in ROOTS:
        for folder in sorted(p for p in (root / base).glob("*") if p.is_dir()):
            if folder.name in found:
                continue
            readme = folder / "README.md"
            title, question, result = _from_readme(readme) if readme.is_file() else (None, None, None)
            found[folder.name] = Experiment(folder.name, folder, title or folder.name, question, result,
                                            _measured(root, folder.name, folder))
    return [found[name] for name in sorted(found)]


def _link(target: Path, base: Path) -> str:
    return Path(os.path.relpath(target.resolve(), base.resolve())).as_posix()


def experiments_section(root: Path, base: Path) -> str:
    """The report's list: one line per experiment, its links relative to `base`."""
    experiments = find_experiments(root)
    if not experiments:
        return f"_No side experiment (no folder under {' or '.join(ROOTS)})._"
    lines = []
    for e in experiments:
        readme = e.folder / "README.md"
        link = f"[{e.name}]({_link(readme if readme.is_file() else e.folder, base)})"
        question = e.question or "(its folder has no README stating the question)"
        found = " ".join(x.rstrip(".") + "." for x in (e.result, e.measured) if x) or "no committed result."
        lines.append(f"- **{link}** — {e.title.rstrip('.')}. Asked: {question} Found: {found}")
    return (
        "Side experiments beside the committed run (not its products; each README says how to re-run it). "
        "Each line: the README's question and result (`**Question:**` / `**Result:**` lines, else its first "
        "paragraph), and what its committed metrics say, computed here.\n\n" + "\n".join(lines)
    )
