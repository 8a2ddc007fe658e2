def test_the_timing_table_lists_each_stage_and_their_total():
    from skillrag.report.tables import timing_table

    timings = {
        "extract": {"stage": "extract", "wall_s": 2700.0, "legs": 2, "device": "cpu (2 cores, 2 torch threads)", "finished": "t1"},
        "evaluate-skill_rag": {"stage": "evaluate-skill_rag", "wall_s": 900.0, "legs": 1, "device": "cpu", "finished": "t2"},
    }
    table = timing_table(timings)
    assert "| extract | 45.0 | 2 |" in table and "| evaluate-skill_rag | 15.0 | 1 |" in table
    assert "**60.0** (1.00 h)" in table
    assert timing_table({}) is None


def test_the_skill_table_counts_the_routers_decisions_only():
    """A FLARE round (or DRAGIN's, IRCoT's) and Adaptive-RAG's strategy choice are no skill
    routing: those methods get no row, and a skill_rag trace counts its skill and its exit."""
    from dataclasses import asdict

    from skillrag.methods.trace import Round, Trace
    from skillrag.report.inputs import Inputs
    from skillrag.report.tables import skill_table
    from tests.report.conftest import skill_trace

    flare = Trace("nq-0", "nq", "Who?", ["gold 0"], "flare", [Round(0, "flare", "gold 0"), Round(1, "answer", "gold 0")])
    complexity = Round(0, "complexity", "", router_scores={"no_retrieval": 0.2, "single_step": 0.7, "ircot": 0.1})
    adaptive = Trace("nq-0", "nq", "Who?", ["gold 0"], "adaptive_rag", [complexity, Round(1, "retrieval", "gold 0")])
    traces = {"flare": {"nq": [asdict(flare)]}, "adaptive_rag": {"nq": [asdict(adaptive)]},
              "skill_rag": {"nq": [asdict(skill_trace(1, "nq", "evidence_focusing", True, None)),
                                   asdict(skill_trace(2, "nq", "exit", False, None))]}}
    inputs = Inputs({m: {"nq": {}} for m in traces}, traces, {}, {}, {}, {}, {}, {}, {})
    rows = skill_table(inputs).splitlines()[2:]
    assert rows == ["| skill_rag | evidence_focusing | 1 | 50% | 1 (100%) |", "| skill_rag | exit | 1 | 50% | – |"]


def test_a_method_that_got_nothing_right_shows_a_wilson_interval_not_a_collapsed_one(tmp_path):
    """metrics_detail.json's percentile bootstrap gives "0.0 (0.0–0.0)" at 0 right of 30; the
    table computes the Wilson interval from the traces: 0.0 (0.0–11.4)."""
    from skillrag.paths import Paths
    from skillrag.report.inputs import load_inputs
    from skillrag.report.tables import score_table
    from tests.report.conftest import simple_trace, write_runs

    paths = Paths(tmp_path)
    write_runs(paths, [simple_trace(i, "musique", "no_retrieval", right=False) for i in range(30)]
               + [simple_trace(i, "nq", "no_retrieval", right=True) for i in range(30)])
    rows = score_table(load_inputs(paths), "acc", ["nq", "musique"], ["nq"]).splitlines()
    assert rows[0] == "| method | nq | musique | in-domain | OOD | overall |"
    assert rows[2] == ("| no_retrieval | 100.0 (88.6–100.0) | 0.0 (0.0–11.4) | 100.0 (88.6–100.0) | 0.0 (0.0–11.4) "
                       "| 50.0 (37.7–62.3) |")
