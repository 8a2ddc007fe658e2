"""The side-experiment list: one line per folder under experiments/ or data/custom/, its question
and result from the README, its numbers from its committed metrics."""

from __future__ import annotations

from pathlib import Path

from skillrag.files import write_json
from skillrag.report.experiments import experiments_section, find_experiments


def _readme(folder: Path, text: str) -> None:
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(text)


def test_each_experiment_gets_its_question_result_and_numbers_from_committed_files(tmp_path):
    _readme(tmp_path / "experiments" / "hybrid", "# Hybrid retrieval\n\n**Question:** Does RRF of BM25 and dense help?\n\n"
            "**Result:** It does not, at this n.\n\nRun it with `skillrag ...`.\n")
    write_json(tmp_path / "reports" / "custom" / "hybrid" / "metrics.json",
               {"skill_rag": {"nq": {"acc": 0.5, "n": 10}, "musique": {"acc": 0.0, "n": 10}},
                "single_step": {"nq": {"acc": 0.3, "n": 10}, "musique": {"acc": 0.1, "n": 10}}})
    _readme(tmp_path / "data" / "custom" / "router-100", "# router-100: more states\n\nA side experiment: does a "
            "router learn from 100 questions?\n\nResult: no router beat always-exit.\n")
    write_json(tmp_path / "data" / "custom" / "router-100" / "reports" / "router_metrics.json",
               {"router_as_run": {"states": 74, "accuracy": 0.22, "fixed": 13, "fixable": 17,
                                  "majority": {"label": "exit", "accuracy": 0.77}}})
    (tmp_path / "data" / "custom" / "dev-policy" / "runs").mkdir(parents=True)
    # the same name in both places: the experiments/ one (where experiments now live) wins
    _readme(tmp_path / "data" / "custom" / "hybrid", "# old place\n")

    found = {e.name: e for e in find_experiments(tmp_path)}
    assert sorted(found) == ["dev-policy", "hybrid", "router-100"]
    assert found["hybrid"].folder == tmp_path / "experiments" / "hybrid"
    text = experiments_section(tmp_path, tmp_path / "reports")
    lines = {line.split("]")[0].lstrip("- *["): line for line in text.splitlines() if line.startswith("- ")}
    assert lines["hybrid"] == ("- **[hybrid](../experiments/hybrid/README.md)** — Hybrid retrieval. Asked: Does RRF of "
                               "BM25 and dense help? Found: It does not, at this n. ACC % over 20 questions: "
                               "single_step 20.0, skill_rag 25.0.")
    assert "Asked: A side experiment: does a router learn from 100 questions?" in lines["router-100"]
    assert "no router beat always-exit. router as configured: accuracy 0.22 on 74 failure states" in lines["router-100"]
    assert "(its folder has no README stating the question) Found: no committed result." in lines["dev-policy"]


def test_no_experiment_folder_says_so(tmp_path):
    assert "No side experiment" in experiments_section(tmp_path, tmp_path)
