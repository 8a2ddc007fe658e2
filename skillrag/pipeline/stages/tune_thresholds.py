"""Stage `tune_thresholds`: the retrieving baselines' trigger thresholds, chosen on the dev
questions only (data/thresholds/thresholds.json, which `auto` params read; reports/thresholds.json).

The rule, one for every trigger: each dev question's closed-book CoT (greedy, the evaluation
prompt and budget). Without retrieval each baseline writes exactly this CoT, so its first
decision is a function of it: FLARE retrieves iff its lowest token probability (first
`methods.flare.max_iterations` sentences) is below theta, DRAGIN iff its highest RIND exceeds the
threshold, entropy_rag iff its mean token entropy exceeds the cut. `extract` already wrote that
CoT for every dev question with its tokens' log-probabilities, entropies and texts (data/states,
the `no_retrieval` rows), so FLARE and entropy_rag are scored from those rows; DRAGIN's RIND needs
the attention summary, which the rows lack, so the CoT is generated again for it (attention on),
the prober's layers captured in the same call. Each threshold is then the value whose share of
dev questions sent to retrieval is closest to the target (skillrag.methods.thresholds.pick_threshold):
`tune_thresholds.target_retrieval_rate`, or with `probing_rag` the share of these closed-book
answers the prober rejects before retrieval (Probing-RAG's retrieval rate, measured on the same
generations at the cut in force, `probe.threshold` included), so the baselines retrieve as often
as Probing-RAG does on dev and differ only in when. A target that some trigger cannot give (no
threshold's rate within half a question of it, e.g. when its scores tie), or one that leaves a
trigger never retrieving, is refused. entropy_rag answers through the prober's answer path,
which rejects a closed-book answer without an `Answer:` line at any cut (skillrag.answering):
such questions retrieve whatever the cut, so its cut aims the other questions at what the target
leaves them, and its rates count both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from skillrag.config import Params
from skillrag.errors import ArtifactError, ConfigError
from skillrag.lm.base import Generation
from skillrag.methods.dragin import THRESHOLD, highest_rind
from skillrag.methods.entropy_rag import CUT, mean_entropy
from skillrag.methods.flare import THETA, lowest_probability
from skillrag.methods.thresholds import pick_threshold, reaches, retrieval_rate
from skillrag.paths import Paths
from skillrag.pipeline import runtime

RULE = (
    "each threshold sends to retrieval the share of dev questions closest to the target, judged on one "
    "closed-book CoT per dev question (greedy, evaluation prompt and budget; extract's no_retrieval rows for "
    "flare and entropy_rag, generated again with attention for dragin): flare retrieves iff the lowest "
    "token probability of its first methods.flare.max_iterations sentences < theta; dragin iff the highest "
    "RIND > threshold; entropy_rag iff the mean token entropy > cut. Candidates: midpoints between adjacent "
    "distinct dev scores, and just beyond each extreme score (by 1% of the range); ties go to fewer retrievals. "
    "Refused: a target no candidate gives within half a question, and one that leaves a trigger never retrieving. "
    "Target probing_rag: the share of the same closed-book answers the prober rejects before retrieval. "
    "entropy_rag retrieves on a CoT without an Answer: line at any cut; its rates count those questions."
)


@dataclass(frozen=True)
class Trigger:
    """A baseline's first decision on a closed-book CoT: its score, whether retrieval is
    triggered above the threshold (else below), whether the score needs the attention summary
    (not in extract's rows: that CoT is generated again), and whether a CoT without an answer
    retrieves at any threshold (`answer_gated`: the method answers through skillrag.answering)."""

    method: str
    param: str
    above: bool
    score: Callable[[Generation], float]
    attention: bool = False
    answer_gated: bool = False

    def forced(self, generation: Generation) -> bool:
        """Whether this CoT retrieves whatever the threshold."""
        from skillrag.prompts.cot import parse_answer

        return self.answer_gated and not parse_answer(generation.text).answer

    def pick(self, generations: Sequence[Generation], target: float) -> tuple[float, list[bool]]:
        """The threshold whose dev retrieval rate, forced questions included, is closest to
        `target` (skillrag.methods.thresholds.pick_threshold on the questions it decides), and
        which questions it sends to retrieval."""
        scores, forced = [self.score(g) for g in generations], [self.forced(g) for g in generations]
        free = [s for s, f in zip(scores, forced) if not f]
        left = (target * len(scores) - sum(forced)) / len(free) if free else 0.0
        value, _ = pick_threshold(free or scores, self.above, min(max(left, 0.0), 1.0))
        return value, [f or retrieval_rate([s], value, self.above) == 1.0 for s, f in zip(scores, forced)]


def triggers(params: Params) -> list[Trigger]:
    sentences = params.methods.flare.max_iterations
    return [
        Trigger("flare", THETA, False, lambda g: lowest_probability(g, sentences)),
        Trigger("dragin", THRESHOLD, True, highest_rind, attention=True),
        Trigger("entropy_rag", CUT, True, mean_entropy, answer_gated=True),
    ]


def stored_generation(row: Any) -> Generation:
    """A closed-book answer as extract stored it (a states row): its text, and per kept token
    the text, log-probability and entropy. Token ids are not stored (no trigger reads them)."""
    return Generation(
        row.text, [], list(row.logprobs), list(row.entropies), int(row.prompt_tokens),
        stopped_by="length" if row.budget_hit else "stop", pieces=list(row.pieces),
    )


def tune_thresholds(params: Params, paths: Paths) -> dict[str, Any]:
    """Choose every trigger threshold on dev (see the module docstring) from the first
    `tune_thresholds.questions_per_dataset` dev questions of each dataset; write the thresholds
    to data/thresholds/thresholds.json and, with the dev retrieval rate each gives (overall and
    per dataset), to reports/thresholds.json, which is returned."""
    from skillrag.answering import ProberChecker
    from skillrag.data.splits import load_split
    from skillrag.files import write_json
    from skillrag.prompts.cot import parse_answer

    dev = load_split(paths.questions, "dev", params.prepare.max_question_chars)
    questions = [q for qs in dev.values() for q in qs[: params.tune_thresholds.questions_per_dataset]]
    if not questions:
        raise ArtifactError(f"no dev questions in {paths.questions / 'dev'}: run `skillrag prepare`")
    stored = _closed_book_rows(paths, [q.id for q in questions])
    lm = runtime.open_lm(params)
    target = params.tune_thresholds.target_retrieval_rate
    gate = ProberChecker(runtime.open_prober(params, paths, lm)) if target == "probing_rag" else None
    generated = _generate(lm, [q.question for q in questions], params, gate.layers if gate else None)
    if gate is not None:
        # a closed-book answer without an Answer: line is never accepted (skillrag.answering)
        accepted = [bool(parse_answer(g.text).answer) and gate.accepts(gate.score(g), "before_retrieval") for g in generated]
        target = accepted.count(False) / len(generated)
    datasets = sorted({q.dataset for q in questions})
    chosen: dict[str, float] = {}
    report: dict[str, Any] = {
        "rule": RULE,
        "target": {"source": params.tune_thresholds.target_retrieval_rate, "retrieval_rate": target},
        "questions": {d: sum(q.dataset == d for q in questions) for d in datasets},
        "triggers": {},
    }
    for trigger in triggers(params):
        pool = generated if trigger.attention else stored
        value, retrieves = trigger.pick(pool, target)
        scores = [trigger.score(g) for g in pool]
        chosen[trigger.param] = value
        report["triggers"][trigger.method] = {
            "param": trigger.param,
            "value": value,
            "retrieves_when": f"score {'>' if trigger.above else '<'} value"
            + (" or the CoT has no Answer: line" if trigger.answer_gated else ""),
            "dev_retrieval_rate": _share(retrieves),
            "dev_retrieval_rate_by_dataset": {
                d: _share([r for r, q in zip(retrieves, questions) if q.dataset == d]) for d in datasets
            },
            "dev_score_range": [min(scores), max(scores)],
        }
        if trigger.answer_gated:
            report["triggers"][trigger.method]["dev_no_answer_line"] = sum(map(trigger.forced, pool))
    _refuse_unreached(report["triggers"], target, len(questions))
    write_json(paths.thresholds, {"thresholds": chosen, "target_retrieval_rate": target, "rule": RULE})
    write_json(paths.thresholds_report, report)
    return report


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def _closed_book_rows(paths: Paths, ids: Sequence[str]) -> list[Generation]:
    """Extract's closed-book dev answers of `ids`, in that order."""
    from skillrag.files import DataError
    from skillrag.probe.state_store import read_rows

    rows = read_rows(paths.states)
    rows = rows[(rows["split"] == "dev") & (rows["strategy"] == "no_retrieval")].set_index("id")
    missing = [i for i in ids if i not in rows.index]
    if missing:
        raise DataError(
            f"{len(missing)} dev questions (e.g. {missing[0]}) have no closed-book answer in {paths.states}: "
            "run `skillrag extract` (or `dvc repro extract`) with no_retrieval in extract.strategies"
        )
    return [stored_generation(row) for row in rows.loc[list(ids)].itertuples()]


def _generate(lm: Any, questions: Sequence[str], params: Params, capture: list[int] | None) -> list[Generation]:
    """The closed-book CoT of each question with its attention summary (and `capture`'s hidden states)."""
    from tqdm import tqdm

    from skillrag.prompts.cot import STOP, cot_prompt

    generations: list[Generation] = []
    size = params.lm.batch_size
    for start in tqdm(range(0, len(questions), size), desc="tune-thresholds: dev closed-book CoTs", unit="batch"):
        prompts = [cot_prompt(q) for q in questions[start : start + size]]
        generations += lm.generate(
            [p.text for p in prompts], params.lm.max_new_tokens, stop=STOP,
            capture=capture, prefix=prompts[0].prefix, attention=True,
        )
    return generations


def _refuse_unreached(chosen: dict[str, dict[str, Any]], target: float, questions: int) -> None:
    """One line naming the triggers whose chosen threshold misses the target, or never retrieves
    (a baseline that never retrieves would publish closed-book numbers under its name)."""
    missed = {m: t["dev_retrieval_rate"] for m, t in chosen.items() if not reaches(t["dev_retrieval_rate"], target, questions)}
    if missed:
        nearest = ", ".join(f"{m} {rate:.1%}" for m, rate in missed.items())
        raise ConfigError(
            f"tune-thresholds: no threshold sends {target:.1%} of the {questions} dev questions to retrieval "
            f"(nearest: {nearest}): set tune_thresholds.target_retrieval_rate to a rate each reaches"
        )
    silent = [m for m, t in chosen.items() if t["dev_retrieval_rate"] == 0]
    if silent:
        raise ConfigError(
            f"tune-thresholds: no threshold makes {', '.join(silent)} retrieve on any dev question (target rate "
            f"{target:.2f}): set tune_thresholds.target_retrieval_rate to a number above 0"
        )
