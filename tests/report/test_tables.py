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


def test_the_probe_table_says_what_each_decision_points_acceptances_save_in_calls():
    from skillrag.report.tables import probe_table

    before = {"cut": 0.6, "acc": 0.3, "reject_rate": 0.75, "acc_reject_all": 0.28, "acc_accept_all": 0.2, "n": 100, "is_null": False}
    after = {"cut": 0.9, "acc": 0.4, "reject_rate": 0.5, "acc_reject_all": 0.3, "acc_accept_all": 0.4, "n": 100, "is_null": False}
    probe = {"ensemble": {"auroc": 0.7}, "cuts": {"before_retrieval": before, "after_evidence": {"skill_rag": after},
                                                  "retries": {"skill_rag": {"llm_calls": 1.8}}}}
    table = probe_table(probe)
    assert "accepts 25%: 0.25 calls / question fewer than always retrieve" in table
    assert "accepts 50%: 0.90 calls / question fewer than always retry" in table


def test_the_learning_curve_table_shows_each_pool_with_its_answers_recipe_and_paired_difference():
    import numpy as np
    import pandas as pd

    from skillrag.probe.curve import learning_curve
    from skillrag.report.tables import learning_curve_table

    ids = [f"{d}-{i}" for d in ("hotpotqa", "nq", "triviaqa") for i in range(40)]
    train = pd.DataFrame({"id": ids * 2, "dataset": [i.split("-")[0] for i in ids] * 2, "acc": [i % 3 == 0 for i in range(240)],
                          "strategy": ["no_retrieval"] * 120 + ["single_step"] * 120})
    labels = np.random.default_rng(0).uniform(size=80) < 0.3
    dev = pd.DataFrame({"id": [f"d{i}" for i in range(40)] * 2, "acc": labels.astype(int),
                        "strategy": ["no_retrieval"] * 40 + ["single_step"] * 40})
    recipe = {"name": "cv", "pooling": "answer_last", "network": "logistic C=0.1", "layers": [3, 4]}

    def select(rows):
        if rows["id"].nunique() < 30:
            raise ValueError("grouped cross-validation needs at least 2 train questions with a correct answer")
        return recipe, 0.7, labels.astype(float)

    noise = np.linspace(0, 1, 80)
    baselines = {"entropy": noise, "min_token_prob": noise, "answer_logprob": noise}
    table = learning_curve_table({"learning_curve": learning_curve(select, (recipe, 0.7, labels.astype(float)), train, dev, baselines, 100, 0)})
    first = next(line for line in table.splitlines() if line.startswith("| 15 | 30 ("))
    assert "| _grouped cross-validation needs" in first  # the pool too small to train says why
    assert "| 120 | 240 (80) | answer_last, logistic C=0.1, 2 layer(s) | 1.000 [1.000, 1.000] | +" in table
    assert f"dev AUROC, closed book (n 40, {int(labels[:40].sum())} right)" in table
    assert "| min token prob |" in table and "Pools and intervals: nested, balanced pools" in table
    assert learning_curve_table({}) is None

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


def test_the_gate_table_says_what_accepting_saved_in_calls_against_the_never_accepted_questions(workspace, monkeypatch):
    """The workspace's skill_rag: one closed-book answer accepted (wrong, 1 call), three fixed by a
    skill and accepted there (4 calls each), ten never accepted (nine ran a skill: 4 calls, one
    exited: 3, its exit round unjudged), so 52 calls over 14 questions against 39 over the 10 never
    accepted; below MIN_UNACCEPTED never-accepted questions no estimate is made."""
    from skillrag.report.inputs import load_inputs
    from skillrag.report.tables import gate_table

    def skill_rag_row() -> str:
        return next(line for line in gate_table(load_inputs(workspace)).splitlines() if line.startswith("| skill_rag |"))

    accepted = "| 7% of 14 | 0% of 13 | 25% of 12 | 0% of 1 | accepted 4, exit 1, max_rounds 9 |"
    assert skill_rag_row().endswith(f"{accepted} – | – |")
    monkeypatch.setattr("skillrag.report.tables.MIN_UNACCEPTED", 10)
    assert skill_rag_row().endswith(f"{accepted} 3.71 vs 3.90 (n 10) | 0.19 (5%) |")
