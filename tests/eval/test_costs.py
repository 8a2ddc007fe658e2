"""Costs charged as incurred: a reused generation charges the compute time it took when made, a
row of a batched call its share, so a method's latency is what it costs alone; Skill-RAG's router
calibration is a cost of the run, made once however many questions run at once.

The scripted model's compute advances a fake clock (`time.perf_counter`, what the metering reads)
instead of sleeping, so the charges are exact whatever else the machine is running."""

from __future__ import annotations

import threading
import time

import pytest

from skillrag.data.schema import Question
from skillrag.eval.runner import run_method
from skillrag.methods import Components, Cost, ReusingLM, build_method
from tests.fakes import CORPUS, HashProber, OverlapRetriever, RuleLM

STEP = 0.05  # seconds the scripted model computes per prompt
QUESTIONS = [Question(f"nq-{i}", "nq", f"What about the {t} case?", ["1969"], "eval")
             for i, t in enumerate(["Cast Away film", "Apollo 11 Moon", "FedEx company", "Forrest Gump film"])]
SETTINGS = {"method": "any", "params": {}, "inputs": {}}


class Clock:
    """`time.perf_counter` that only moves when the scripted model computes."""

    def __init__(self) -> None:
        self.now, self.lock = 0.0, threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(time, "perf_counter", fake)
    return fake


class SlowLM(RuleLM):
    """RuleLM whose generate takes STEP seconds of `clock` per prompt, batched or not."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def generate(self, prompts, *args, **kwargs):
        self.clock.advance(STEP * len(prompts))
        return super().generate(prompts, *args, **kwargs)


def _method(name, lm):
    return build_method(name, Components(lm, OverlapRetriever(CORPUS), HashProber(), k=2, max_new_tokens=16))


def test_a_reused_generation_carries_its_original_compute_time_and_a_method_costs_what_it_costs_alone(clock):
    shared = ReusingLM(SlowLM(clock), capacity=64)
    for question in QUESTIONS:
        _method("no_retrieval", shared).answer(question)
    reused = [_method("probing_rag", shared).answer(q) for q in QUESTIONS]
    alone = [_method("probing_rag", ReusingLM(SlowLM(clock), capacity=0)).answer(q) for q in QUESTIONS]
    assert shared.stats.hits >= len(QUESTIONS)  # every closed-book answer came from no_retrieval's calls
    for with_reuse, without in zip(reused, alone, strict=True):
        assert with_reuse.rounds[0].cost.latency_s == pytest.approx(STEP)  # reused, charged as made
        assert with_reuse.totals.latency_s == pytest.approx(without.totals.latency_s)
        assert with_reuse.totals.latency_s == pytest.approx(sum(r.cost.latency_s for r in with_reuse.rounds))


def test_a_row_of_a_batched_call_is_charged_its_share_not_the_wait(tmp_path, clock):
    lm = ReusingLM(SlowLM(clock), capacity=0)
    traces = run_method(_method("single_step", lm), QUESTIONS, tmp_path / "runs.jsonl", SETTINGS, concurrency=4, batch_size=4)
    assert clock() == pytest.approx(len(QUESTIONS) * STEP)  # one prompt per question was computed
    assert [t.totals.latency_s for t in traces] == pytest.approx([STEP] * len(QUESTIONS))


def test_the_router_calibration_is_one_call_of_the_run_charged_to_no_question(tmp_path):
    inner = RuleLM()
    method = _method("skill_rag", ReusingLM(inner, capacity=64))
    traces = run_method(method, QUESTIONS, tmp_path / "runs.jsonl", SETTINGS, concurrency=3, batch_size=4)
    calls = [kind for kind, _ in inner.calls]
    assert calls.count("loglikelihood") == 1 and any(r.router_scores for t in traces for r in t.rounds)
    assert method.run_costs().llm_calls == 1 and method.run_costs().latency_s > 0
    assert _method("single_step", inner).run_costs() == Cost()
