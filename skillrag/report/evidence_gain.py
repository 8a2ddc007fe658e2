"""Which rounds find missing evidence: per method and round stage (a skill, Probing-RAG's
"requery", the first "retrieval"), how many retrieving rounds found a gold passage that no earlier
round of the question held (`Round.gold_gain`, recorded where the question names its gold
passages). This is read apart from whether the answer then changed: a skill can find the missing
passage and the model still answer wrong, or answer right without it."""

from __future__ import annotations

from collections import Counter

from skillrag.report.inputs import Inputs
from skillrag.report.tables import markdown_table

NOTE = (
    "Rounds that retrieved, by the stage that wrote their queries: **with gold named** counts those on questions "
    "whose data bundle names their gold passages (`gold_passage_ids`), **found new gold** those whose passages held a "
    "gold passage no earlier round of the question held (for the first retrieval: any gold passage)."
)


def gain_counts(inputs: Inputs) -> dict[tuple[str, str], Counter]:
    """(method, stage) -> counts of its retrieving rounds: all, with gold named, that found new gold."""
    counts: dict[tuple[str, str], Counter] = {}
    for method in inputs.methods:
        for trace in inputs.all_traces(method):
            for round_ in trace.get("rounds", []):
                if not round_.get("queries"):
                    continue
                count = counts.setdefault((method, round_["stage"]), Counter())
                gain = round_.get("gold_gain")
                count["rounds"] += 1
                count["with_gold"] += gain is not None
                count["gained"] += gain is True
    return counts


def evidence_gain_table(inputs: Inputs) -> str:
    """The report's table of `gain_counts`, or a line saying why there is none."""
    rows = []
    for (method, stage), c in sorted(gain_counts(inputs).items()):
        share = f"{c['gained'] / c['with_gold']:.0%}" if c["with_gold"] else "–"
        rows.append([method, stage, str(c["rounds"]), str(c["with_gold"]), f"{c['gained']} ({share})"])
    if not any(int(row[3]) for row in rows):
        return "_No retrieving round was on a question that names its gold passages (`gold_passage_ids`)._"
    return NOTE + "\n\n" + markdown_table(["method", "round stage", "rounds", "with gold named", "found new gold"], rows)
