"""The trace: what one method did for one question, round by round, and what it cost.

Every method writes the same schema, so evaluation, cost accounting and the report read one
format. `to_dict` gives plain JSON types (non-finite floats become null; a round's hidden `state`
as base64 float32, skillrag.vectors, since traces live in git);
`from_dict` inverts it exactly.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

from skillrag.vectors import decode_vector, encode_vector

Termination = Literal["accepted", "exit", "max_rounds", "exhausted", "error", "done"]
TERMINATIONS: tuple[str, ...] = get_args(Termination)


@dataclass
class Cost:
    """LLM calls (each generate, loglikelihood or choose_and_generate call counts once, however
    many prompts or options it batches), tokens of generate and choose_and_generate calls
    (loglikelihood reports none), retriever searches, seconds."""

    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    retrievals: int = 0
    latency_s: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Cost)))


@dataclass
class Round:
    """One step of a method.

    stage: "no_retrieval" (closed-book answer), "retrieval" (retrieve with the question),
    "requery" (Probing-RAG's re-retrieval), a skill name (the skill wrote this round's queries;
    none when every candidate had been issued before, and the run ended "exhausted"), or "exit"
    (the router stopped; no new answer). `queries` are the retriever queries issued in
    this round (several for question_decomposition). `score`/`accepted` are the prober's verdict
    on this round's answer; `router_scores` the scores behind the skill choice; `fallbacks` says
    which deterministic fallbacks replaced unusable model output; `state` is the answer's hidden
    vector (mean over `Components.state_layers`), kept only when recording states for the learned router.
    `answer` is the strict answer ("" when the generation had no `Answer:`), `flexible_answer`
    the flexible one (skillrag.prompts.cot); `budget_hit`: the generation ended on the token
    budget (max_new_tokens) rather than a stop sequence or end of text. `gold_gain` (a round
    that retrieved, on a question whose bundle names its gold passages, `gold_passage_ids` in
    its meta): whether its passages hold a gold passage that no earlier round's held, so the
    report can say which skills find missing evidence apart from whether the answer then
    changes; None elsewhere.
    """

    index: int
    stage: str
    answer: str
    reasoning: str = ""
    queries: list[str] = field(default_factory=list)
    passage_ids: list[str] = field(default_factory=list)
    passage_titles: list[str] = field(default_factory=list)
    score: float | None = None
    accepted: bool | None = None
    router_scores: dict[str, float | None] = field(default_factory=dict)
    fallbacks: list[str] = field(default_factory=list)
    state: list[float] | None = None
    cost: Cost = field(default_factory=Cost)
    budget_hit: bool = False
    flexible_answer: str = ""
    gold_gain: bool | None = None

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Round:
        return cls(**{**row, "cost": Cost(**row["cost"]), "state": decode_vector(row.get("state"))})



@dataclass
class Trace:
    """A question's run: rounds, the final answer (strict, and flexible), why it stopped, the
    error message when it stopped on one, the totals (including calls of an unfinished round),
    and the question's scores (em, acc, acc_substring, f1 and flexible_*; see
    skillrag.eval.scoring.score_trace), filled by the runner when the trace is written.

    termination: "accepted" (the prober accepted), "exit" (the router chose exit), "max_rounds",
    "exhausted" (no query left that had not been issued), "error", or "done" (fixed baselines).
    """

    question_id: str
    dataset: str
    question: str
    golds: list[str]
    method: str
    rounds: list[Round] = field(default_factory=list)
    answer: str = ""
    termination: Termination = "done"
    error: str | None = None
    totals: Cost = field(default_factory=Cost)
    flexible_answer: str = ""
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        row = _finite(asdict(self))
        for stored, round_ in zip(row["rounds"], self.rounds, strict=True):
            stored["state"] = encode_vector(round_.state)
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Trace:
        if row.get("termination") not in TERMINATIONS:
            raise ValueError(
                f"trace {row.get('question_id')!r}: unknown termination {row.get('termination')!r}"
            )
        rounds = [Round.from_dict(r) for r in row["rounds"]]
        return cls(**{**row, "rounds": rounds, "totals": Cost(**row["totals"])})


def _finite(value: Any) -> Any:
    """NaN and infinities (e.g. unusable router scores) as None: strict JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
