"""Sharded extract and evaluate equal the single-process run, and resume like it; the real
Dask run goes through prefect-dask's DaskTaskRunner on a 2-worker LocalCluster."""

from __future__ import annotations

import json

import pytest
import torch

from skillrag.config import load_params
from skillrag.eval.runner import part_file
from skillrag.paths import Paths
from skillrag.pipeline import runtime, stages
from skillrag.probe.state_store import load_features, read_rows
from tests.conftest import write_rows
from tests.fake_cli import PausingLM, make_workspace
from tests.fakes import CORPUS, OverlapRetriever, without_latency

METHODS = ["no_retrieval", "single_step"]


def _workspace(root, questions=7):
    workspace = make_workspace(root)
    rows = [
        {"id": f"nq-eval-{i}", "dataset": "nq", "question": f"Where is landmark {i} of the eval set?", "answers": ["Paris"], "split": "eval"}
        for i in range(questions)
    ]
    write_rows(workspace / "data" / "questions" / "eval" / "nq.jsonl", rows)
    return Paths(workspace), load_params(workspace / "params.yaml")


@pytest.fixture
def fakes(monkeypatch):
    """The fake LM and retriever in this process."""
    monkeypatch.setattr(runtime, "open_lm", lambda params: PausingLM())
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))


def _runs(paths):
    return {
        name: [without_latency(json.loads(line)) for line in paths.run_file(name, "nq").read_text().splitlines()]
        for name in METHODS
    }


def _headline(paths):
    return without_latency(json.loads(paths.metrics.read_text()))


def test_sharded_evaluate_equals_the_single_process_run(tmp_path, fakes):
    single, params = _workspace(tmp_path / "single")
    stages.evaluate.evaluate(params, single)
    stages.summarize.summarize(params, single)
    sharded, params = _workspace(tmp_path / "sharded")
    seen = []

    def record(fn, calls):  # in process, but each shard writes only its own part files
        seen.extend(calls)
        results = [fn(*args) for args in calls]
        assert sorted(p.name for p in sharded.runs.glob("*/*.part-*.jsonl")) == sorted(
            f"nq.part-{k}.jsonl" for k in range(3) for _ in METHODS
        )
        return results

    stages.evaluate.evaluate(params, sharded, shards=3, map_shards=record)
    metrics = stages.summarize.summarize(params, sharded)
    # the two methods of one wave in one map: on Dask, on separate workers at once
    assert [(args[2], *args[4:]) for args in seen] == [(m, k, 3) for m in METHODS for k in range(3)]
    assert _runs(sharded) == _runs(single)
    assert _headline(sharded) == _headline(single)
    assert metrics["single_step"]["nq"]["n"] == 7
    assert not list(sharded.runs.glob("*/*.part-*"))  # merged, then removed


def test_an_interrupted_sharded_evaluate_resumes(tmp_path, fakes):
    single, params = _workspace(tmp_path / "single")
    stages.evaluate.evaluate(params, single)
    paths, params = _workspace(tmp_path / "sharded")

    def die_in_second_shard(fn, calls):
        fn(*calls[0])
        raise KeyboardInterrupt  # the worker of shard 1 is lost before it writes anything

    with pytest.raises(KeyboardInterrupt):
        stages.evaluate.evaluate(params, paths, shards=2, map_shards=die_in_second_shard)
    first = part_file(paths.run_file("no_retrieval", "nq"), 0)
    assert len(first.read_text().splitlines()) == 3  # shard 0's three questions are kept
    answered = []

    def count(fn, calls):
        results = [fn(*args) for args in calls]
        answered.extend(
            line for args in calls
            for line in (part_file(paths.run_file(args[2], "nq"), args[4]).read_text().splitlines()
                         if part_file(paths.run_file(args[2], "nq"), args[4]).exists() else [])
        )
        return results

    stages.evaluate.evaluate(params, paths, shards=3, map_shards=count)  # another shard count resumes too
    assert len(answered) == 4 + 7  # only no_retrieval's four unanswered questions, all of single_step's
    assert _runs(paths) == _runs(single)


def test_sharded_extract_equals_the_single_process_run_and_resumes(tmp_path, fakes, monkeypatch):
    single, params = _workspace(tmp_path / "single")
    stages.extract.extract(params, single)
    sharded, params = _workspace(tmp_path / "sharded")

    def die_after_first(fn, calls):
        fn(*calls[0])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stages.extract.extract(params, sharded, shards=2, map_shards=die_after_first)
    assert (sharded.states.with_name("states.parts") / "part-0-of-2" / "rows" / "meta.json").exists()
    lms = []
    monkeypatch.setattr(runtime, "open_lm", lambda params: lms.append(PausingLM()) or lms[-1])
    summary = stages.extract.extract(params, sharded, shards=2)
    assert sum(lm.calls for lm in lms) > 0 and lms[0].calls == 0  # the finished shard is not redone
    assert summary["rows"] == len(read_rows(single.states))
    columns = ["id", "strategy", "text", "answer", "acc", "em"]
    expected, got = read_rows(single.states), read_rows(sharded.states)
    assert got[columns].equals(expected[columns])
    for layer, tensor in load_features(single.states, expected).items():
        assert load_features(sharded.states, got)[layer].equal(tensor)
    lms.clear()
    stages.extract.extract(params, sharded)  # the single-process run finds the merged output up to date
    assert lms[0].calls == 0
    assert not sharded.states.with_name("states.parts").exists()


def test_sharded_extract_with_a_real_tiny_model_gives_the_same_rows(tmp_path, fakes, monkeypatch):
    """Shards change which questions share a batch (rows are left-padded to the longest); in
    float32 the texts are the same and the pooled states equal up to rounding."""
    from skillrag.lm.hf import HFCausalLM
    from tests.lm.conftest import byte_tokenizer, tiny_model

    tokenizer = byte_tokenizer()
    lm = HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama")
    monkeypatch.setattr(runtime, "open_lm", lambda params: lm)
    single, params = _workspace(tmp_path / "single")
    stages.extract.extract(params, single)
    sharded, params = _workspace(tmp_path / "sharded")
    stages.extract.extract(params, sharded, shards=3)
    expected, got = read_rows(single.states), read_rows(sharded.states)
    columns = ["id", "strategy", "text", "answer", "acc", "new_tokens"]
    assert got[columns].equals(expected[columns])
    for layer, tensor in load_features(single.states, expected).items():
        assert torch.allclose(load_features(sharded.states, got)[layer], tensor, atol=1e-5)
