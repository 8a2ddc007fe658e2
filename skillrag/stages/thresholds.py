"""Stage `tune_thresholds`: the retrieving baselines' trigger thresholds, chosen on the dev
questions only (data/thresholds/thresholds.json, which `auto` params read; reports/thresholds.json).

The rule, one for every trigger: generate each dev question's closed-book CoT once (greedy, the
evaluation prompt and budget), with token probabilities, entropies and the attention summary.
Without retrieval each baseline writes exactly this CoT, so its first decision is a function of
it: FLARE retrieves iff its lowest token probability (first `methods.flare.max_iterations`
sentences) is below theta, DRAGIN iff its highest RIND exceeds the threshold, entropy_rag iff
its mean token entropy exceeds the cut. Each threshold is then the value whose share of dev
questions sent to retrieval is closest to the target (skillrag.methods.thresholds.pick_threshold):
`tune_thresholds.target_retrieval_rate`, or with `probing_rag` the share of these closed-book
answers the prober rejects at `probe.threshold` (Probing-RAG's stage-1 retrieval rate, measured
on the same generations), so the baselines retrieve as often as Probing-RAG does on dev and
differ only in when.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.lm.base import Generation
from skillrag.methods.dragin import THRESHOLD, highest_rind
from skillrag.methods.entropy_rag import CUT, mean_entropy
from skillrag.methods.flare import THETA, lowest_probability
from skillrag.methods.thresholds import pick_threshold, retrieval_rate
from skillrag.paths import Paths
from skillrag.stages.common import exclusive

RULE = (
    "each threshold sends to retrieval the share of dev questions closest to the target, judged on one "
    "closed-book CoT per dev question (greedy, evaluation prompt and budget): flare retrieves iff the lowest "
    "token probability of its first methods.flare.max_iterations sentences < theta; dragin iff the highest "
    "RIND > threshold; entropy_rag iff the mean token entropy > cut. Candidates: midpoints between adjacent "
    "distinct dev scores, and just beyond each extreme score (by 1% of the range); ties go to fewer retrievals. Target probing_rag: the share "
    "of the same closed-book answers the prober rejects at probe.threshold."
)


@dataclass(frozen=True)
class Trigger:
    """A baseline's first decision on a closed-book CoT: its score, and whether retrieval is
    triggered above the threshold (else below)."""

    method: str
    param: str
    above: bool
    score: Callable[[Generation], float]


def triggers(params: Params) -> list[Trigger]:
    sentences = params.methods.flare.max_iterations
    return [
        Trigger("flare", THETA, False, lambda g: lowest_probability(g, sentences)),
        Trigger("dragin", THRESHOLD, True, highest_rind),
        Trigger("entropy_rag", CUT, True, mean_entropy),
    ]


@exclusive
def tune_thresholds(params: Params, paths: Paths) -> dict[str, Any]:
    """Choose every trigger threshold on dev (see the module docstring) from the first
    `tune_thresholds.questions_per_dataset` dev questions of each dataset; write the thresholds
    to data/thresholds/thresholds.json and, with the dev retrieval rate each gives (overall and
    per dataset), to reports/thresholds.json, which is returned."""
    from tqdm import tqdm

    from skillrag.data.splits import load_split
    from skillrag.files import write_json
    from skillrag.methods.base import ProberGate
    from skillrag.prompts.cot import STOP, cot_prompt

    dev = load_split(paths.questions, "dev", params.prepare.max_question_chars)
    questions = [q for qs in dev.values() for q in qs[: params.tune_thresholds.questions_per_dataset]]
    if not questions:
        raise ValueError(f"no dev questions in {paths.questions / 'dev'}: run `skillrag prepare`")
    lm = runtime.open_lm(params)
    target = params.tune_thresholds.target_retrieval_rate
    gate = ProberGate(runtime.open_prober(params, paths, lm)) if target == "probing_rag" else None
    generations: list[Generation] = []
    size = params.lm.batch_size
    for start in tqdm(range(0, len(questions), size), desc="tune-thresholds: dev closed-book CoTs", unit="batch"):
        prompts = [cot_prompt(q.question) for q in questions[start : start + size]]
        generations += lm.generate(
            [p.text for p in prompts], params.lm.max_new_tokens, stop=STOP,
            capture=gate.layers if gate else None, prefix=prompts[0].prefix, attention=True,
        )
    if gate is not None:
        target = sum(not gate.accepts(gate.score(g), "stage1") for g in generations) / len(generations)
    datasets = sorted({q.dataset for q in questions})
    chosen: dict[str, float] = {}
    report: dict[str, Any] = {
        "rule": RULE,
        "target": {"source": params.tune_thresholds.target_retrieval_rate, "retrieval_rate": target},
        "questions": {d: sum(q.dataset == d for q in questions) for d in datasets},
        "triggers": {},
    }
    for trigger in triggers(params):
        scores = [trigger.score(g) for g in generations]
        value, rate = pick_threshold(scores, trigger.above, target)
        chosen[trigger.param] = value
        report["triggers"][trigger.method] = {
            "param": trigger.param,
            "value": value,
            "retrieves_when": f"score {'>' if trigger.above else '<'} value",
            "dev_retrieval_rate": rate,
            "dev_retrieval_rate_by_dataset": {
                d: retrieval_rate([s for s, q in zip(scores, questions) if q.dataset == d], value, trigger.above)
                for d in datasets
            },
            "dev_score_range": [min(scores), max(scores)],
        }
    silent = [m for m, t in report["triggers"].items() if t["dev_retrieval_rate"] == 0]
    if silent:  # a baseline that never retrieves would publish closed-book numbers under its name
        raise ValueError(
            f"tune-thresholds: no threshold makes {', '.join(silent)} retrieve on any dev question (target rate "
            f"{target:.2f}): set tune_thresholds.target_retrieval_rate to a number above 0"
        )
    write_json(paths.thresholds, {"thresholds": chosen, "target_retrieval_rate": target, "rule": RULE})
    write_json(paths.thresholds_report, report)
    return report
