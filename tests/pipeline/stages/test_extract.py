"""Stage `extract` with a rule-based fake LM and a term-overlap retriever: labels, batching
order, resumption after an interruption, empty generations, and the states gate; and with the
tiny real model, that extract stores exactly the states the gated methods score."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from skillrag.data.schema import Passage, Question
from skillrag.errors import ArtifactError
from skillrag.lm.base import POOLINGS, Generation, resolve_layers
from skillrag.pipeline.stages.extract import extract_states
from skillrag.probe.state_store import layer_file, load_features, read_meta, read_rows
from skillrag.quality import GateFailed
from skillrag.quality.states_gate import gate_states
from tests.fakes import OverlapRetriever, fake_pooled

LAYERS = [2, 3]


class RuleLM:
    """Answers correctly when the prompt holds passages, wrongly closed-book; question 'q-empty'
    gets an empty generation. Can be told to fail after `fail_after` generate calls."""

    name, num_layers, hidden_size = "rule-lm", 3, 6

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls, self.fail_after, self.prompts = 0, fail_after, []

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt
        self.calls += 1
        out = []
        for prompt in prompts:
            assert prompt.startswith(prefix)
            self.prompts.append(prompt)
            body = prompt[len(prefix):]
            question = body.rsplit("Question: ", 1)[1].removesuffix("\nRationale:")
            if "empty" in question:
                text = ""
            else:
                text = " Looked it up.\nAnswer: " + ("Paris" if body.startswith("Passages:") else "Rome")
            pieces = text.split(" ")
            n = len(pieces)
            pooled = fake_pooled(question + text, capture, self.hidden_size)
            out.append(Generation(text, list(range(n)), [-0.1] * n, [0.3] * n, 10, None, "stop", pieces=pieces, pooled=pooled))
        return out


def _questions() -> list[Question]:
    qs = [Question(f"q-{i}", "nq", f"What is the capital number {i} of France?", ["Paris"], "train") for i in range(5)]
    qs += [Question("q-dev", "nq", "Which city is the capital of France?", ["Paris"], "dev")]
    qs += [Question("q-empty", "nq", "empty question about France?", ["Paris"], "dev")]
    return qs


RETRIEVER = OverlapRetriever([Passage("p1", "France", "Paris is the capital of France."), Passage("p2", "Rome", "Rome is in Italy.")])


INPUTS = {"model": "rule-lm", "retrieval": {"backend": "bm25s", "k1": 0.9, "b": 0.4, "index": "digest-1"}}


def _extract(lm, out, questions=None, inputs=INPUTS):
    return extract_states(
        lm, RETRIEVER, questions or _questions(), out,
        inputs=inputs, strategies=["no_retrieval", "single_step"], layers=LAYERS, k=2, max_new_tokens=8,
        batch_size=3, checkpoint_rows=4, checkpoint_seconds=3600,
    )


def test_rows_labels_and_states(tmp_path):
    out = tmp_path / "states"
    summary = _extract(RuleLM(), out)
    rows = read_rows(out)
    assert summary["rows"] == len(rows) == 14
    assert set(rows.loc[rows.strategy == "single_step", "id"]) == {q.id for q in _questions()}
    correct = rows.set_index(["id", "strategy"])["acc"]
    assert correct[("q-1", "single_step")] == 1 and correct[("q-1", "no_retrieval")] == 0
    assert correct[("q-empty", "single_step")] == 0  # empty generation: incorrect, no crash
    row = rows.iloc[5]
    question = next(q.question for q in _questions() if q.id == row["id"])
    expected = fake_pooled(question + row["text"], LAYERS, 6)
    for pooling in POOLINGS:
        features = load_features(out, rows, pooling)
        assert set(features) == set(LAYERS) and features[2].shape == (14, 6)
        assert torch.equal(features[3][5], expected[pooling][3])  # tensors stay aligned with their rows
    assert list(row["pieces"]) == row["text"].split(" ") and len(row["logprobs"]) == len(row["entropies"]) == len(row["pieces"])
    assert read_meta(out)["hidden_size"] == 6
    assert gate_states(out, tmp_path / "states.json")["success"]


def test_interrupted_run_resumes_without_redoing_work(tmp_path):
    out = tmp_path / "states"
    with pytest.raises(KeyboardInterrupt):
        _extract(RuleLM(fail_after=3), out)  # batches 1-2 (6 rows, one checkpoint) and part of 3 ran
    assert not out.exists() and len(read_rows(tmp_path / "states.partial")) == 6
    resumed = RuleLM()
    _extract(resumed, out)
    assert len(resumed.prompts) == 14 - 6
    full = tmp_path / "full"
    _extract(RuleLM(), full)
    pd.testing.assert_frame_equal(read_rows(out), read_rows(full))


def test_changed_inputs_discard_the_partial_run(tmp_path):
    out = tmp_path / "states"
    with pytest.raises(KeyboardInterrupt):
        _extract(RuleLM(fail_after=3), out)
    fresh = RuleLM()
    _extract(fresh, out, _questions()[:-1])
    assert len(fresh.prompts) == 12


@pytest.mark.parametrize(
    "change", [{"backend": "lucene"}, {"k1": 1.2}, {"b": 0.75}, {"index": "digest-2"}], ids=lambda c: next(iter(c))
)
def test_another_retrieval_setup_discards_the_partial_run(tmp_path, change):
    out = tmp_path / "states"
    with pytest.raises(KeyboardInterrupt):
        _extract(RuleLM(fail_after=3), out)
    fresh = RuleLM()
    _extract(fresh, out, inputs={**INPUTS, "retrieval": {**INPUTS["retrieval"], **change}})
    assert len(fresh.prompts) == 14  # nothing was resumed from rows retrieved another way


def test_gate_rejects_non_finite_states(tmp_path):
    out = tmp_path / "states"
    _extract(RuleLM(), out)
    from safetensors.torch import load_file, save_file

    shard = layer_file(out, "shard-00000", 2)
    tensors = load_file(str(shard))
    tensors["answer_last"][0, 0] = float("nan")
    save_file(tensors, str(shard))
    with pytest.raises(GateFailed, match="finite"):
        gate_states(out, tmp_path / "states.json")


def test_gate_rejects_train_rows_with_one_label(tmp_path):
    out = tmp_path / "states"
    extract_states(
        RuleLM(), RETRIEVER, _questions(), out,
        inputs={"model": "rule-lm"}, strategies=["single_step"], layers=LAYERS, k=2, max_new_tokens=8, batch_size=3,
        checkpoint_rows=4, checkpoint_seconds=3600,
    )  # with passages every train answer is right
    with pytest.raises(GateFailed, match="expect_column_distinct_values_to_contain_set"):
        gate_states(out, tmp_path / "states.json")


def test_resolve_layers():
    assert resolve_layers("posterior_two_thirds", 30) == list(range(11, 31))
    assert resolve_layers([3, 1, 3], 4) == [1, 3]
    with pytest.raises(ValueError, match="layers 1..4"):
        resolve_layers([0, 5], 4)


def test_extract_stores_exactly_the_states_the_gated_methods_score(tmp_path):
    """Train/serve skew: for the same questions and passages, the states extract stores (batched,
    several prompts per call) equal those probing_rag's prober scores (one question at a time),
    in every pooling, on the tiny real model in float32, forced to write an answer line so the
    answer span is a real one."""
    from skillrag.lm.hf import HFCausalLM
    from skillrag.methods import Components
    from skillrag.methods.probing_rag import ProbingRAG
    from tests.fakes import FakeProber
    from tests.lm.conftest import byte_tokenizer, forced, tiny_model

    tokenizer = byte_tokenizer()
    lm = HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama")
    questions = _questions()[:2] + _questions()[-2:-1]
    layers, out = [2, 3], tmp_path / "states"
    with forced(lm, " So it is.\nAnswer: Paris\n"):
        extract_states(
            lm, RETRIEVER, questions, out, inputs={"model": "tiny"}, strategies=["no_retrieval", "single_step"],
            layers=layers, k=2, max_new_tokens=30, batch_size=4, checkpoint_rows=100, checkpoint_seconds=3600,
        )
        rows = read_rows(out).set_index(["id", "strategy"])
        assert set(rows["answer"]) == {"Paris"}
        for pooling in POOLINGS:
            # rejects every closed-book answer, accepts every answer over passages: both stages run
            prober = FakeProber([0.5] * 2 * len(questions), layers, pooling, cuts={"before_retrieval": 0.9, "after_evidence": 0.1})
            method = ProbingRAG(Components(lm, RETRIEVER, prober, k=2, max_new_tokens=30))
            for question in questions:
                assert [r.stage for r in method.answer(question).rounds] == ["no_retrieval", "retrieval"]
            features = load_features(out, rows.reset_index(), pooling)
            scored = iter(prober.scored)
            for question in questions:
                for strategy in ("no_retrieval", "single_step"):
                    states = next(scored)
                    row = rows.index.get_loc((question.id, strategy))
                    for layer in layers:
                        torch.testing.assert_close(states[layer], features[layer][row], atol=1e-5, rtol=1e-5)


def test_rows_and_vectors_are_written_apart_and_vectors_lost_with_a_machine_are_rebuilt(tmp_path):
    """rows/ (git-tracked) holds no tensor and vectors/ (DVC cache) no row; with the rows alone (a
    new machine) extract answers again, restores the vectors, and writes the same rows."""
    import shutil

    out = tmp_path / "states"
    _extract(RuleLM(), out)
    assert {p.suffix for p in (out / "rows").iterdir()} == {".parquet", ".json"}
    assert {p.suffix for p in (out / "vectors").iterdir()} == {".safetensors"}
    rows = {p.name: p.read_bytes() for p in (out / "rows").iterdir()}
    unchanged = RuleLM()
    _extract(unchanged, out)
    assert unchanged.prompts == []  # done, and whole: nothing to redo
    shutil.rmtree(out / "vectors")
    (out / ".gitignore").write_text("/vectors\n")  # what DVC writes beside a cached output
    with pytest.raises(ArtifactError, match=r"vectors.*missing.*skillrag extract"):
        load_features(out, read_rows(out))
    again = RuleLM()
    _extract(again, out)
    assert len(again.prompts) == 14
    assert {p.name: p.read_bytes() for p in (out / "rows").iterdir()} == rows
    assert load_features(out, read_rows(out))[2].shape == (14, 6)
    assert (out / ".gitignore").read_text() == "/vectors\n"
