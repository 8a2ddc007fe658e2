"""Case studies in the style of the paper's Table 2, rendered from real traces: each round's
stage or skill, queries, evidence titles, answer and the prober's verdict.

The cases are chosen by rule, not by hand, so a rerun shows the same kind of case: first a
question a skill fixed (wrong after retrieval, right in the end), then one no skill fixed, then
one the router stopped (exit); each slot falls back to the traces with the most rounds. Within a
kind the question with the most rounds comes first, ties by id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from skillrag.report.tables import markdown_table, routed

MAX_CELL = 160

Row = dict[str, Any]


def _routed(trace: Row) -> bool:
    return any(routed(r) for r in trace["rounds"])


def _right(trace: Row) -> bool:
    return bool(trace.get("scores", {}).get("acc"))


KINDS: tuple[tuple[str, Callable[[Row], bool]], ...] = (
    ("a skill fixed it", lambda t: _routed(t) and _right(t)),
    ("no skill fixed it", lambda t: _routed(t) and not _right(t) and t["termination"] != "exit"),
    ("the router stopped (exit)", lambda t: t["termination"] == "exit"),
)


def choose_cases(traces: Sequence[Row], count: int) -> list[tuple[str, Row]]:
    """Up to `count` (kind, trace) pairs, one per kind in order, then the longest remaining."""
    ranked = sorted((t for t in traces if t["termination"] != "error"), key=lambda t: (-len(t["rounds"]), t["question_id"]))
    chosen: list[tuple[str, Row]] = []
    for kind, fits in KINDS:
        found = next((t for t in ranked if fits(t) and all(t is not c for _, c in chosen)), None)
        if found is not None:
            chosen.append((kind, found))
    for trace in ranked:
        if len(chosen) >= count:
            break
        if all(trace is not c for _, c in chosen):
            chosen.append(("most rounds", trace))
    return chosen[:count]


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render_case(number: int, kind: str, trace: Row) -> str:
    rows = []
    for r in trace["rounds"]:
        verdict = "" if r.get("accepted") is None else (" accept" if r["accepted"] else " reject")
        score = "–" if r.get("score") is None else f"{r['score']:.3f}{verdict}"
        router = ", ".join(f"{k} {v:.2f}" for k, v in r.get("router_scores", {}).items() if v is not None)
        stage = r["stage"] + (f" (router: {router})" if router else "")
        if r.get("fallbacks"):
            stage += f" [fallback: {'; '.join(r['fallbacks'])}]"
        rows.append([str(r["index"]), _short(stage), _short(" / ".join(r.get("queries", [])) or "–"),
                     _short("; ".join(r.get("passage_titles", [])) or "–"), _short(r["answer"] or "(none)"), score])
    scores = trace.get("scores", {})
    head = (
        f"### Case {number}: {kind} — `{trace['question_id']}` ({trace['method']})\n\n"
        f"**Question:** {_short(trace['question'])}  \n"
        f"**Gold:** {_short(' / '.join(trace['golds']))}  \n"
        f"**Final answer:** {_short(trace['answer'] or '(none)')} — EM {scores.get('em', 0):.0f}, "
        f"ACC {scores.get('acc', 0):.0f}; ended: {trace['termination']}; "
        f"{trace['totals']['llm_calls']} LLM calls, {trace['totals']['retrievals']} retrievals\n"
    )
    table = markdown_table(["round", "stage / skill", "queries", "evidence (titles)", "answer", "prober P(correct)"], rows)
    return head + "\n" + table
