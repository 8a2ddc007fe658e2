"""Stage `analyze`: failure states read from skill_rag traces, separability against chance, and
graceful output with too few states."""

from __future__ import annotations

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.pipeline.stages.analyze import analyze
from skillrag.vectors import decode_vector
from tests.report.conftest import read_json, separable_states, skill_trace, write_runs

PARAMS = Params(evaluate={"datasets": ["hotpotqa", "musique"]})


def test_separable_skills_are_read_from_the_failure_state_above_chance(workspace):
    result = analyze(PARAMS, workspace)
    assert result["failure_states"] == 13  # 12 query-skill failures + one exit; the accepted closed-book one is none
    assert result["by_skill"]["exit"] == 1 and result["by_skill"]["query_rewriting"] == 4
    assert result["fixed_by_skill"]["exit"] == 0 and result["fixed_by_skill"]["query_rewriting"] == 1
    sep = result["separability"]
    assert sep["folds"] == 4  # the rarest kept skill has 4 states; exit's single one is left out, and said so
    assert any("left out" in n and "exit" in n for n in result["notes"])
    assert sep["probe_accuracy"] > sep["majority_accuracy"] > 0
    assert set(result["projections"]) == {"pca", "tsne"}
    assert read_json(workspace.analysis) == result
    for name in ("failure_space.png", "failure_separability.png"):
        assert (workspace.figures / name).read_bytes().startswith(b"\x89PNG")


def test_separability_beats_the_majority_and_chance_on_separable_vectors(tmp_path):
    paths = Paths(tmp_path)
    skills = ["query_rewriting", "question_decomposition", "evidence_focusing", "exit"] * 6
    states = separable_states(skills, seed=3)
    write_runs(paths, [skill_trace(i, "hotpotqa", s, fixed=False, state=v) for i, (s, v) in enumerate(zip(skills, states))])
    sep = analyze(PARAMS, paths)["separability"]
    assert sep["folds"] == 5 and sep["chance_accuracy"] == 0.25 and sep["majority_accuracy"] == 0.25
    assert sep["probe_accuracy"] > 0.9 and sep["silhouette"] > 0.5


def test_few_failure_states_give_counts_and_notes_not_a_crash(tmp_path):
    paths = Paths(tmp_path)
    traces = [skill_trace(0, "hotpotqa", "query_rewriting", fixed=True, state=[0.1, 0.2]),
              skill_trace(1, "musique", "exit", fixed=False, state=None)]
    write_runs(paths, traces)
    result = analyze(PARAMS, paths)
    assert result["failure_states"] == 2 and result["with_state"] == 1 and result["projections"] == []
    assert result["separability"]["probe_accuracy"] is None
    assert any("no hidden vector" in n for n in result["notes"]) and any("tsne skipped" in n for n in result["notes"])
    assert (paths.figures / "failure_space.png").stat().st_size > 0


def test_no_skill_rag_traces_at_all(tmp_path):
    result = analyze(PARAMS, Paths(tmp_path))
    assert result["failure_states"] == 0 and result["datasets"] == [] and result["fixed_rate"] is None


def test_evaluate_keeps_skill_rags_failure_states_for_the_analysis(tmp_path, monkeypatch):
    """The real evaluate stage (rule-based LM, hashed prober): skill_rag's answer rounds carry
    their hidden vector (the prober's layers, no extra LM call), other methods' do not, and
    analyze finds every failure state with its vector."""
    import json

    from skillrag.config import load_params
    from skillrag.pipeline import runtime, stages
    from tests.conftest import write_rows
    from tests.fake_cli import make_workspace
    from tests.fakes import CORPUS, HashProber, OverlapRetriever, RuleLM, use_prober

    workspace = make_workspace(tmp_path / "ws")
    topics = ["Cast Away film", "Apollo 11 Moon", "FedEx company", "Forrest Gump film", "Tom Hanks actor", "Robert Zemeckis"]
    rows = [{"id": f"nq-eval-{i}", "dataset": "nq", "question": f"What about the {t} case {i}?", "answers": ["1969"],
             "split": "eval"} for i, t in enumerate(topics)]
    write_rows(workspace / "data" / "questions" / "eval" / "nq.jsonl", rows)
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: RuleLM())
    params = load_params(workspace / "params.yaml", overrides=["evaluate.methods=[probing_rag, skill_rag]"])
    paths = Paths(workspace)
    use_prober(monkeypatch, paths, HashProber())
    stages.evaluate.evaluate(params, paths)

    def rounds(method: str) -> list[dict]:
        return [r for line in paths.run_file(method, "nq").read_text().splitlines() for r in json.loads(line)["rounds"]]

    answered = [r for r in rounds("skill_rag") if r["score"] is not None]  # not exits or exhausted decisions
    assert answered and all(len(decode_vector(r["state"])) == RuleLM.hidden_size for r in answered)
    assert all(r["state"] is None for r in rounds("probing_rag"))
    result = analyze(params, paths)
    assert result["failure_states"] > 0 and result["with_state"] == result["failure_states"]
