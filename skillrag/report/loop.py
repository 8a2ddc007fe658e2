"""What the prober-gated loop itself does, read from the traces (issue 28): does re-retrieving
after the first retrieval help, and which of its rounds should give the final answer?

- **Loop gain**: per gated method and dataset, on the questions that reached the first
  retrieval round (the rest were accepted closed-book), the share whose final answer is right
  where that round's answer was wrong (`fixed`), and the reverse (`broken`), with the exact
  McNemar test on those questions (skillrag.report.paired).
- **Final-answer policy**: ACC of the paper's rule (`last`: the method's own final answer) next
  to `max_score` (the answer of the round the prober scored highest; ties: the later round) and
  `first_accepted` (the first round the prober accepted, else the final answer), each paired
  against `last`. The paper's rule stays unless another beats it beyond noise (its bootstrap
  interval above 0); a policy should be chosen on dev runs, not on the evaluation's.

Traces are plain JSON rows (skillrag.report.inputs), scored here by strict ACC on the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillrag.metrics import accuracy
from skillrag.report.paired import Paired, paired
from skillrag.report.tables import markdown_table

# The prober-gated loops (skillrag.methods.checked.CHECKED_METHODS; the report imports no method code).
LOOP_METHODS = ("probing_rag", "skill_rag")
FIRST_RETRIEVAL = "retrieval"
ALL = "all"
Row = Mapping[str, Any]


def first_retrieval(trace: Row) -> Row | None:
    """The round that answered over the question's own passages, or None (accepted closed-book)."""
    return next((r for r in trace["rounds"] if r["stage"] == FIRST_RETRIEVAL), None)


@dataclass(frozen=True)
class LoopGain:
    method: str
    dataset: str
    n: int  # questions that reached the first retrieval round
    fixed: int  # first retrieval wrong, final right
    broken: int  # first retrieval right, final wrong
    test: Paired | None  # final vs first retrieval (None without questions)


def loop_gain(method: str, dataset: str, traces: Sequence[Row]) -> LoopGain:
    pairs = [
        (accuracy(t["answer"], t["golds"]), accuracy(first["answer"], t["golds"]))
        for t in traces
        if t["termination"] != "error" and (first := first_retrieval(t)) is not None
    ]
    final, first_acc = [float(a) for a, _ in pairs], [float(b) for _, b in pairs]
    test = paired(final, first_acc) if pairs else None
    return LoopGain(method, dataset, len(pairs), test.won if test else 0, test.lost if test else 0, test)


def _answer_rounds(trace: Row) -> list[Row]:
    return [r for r in trace["rounds"] if r.get("score") is not None]


def last(trace: Row) -> str:
    return trace["answer"]


def max_score(trace: Row) -> str:
    rounds = _answer_rounds(trace)
    if not rounds:
        return trace["answer"]
    best = max(r["score"] for r in rounds)
    return [r for r in rounds if r["score"] == best][-1]["answer"]


def first_accepted(trace: Row) -> str:
    return next((r["answer"] for r in trace["rounds"] if r.get("accepted")), trace["answer"])


POLICIES: dict[str, Callable[[Row], str]] = {"last": last, "max_score": max_score, "first_accepted": first_accepted}


def policy_outcomes(traces: Sequence[Row]) -> dict[str, list[float]]:
    """Per policy, each (non-error) question's strict ACC under it, in one question order."""
    kept = [t for t in traces if t["termination"] != "error"]
    return {name: [float(accuracy(choose(t), t["golds"])) for t in kept] for name, choose in POLICIES.items()}


def policy_rows(method: str, traces: Sequence[Row]) -> list[list[str]]:
    """Table rows: each policy's ACC and its paired comparison against `last`."""
    outcomes = policy_outcomes(traces)
    if not outcomes["last"]:
        return []
    rows = []
    for name, scores in outcomes.items():
        acc = f"{100 * sum(scores) / len(scores):.1f}"
        if name == "last":
            rows.append([method, name, str(len(scores)), acc, "–", "–", "the paper's rule"])
            continue
        test = paired(scores, outcomes["last"])
        beats = "beats last beyond noise" if test.distinguishable and test.difference > 0 else "does not beat last"
        rows.append([method, name, str(len(scores)), acc, f"{test.won} / {test.lost}", f"{test.p_value:.3f}", beats])
    return rows


def _methods(traces: Mapping[str, Mapping[str, Sequence[Row]]]) -> list[str]:
    return [m for m in LOOP_METHODS if any(traces.get(m, {}).values())]


def loop_section(traces: Mapping[str, Mapping[str, Sequence[Row]]]) -> str:
    """The report's section: the loop's gain per gated method and dataset, then the final-answer
    policies; `traces`: method -> dataset -> trace rows."""
    methods = _methods(traces)
    if not methods:
        return "_No gated loop (probing_rag, skill_rag) was evaluated._"
    gains = []
    for method in methods:
        by_dataset = traces[method]
        scopes = [*by_dataset.items(), *([(ALL, [t for ts in by_dataset.values() for t in ts])] if len(by_dataset) > 1 else [])]
        gains += [loop_gain(method, dataset, rows) for dataset, rows in scopes]
    gain_rows = [
        [g.method, g.dataset, str(g.n), f"{g.fixed / g.n:.0%} ({g.fixed})", f"{g.broken / g.n:.0%} ({g.broken})",
         f"{100 * g.test.difference:+.1f}", f"{g.test.p_value:.3f}"]
        for g in gains if g.test is not None
    ]
    policies = [row for m in methods for row in policy_rows(m, [t for ts in traces[m].values() for t in ts])]
    return (
        "Does the loop help? On the questions that reached the first retrieval round (the others were accepted "
        "closed-book): **fixed**, the share whose final answer is right where that round's answer was wrong; "
        "**broken**, the reverse; the difference final minus first retrieval in points, and the exact McNemar p on "
        "the changed questions.\n\n"
        + (markdown_table(["method", "dataset", "questions", "fixed", "broken", "final - first retrieval", "McNemar p"], gain_rows)
           if gain_rows else "_No question reached the first retrieval round._")
        + "\n\nWhich round's answer to keep: strict ACC of the paper's rule (**last**: the final round's answer) next to "
        "**max_score** (the round the prober scored highest) and **first_accepted** (the first round the prober "
        "accepted, else the final answer), each paired against last (won / lost, exact McNemar p). The paper's rule "
        "stays unless another beats it beyond noise; these are the evaluation's runs, so a policy should be chosen on "
        "dev runs, never on these.\n\n"
        + (markdown_table(["method", "policy", "questions", "ACC %", "won / lost vs last", "McNemar p", "verdict"], policies)
           if policies else "_No traces._")
    )
