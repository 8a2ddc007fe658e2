"""evaluate-<method> stages: each method on its own (as DVC runs them, a fresh model each), the gated
methods served from the generations the no_retrieval and single_step stages stored."""

from __future__ import annotations

import json

from safetensors import safe_open

from skillrag.config import load_params
from skillrag.files import write_json
from skillrag.paths import Paths
from skillrag.pipeline import runtime, stages
from skillrag.pipeline.stages.evaluate import GENERATIONS
from tests.conftest import write_rows
from tests.fake_cli import make_workspace
from tests.fakes import CORPUS, HashProber, OverlapRetriever, RuleLM, without_latency

TOPICS = ["Cast Away film", "Apollo 11 Moon", "FedEx company", "Forrest Gump film"]


def _workspace(tmp_path, monkeypatch):
    workspace = make_workspace(tmp_path / "ws")
    rows = [{"id": f"nq-eval-{i}", "dataset": "nq", "question": f"What about the {t} case {i}?", "answers": ["1969"], "split": "eval"}
            for i, t in enumerate(TOPICS)]
    write_rows(workspace / "data" / "questions" / "eval" / "nq.jsonl", rows)
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_prober", lambda params, paths, lm, method=None: HashProber())
    return Paths(workspace)


def _stage(paths, monkeypatch, method, *overrides):
    """One evaluate-<method> stage in a process of its own: a fresh model; returns its calls."""
    lm = RuleLM()
    monkeypatch.setattr(runtime, "open_lm", lambda params: lm)
    params = load_params(paths.root / "params.yaml", overrides=["lm.layers=all", *overrides])
    stages.evaluate.evaluate_method(params, paths, method)
    return sum(len(prompts) for kind, prompts in lm.calls if kind == "generate")


def test_gated_stages_start_from_the_stored_generations_and_trace_as_if_they_computed_them(tmp_path, monkeypatch):
    paths = _workspace(tmp_path, monkeypatch)
    write_json(paths.probe / "probe.json", {"layers": HashProber.layers})  # the trained prober's record
    methods = ["no_retrieval", "single_step", "probing_rag", "skill_rag"]
    for method in methods[:2]:
        _stage(paths, monkeypatch, method)
    assert sorted(p.name for p in (paths.runs / "no_retrieval" / GENERATIONS).iterdir()) == ["nq.0.0.safetensors"]
    with safe_open(str(paths.runs / "no_retrieval" / GENERATIONS / "nq.0.0.safetensors"), "pt") as chunk:
        rows, names = json.loads(chunk.metadata()["rows"]), list(chunk.keys())
    assert {tuple(row["layers"]) for row in rows} == {(2, 4)}  # every layer captured, the prober's kept
    assert {name.rsplit("/", 1)[1] for name in names} == {"2", "4"}
    seeded = {m: _stage(paths, monkeypatch, m) for m in methods[2:]}
    traces = {m: [without_latency(json.loads(line)) for line in paths.run_file(m, "nq").read_text().splitlines()] for m in methods[2:]}
    params = load_params(paths.root / "params.yaml", overrides=[f"evaluate.methods={methods}", "lm.layers=all"])
    metrics = stages.summarize.summarize(params, paths)

    for method in methods[2:]:  # the same stages without reuse
        paths.run_file(method, "nq").unlink()
    alone = {m: _stage(paths, monkeypatch, m, "lm.reuse_cache=0") for m in methods[2:]}
    for method in methods[2:]:
        assert [without_latency(json.loads(line)) for line in paths.run_file(method, "nq").read_text().splitlines()] == traces[method]
        reused = metrics[method]["nq"]["reuse"]["hits"]
        assert reused >= len(TOPICS) and alone[method] - seeded[method] == reused  # no stored generation made again
    assert metrics["skill_rag"]["nq"]["run_costs"]["llm_calls"] == 1  # the router's calibration
    assert metrics["probing_rag"]["nq"]["run_costs"]["llm_calls"] == 0
