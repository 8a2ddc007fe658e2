"""A small workspace of real-shaped evaluation outputs: traces built with the real Trace / Round
dataclasses, their settings sidecars, metrics summarised by the real `summarize`, and probe and
gate reports in the shapes the stages write."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skillrag.eval.scoring import headline, summarize
from skillrag.files import write_json, write_jsonl
from skillrag.methods.trace import Cost, Round, Trace
from skillrag.paths import Paths

SKILLS = ("query_rewriting", "question_decomposition", "evidence_focusing")


def skill_trace(
    index: int, dataset: str, skill: str, fixed: bool, state: list[float] | None, accepted_first: bool = False
) -> Trace:
    """A skill_rag trace: closed-book rejected, retrieval rejected and wrong, then `skill`
    (fixing the question or not); `accepted_first`: the closed-book answer was accepted."""
    gold = f"gold {index}"
    closed = Round(0, "no_retrieval", "wrong", "I think.", score=0.1, accepted=accepted_first,
                   cost=Cost(llm_calls=1, tokens_in=200, tokens_out=20, latency_s=0.5))
    trace = Trace(f"{dataset}-{index}", dataset, f"Who is item {index}?", [gold], "skill_rag", [closed])
    if accepted_first:
        trace.answer, trace.termination = "wrong", "accepted"
    else:
        retrieval = Round(1, "retrieval", "still wrong", "The passages say.", [trace.question], ["p1", "p2"],
                          ["Title one", "Title two"], score=0.2, accepted=False, state=state,
                          cost=Cost(llm_calls=1, tokens_in=900, tokens_out=30, retrievals=1, latency_s=1.0))
        answer = gold if fixed else "another wrong"
        if skill == "exit":
            last = Round(2, "exit", "still wrong", router_scores={"exit": 0.6}, cost=Cost(llm_calls=1, latency_s=0.2))
        else:
            last = Round(2, skill, answer, "Now found.", [f"{skill} query {index}"], ["p3"], ["Title three"],
                         score=0.9 if fixed else 0.3, accepted=fixed, router_scores={skill: 0.7},
                         cost=Cost(llm_calls=2, tokens_in=1500, tokens_out=60, retrievals=1, latency_s=2.0))
        trace.rounds += [retrieval, last]
        trace.answer = last.answer
        trace.termination = "accepted" if fixed else ("exit" if skill == "exit" else "max_rounds")
    trace.flexible_answer = trace.answer
    trace.totals = sum((r.cost for r in trace.rounds), Cost())
    return trace


def simple_trace(index: int, dataset: str, method: str, right: bool) -> Trace:
    retrievals = 0 if method == "no_retrieval" else 1
    round_ = Round(0, "no_retrieval" if not retrievals else "retrieval", f"gold {index}" if right else "nope",
                   cost=Cost(llm_calls=1, tokens_in=300, tokens_out=25, retrievals=retrievals, latency_s=0.4 + index / 10))
    trace = Trace(f"{dataset}-{index}", dataset, f"Who is item {index}?", [f"gold {index}"], method, [round_])
    trace.answer = trace.flexible_answer = round_.answer
    trace.totals = round_.cost
    return trace


def separable_states(skills: list[str], dim: int = 16, seed: int = 0) -> list[list[float]]:
    """One vector per skill label, clustered around a different centre per skill."""
    rng = np.random.default_rng(seed)
    centres = {skill: rng.normal(0, 4, dim) for skill in sorted(set(skills))}
    return [(centres[s] + rng.normal(0, 0.5, dim)).tolist() for s in skills]


def write_runs(paths: Paths, traces: list[Trace]) -> dict:
    """Traces (scored like the runner does), a settings sidecar per run, metrics and detail files."""
    from skillrag.eval.scoring import score_trace

    metrics: dict = {}
    runs: dict[tuple[str, str], list[Trace]] = {}
    for trace in traces:
        trace.scores = score_trace(trace, None)
        runs.setdefault((trace.method, trace.dataset), []).append(trace)
    for (method, dataset), group in runs.items():
        write_jsonl(paths.run_file(method, dataset), [t.to_dict() for t in group])
        write_json(paths.run_file(method, dataset).with_suffix(".settings.json"), {
            "method": method,
            "params": {"lm.max_new_tokens": 64, "retrieval.k": 3},
            "inputs": {"questions": f"q-{dataset}", "model": {"name": "smollm2-135m", "dtype": "float32", "digest": "abc",
                                                                        "licence": {"spdx": "Apache-2.0", "note": "SmolLM2 licence"}},
                       "index": "idx123", "prompts": "pr456"},
            "provenance": [{"git_commit": "0123456789abcdef", "git_dirty": False, "torch": "2.0", "transformers": "5.0",
                            "skillrag": "0.1.0"}],
        })
        metrics.setdefault(method, {})[dataset] = {**summarize(group, None), "reuse": {"lookups": 0, "hits": 0, "hit_rate": 0}}
    write_json(paths.metrics_detail, metrics)
    write_json(paths.metrics, {m: {d: headline(s) for d, s in by.items()} for m, by in metrics.items()})
    return metrics


def write_probe_reports(paths: Paths) -> None:
    cut = {"cut": 0.6, "acc": 0.3, "reject_rate": 0.9, "acc_reject_all": 0.28, "acc_accept_all": 0.2, "n": 100, "is_null": False}
    kept = {"cut": 0.0, "acc": 0.4, "reject_rate": 0.0, "acc_reject_all": 0.3, "acc_accept_all": 0.4, "n": 100, "is_null": True}
    cuts = {"before_retrieval": cut, "after_evidence": {"probing_rag": cut, "skill_rag": kept}}
    write_json(paths.probe_metrics, {"auroc": 0.74, "auroc_ci": [0.6, 0.85], "entropy_auroc": 0.73, "entropy_auroc_ci": [0.6, 0.84],
                                     "n": 200, "n_pos": 4, "cuts": cuts})
    write_json(paths.probe_detail, {"ensemble": {"auroc": 0.74, "auroc_ci": [0.6, 0.85], "ece": 0.03},
               "entropy_baseline": {"auroc": 0.73, "auroc_ci": [0.6, 0.84]}, "vs_entropy": {"verdict": "no_better", "text": "within noise"},
               "recipe": {"name": "cv", "pooling": "answer_last", "network": "logistic C=0.01", "layers": [1, 2]},
               "cuts": cuts, "n": 200, "n_pos": 4, "notes": []})
    paths.probe.mkdir(parents=True, exist_ok=True)
    write_json(paths.probe / "probe.json", {"model": "smollm2-135m", "layers": [1, 2], "recipe": "weighted",
                                            "data_sha256": "d" * 64, "params": {"lr": 0.01}})
    paths.figures.mkdir(parents=True, exist_ok=True)
    (paths.figures / "probe_reliability.png").write_bytes(b"\x89PNG\r\n\x1a\n")


@pytest.fixture
def workspace(tmp_path: Path) -> Paths:
    """Four methods on hotpotqa and musique; skill_rag with 12 failure states (all with vectors)."""
    paths = Paths(tmp_path)
    write_runs(paths, workspace_traces())
    write_probe_reports(paths)
    return paths


def workspace_traces() -> list[Trace]:
    """The `workspace` fixture's traces: skill_rag's 14, and 14 each of no_retrieval, single_step and
    probing_rag, right on every third question."""
    traces: list[Trace] = []
    labels = [SKILLS[i % 3] for i in range(12)]
    states = separable_states(labels)
    for i, (skill, state) in enumerate(zip(labels, states)):
        traces.append(skill_trace(i, "hotpotqa" if i % 2 else "musique", skill, fixed=i % 4 == 0, state=state))
    traces.append(skill_trace(12, "hotpotqa", "exit", fixed=False, state=states[0]))
    traces.append(skill_trace(13, "musique", "", fixed=False, state=None, accepted_first=True))
    for method in ("no_retrieval", "single_step", "probing_rag"):
        for i in range(14):
            traces.append(simple_trace(i, "hotpotqa" if i % 2 else "musique", method, right=i % 3 == 0))
    return traces


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
