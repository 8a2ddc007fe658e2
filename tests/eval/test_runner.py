"""The resumable runner, with the scripted fake LM (the summary: tests/eval/test_scoring.py)."""

import json
import os
import signal
from typing import ClassVar

import pytest
import torch

from skillrag import interrupts
from skillrag.config import MethodsParams
from skillrag.data.schema import Question
from skillrag.eval.runner import read_traces, run_method, settings_file
from skillrag.files import DataError
from skillrag.methods import Components, build_method
from skillrag.methods.exploration import SkillExploration
from tests.fakes import CORPUS, FakeLM, HashProber, OverlapRetriever, RuleLM, without_latency

QUESTIONS = [Question(f"nq-{i}", "nq", f"Question number {i}?", ["Paris"], "eval") for i in range(4)]
PROVENANCE = {"git_commit": "a" * 40, "git_dirty": False}
SETTINGS = {
    "method": "no_retrieval",
    "params": {"lm.max_new_tokens": 96},
    "inputs": {"questions": "q1", "model": {"name": "fake", "dtype": "float32"}},
    "provenance": PROVENANCE,
}


def _method(replies):
    return build_method("no_retrieval", Components(FakeLM(replies=replies), OverlapRetriever(CORPUS)))


def _recorded(out):
    return json.loads(settings_file(out).read_text())


def test_run_resumes_after_a_crash_mid_write(tmp_path):
    out = tmp_path / "runs" / "no_retrieval" / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris", " y\nAnswer: Rome"]), QUESTIONS[:2], out, SETTINGS)
    with out.open("a") as handle:
        handle.write('{"question_id": "nq-2", "trunc')  # killed mid-line
    method = _method([" z\nAnswer: Paris", " w\nAnswer: Paris"])
    traces = run_method(method, QUESTIONS, out, SETTINGS)
    assert [t.question_id for t in traces] == [q.id for q in QUESTIONS]
    assert method.components.lm.exhausted  # exactly the two missing questions were answered
    assert len(read_traces(out)) == 4
    assert all(json.loads(line) for line in out.read_text().splitlines())


def test_a_whole_last_line_without_its_newline_is_kept_and_the_next_trace_starts_a_line(tmp_path):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    out.write_text(out.read_text().removesuffix("\n"))  # killed between the line and its newline
    method = _method([" y\nAnswer: Rome"])
    run_method(method, QUESTIONS[:2], out, SETTINGS)
    assert method.components.lm.exhausted  # only nq-1 was answered: nq-0's trace was kept
    assert [t.question_id for t in read_traces(out)] == ["nq-0", "nq-1"]


def test_a_crash_while_repairing_a_cut_line_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    with out.open("a") as handle:
        handle.write('{"question_id": "nq-1", "trunc')
    before = out.read_text()

    def crash(src, dst):
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        run_method(_method([]), QUESTIONS[:1], out, SETTINGS)  # the run owning the file repairs it on resume
    assert out.read_text() == before  # not half-rewritten: the repair is a temp file + rename
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nq.jsonl", "nq.settings.json"]  # no debris
    monkeypatch.undo()
    assert [t.question_id for t in read_traces(out)] == ["nq-0"]


def test_a_reader_skips_a_torn_last_line_and_leaves_the_file_to_the_run_that_owns_it(tmp_path):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    with out.open("a") as handle:
        handle.write('{"question_id": "nq-1", "trunc')  # a run in flight, or killed mid-line
    before = out.read_bytes()
    assert [t.question_id for t in read_traces(out)] == ["nq-0"]
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"question_id": "nq-9", "answer": "caf\xe9"}', r"not UTF-8 \(byte 0xe9"),
        (b'{"hello": "world"}', r"not a trace"),
        (b"[1, 2]", r"not a trace"),
    ],
    ids=["latin-1-byte", "another-object", "not-an-object"],
)
def test_a_bad_trace_line_is_one_error_naming_file_and_line(tmp_path, line, problem):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    out.write_bytes(line + b"\n" + out.read_bytes())
    with pytest.raises(DataError, match=rf"^{out}:1: {problem}.*delete that line"):
        read_traces(out)


def test_resuming_under_other_settings_is_refused_naming_them_and_keeps_the_traces(tmp_path):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    before = out.read_text()
    assert _recorded(out) == {**SETTINGS, "provenance": [PROVENANCE]}

    rebuilt = {**SETTINGS, "inputs": {**SETTINGS["inputs"], "questions": "q2"}, "params": {"lm.max_new_tokens": 32}}
    with pytest.raises(DataError, match=r"holds 1 traces run with other settings \(changed: inputs.questions, params.lm.max_new_tokens\)"):
        run_method(_method([" y\nAnswer: Rome"]), QUESTIONS, out, rebuilt)
    assert out.read_text() == before and _recorded(out) == {**SETTINGS, "provenance": [PROVENANCE]}

    settings_file(out).unlink()  # traces from before settings were recorded
    with pytest.raises(DataError, match="no settings were recorded"):
        run_method(_method([" y\nAnswer: Rome"]), QUESTIONS, out, SETTINGS)

    out.unlink()  # the remedy the error names
    assert len(run_method(_method([" y\nAnswer: Rome"]), QUESTIONS[:1], out, rebuilt)) == 1


def test_a_new_commit_does_not_block_resuming_and_is_recorded(tmp_path):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    later = {**SETTINGS, "provenance": {"git_commit": "b" * 40, "git_dirty": True}}
    assert len(run_method(_method([" y\nAnswer: Rome"]), QUESTIONS[:2], out, later)) == 2
    assert _recorded(out)["provenance"] == [PROVENANCE, later["provenance"]]


def test_error_traces_are_retried_on_resume(tmp_path):
    out = tmp_path / "nq.jsonl"
    failing = [" a\nAnswer: Paris", RuntimeError("CUDA out of memory"), " c\nAnswer: Paris", MemoryError("oom")]
    traces = run_method(_method(failing), QUESTIONS, out, SETTINGS)
    assert [t.termination for t in traces] == ["done", "error", "done", "error"]
    assert traces[1].error == "RuntimeError: CUDA out of memory"

    retry = _method([" b\nAnswer: Paris", " d\nAnswer: Rome"])
    traces = run_method(retry, QUESTIONS, out, SETTINGS)
    assert retry.components.lm.exhausted  # only the two error traces were answered again
    assert [t.termination for t in traces] == ["done"] * 4
    stored = read_traces(out)
    assert sorted(t.question_id for t in stored) == [q.id for q in QUESTIONS]  # no duplicates left
    assert all(t.termination == "done" for t in stored)


@pytest.mark.parametrize("bug", [TypeError("bad argument"), KeyError("missing"), AssertionError("script ran out")])
def test_a_programming_error_stops_the_run_and_is_not_written(tmp_path, bug):
    out = tmp_path / "nq.jsonl"
    with pytest.raises(type(bug)):
        run_method(_method([" a\nAnswer: Paris", bug]), QUESTIONS, out, SETTINGS)
    assert [t.question_id for t in read_traces(out)] == ["nq-0"]  # the finished trace is kept


@pytest.fixture
def installed_interrupts():
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    interrupts.install()
    yield
    interrupts.install()  # forgets the signal received
    for signum, handler in previous.items():
        signal.signal(signum, handler)


class SwallowingLM(FakeLM):
    """Answers, except that on `signal_at` a signal arrives and the LM's native code turns the
    interrupt into an error of its own (as torch and pyjnius do)."""

    def __init__(self, replies, signal_at: int) -> None:
        super().__init__(replies=replies)
        self.signal_at, self.count = signal_at, 0

    def generate(self, prompts, *args, **kwargs):
        self.count += 1
        if self.count == self.signal_at:
            try:
                signal.raise_signal(signal.SIGTERM)
            except interrupts.Interrupted:
                raise RuntimeError("std::bad_alloc") from None
        return super().generate(prompts, *args, **kwargs)


def test_an_interrupt_swallowed_by_native_code_never_becomes_an_error_trace(tmp_path, installed_interrupts):
    out = tmp_path / "nq.jsonl"
    method = build_method(
        "no_retrieval", Components(SwallowingLM([" a\nAnswer: Paris"] * 4, signal_at=2), OverlapRetriever(CORPUS))
    )
    with pytest.raises(interrupts.Interrupted) as stopped:
        run_method(method, QUESTIONS, out, SETTINGS)
    assert stopped.value.exit_code == 143
    stored = read_traces(out)
    assert [t.question_id for t in stored] == ["nq-0"] and stored[0].termination == "done"


# Questions answered concurrently (skillrag.eval.batching): same file as one at a time.

TOPICS = ["Cast Away film", "Apollo 11 Moon", "FedEx company", "Forrest Gump film", "Tom Hanks actor", "Robert Zemeckis"]
MANY = [
    Question(f"hotpotqa-{i}", "hotpotqa", f"What about the {TOPICS[i % 6]} case {i}?", ["Cast Away", "1969"], "eval")
    for i in range(12)
]


def _rule_method(name, lm):
    """Three retry rounds: enough for some of skill_rag's questions to exhaust their queries."""
    components = Components(lm, OverlapRetriever(CORPUS), HashProber(), MethodsParams(max_rounds=3), k=2, max_new_tokens=16)
    return build_method(name, components)


def _lines(path):
    return [without_latency(json.loads(line)) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", ["no_retrieval", "single_step", "probing_rag", "skill_rag"])
def test_batched_runs_write_the_traces_of_one_question_at_a_time(tmp_path, name):
    one, many = RuleLM(), RuleLM()
    run_method(_rule_method(name, one), MANY, tmp_path / "one.jsonl", SETTINGS)
    traces = run_method(_rule_method(name, many), MANY, tmp_path / "many.jsonl", SETTINGS, concurrency=4, batch_size=3)
    assert _lines(tmp_path / "many.jsonl") == _lines(tmp_path / "one.jsonl")
    assert [t.question_id for t in traces] == [q.id for q in MANY]
    sizes = [len(prompts) for kind, prompts in many.calls if kind == "generate"]
    assert max(sizes) > 1 and sum(sizes) == sum(len(p) for kind, p in one.calls if kind == "generate")
    if name == "skill_rag":  # the paths the comparison covers: routed retries and accepted answers
        assert {"accepted", "exhausted"} <= {t.termination for t in traces}
        assert any(r.router_scores for t in traces for r in t.rounds)


def test_batched_skill_exploration_writes_the_traces_of_one_question_at_a_time(tmp_path):
    """train_router's method: each question in flight explores on its own fork."""
    def explorer(lm):
        components = Components(lm, OverlapRetriever(CORPUS), None, k=2, max_new_tokens=16, state_layers=(2, 4))
        return SkillExploration(components, lambda answer, golds: answer in golds)

    traces = run_method(explorer(RuleLM()), MANY, tmp_path / "one.jsonl", SETTINGS)
    run_method(explorer(RuleLM()), MANY, tmp_path / "many.jsonl", SETTINGS, concurrency=4, batch_size=4)
    assert _lines(tmp_path / "many.jsonl") == _lines(tmp_path / "one.jsonl")
    assert any(len(t.rounds) > 1 for t in traces)  # skills were explored


def test_batched_runs_record_runtime_failures_as_error_traces(tmp_path):
    lm = RuleLM(fail={"case 5?": RuntimeError("CUDA out of memory")})
    traces = run_method(_rule_method("single_step", lm), MANY, tmp_path / "nq.jsonl", SETTINGS, concurrency=4, batch_size=4)
    assert [t.termination == "error" for t in traces] == [i == 5 for i in range(len(MANY))]
    assert traces[5].error == "RuntimeError: CUDA out of memory"


@pytest.mark.parametrize("bug", [TypeError("a bug"), AssertionError("script ran out")])
def test_a_programming_error_stops_a_batched_run_keeping_the_traces_before_it(tmp_path, bug):
    """The bug reaches every question of the batch it broke (never retried until it passes);
    the first of them stops the run, the finished traces before it are kept."""
    out = tmp_path / "nq.jsonl"
    with pytest.raises(type(bug)):
        run_method(_rule_method("single_step", RuleLM(fail={"case 5?": bug})), MANY, out, SETTINGS, concurrency=4)
    stored = [t.question_id for t in read_traces(out)]
    assert stored == [q.id for q in MANY[: len(stored)]] and 2 <= len(stored) <= 5


def test_a_batched_run_resumes_a_partial_one(tmp_path):
    out, whole = tmp_path / "nq.jsonl", tmp_path / "whole.jsonl"
    run_method(_rule_method("probing_rag", RuleLM()), MANY[:5], out, SETTINGS, concurrency=3)
    with out.open("a") as handle:
        handle.write('{"question_id": "hotpotqa-5", "trunc')  # killed mid-line
    lm = RuleLM()
    run_method(_rule_method("probing_rag", lm), MANY, out, SETTINGS, concurrency=3, batch_size=2)
    run_method(_rule_method("probing_rag", RuleLM()), MANY, whole, SETTINGS)
    assert _lines(out) == _lines(whole)
    asked = {q.id for q in MANY for _, prompts in lm.calls for p in prompts if q.question in p}
    assert asked == {q.id for q in MANY[5:]}  # only the questions not yet traced


def test_an_interrupt_stops_a_batched_run_keeping_only_whole_finished_traces(tmp_path, installed_interrupts):
    out = tmp_path / "nq.jsonl"
    method = build_method(
        "no_retrieval", Components(SwallowingLM([" a\nAnswer: Paris"] * 4, signal_at=2), OverlapRetriever(CORPUS))
    )
    with pytest.raises(interrupts.Interrupted) as stopped:
        run_method(method, QUESTIONS, out, SETTINGS, concurrency=2, batch_size=2)
    assert stopped.value.exit_code == 143
    stored = read_traces(out)
    assert [t.question_id for t in stored] == [q.id for q in QUESTIONS[: len(stored)]] and len(stored) < 4
    assert all(t.termination == "done" for t in stored)


class _LayerProber(HashProber):
    layers: ClassVar[list[int]] = [2, 3]  # the tiny model has 3 layers

    def score(self, hidden) -> float:
        return float(torch.sigmoid(hidden[2].sum() - hidden[3].sum()))


def test_batched_runs_of_a_real_float32_model_write_the_traces_of_one_question_at_a_time(tmp_path):
    """The tiny random llama (tests/lm/conftest.py) behind the methods: greedy rows do not
    depend on their batch neighbours, so batched and one-at-a-time runs write the same traces,
    up to float32 rounding in the pooled hidden states (prober scores differ by ~1e-7)."""
    from skillrag.lm.hf import HFCausalLM
    from tests.lm.conftest import byte_tokenizer, tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tokenizer = byte_tokenizer()
    lm = HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama")
    components = Components(lm, OverlapRetriever(CORPUS), _LayerProber(), k=2, max_new_tokens=6)
    try:
        run_method(build_method("probing_rag", components), MANY[:6], tmp_path / "one.jsonl", SETTINGS)
        run_method(build_method("probing_rag", components), MANY[:6], tmp_path / "many.jsonl", SETTINGS, concurrency=3, batch_size=3)
    finally:
        torch.set_num_threads(threads)
    one, many = _lines(tmp_path / "one.jsonl"), _lines(tmp_path / "many.jsonl")
    assert _same_up_to_rounding(many, one)
    assert all(len(t["rounds"]) == 3 for t in one)  # closed-book, retrieval and a re-retrieval round each


def _same_up_to_rounding(a, b) -> bool:
    """Equal, floats within 1e-5."""
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, abs=1e-5)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_up_to_rounding(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_up_to_rounding(x, y) for x, y in zip(a, b))
    return a == b
