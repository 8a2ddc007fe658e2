import json

import pytest

from skillrag.report.readme import BEGIN, END, results_block, update_readme
from tests.conftest import REPO


def test_the_committed_readme_shows_exactly_what_the_committed_reports_hold():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == results_block(REPO / "reports"), "run `skillrag readme` after committing a run"


def _metrics(reports, acc):
    cost = {"em": 0.0, "n": 2, "llm_calls": 1.0, "retrievals": 1.0, "latency_s": 3.0}
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "metrics.json").write_text(json.dumps(
        {"single_step": {"nq": {**cost, "acc": acc}, "hotpotqa": {**cost, "acc": 0.0}}}
    ))


def test_the_block_follows_the_metrics_and_update_rewrites_only_the_block(tmp_path):
    reports, readme = tmp_path / "reports", tmp_path / "README.md"
    readme.write_text(f"# title\n\n{BEGIN}\nold\n{END}\n\nrest\n")
    _metrics(reports, 0.5)
    assert update_readme(readme, reports)
    text = readme.read_text()
    assert text.startswith("# title\n\n") and text.endswith("\n\nrest\n")
    assert "| `single_step` | 50.0 | 0.0 | **25.0** |" in text and "old" not in text
    assert not update_readme(readme, reports)  # idempotent
    _metrics(reports, 1.0)
    assert update_readme(readme, reports) and "| `single_step` | 100.0 | 0.0 | **50.0** |" in readme.read_text()


def test_without_a_run_the_block_says_so_and_a_readme_without_markers_is_refused(tmp_path):
    assert "No committed run yet" in results_block(tmp_path / "reports")
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(ValueError, match="no results block"):
        update_readme(readme, tmp_path)


def test_the_prober_line_names_each_decision_point_with_its_own_cut(tmp_path):
    """probe_metrics.json as train_probe writes it: one cut before retrieval, one per gated method
    after evidence (a flat reading of `cuts` crashed the runner's README update after train_probe)."""
    from skillrag.paths import Paths
    from tests.report.conftest import write_probe_reports

    paths = Paths(tmp_path)
    write_probe_reports(paths)
    metrics = json.loads(paths.probe_metrics.read_text())
    paths.probe_metrics.write_text(json.dumps({**metrics, "ece": 0.1, "layers": 2, "network": "logistic", "pooling": "answer_last",
                                               "vs_entropy": "no_better"}))
    block = results_block(paths.reports)
    assert "before_retrieval: cut 0.600 rejects 90% of dev answers" in block
    assert "after_evidence (probing_rag): cut 0.600" in block and "after_evidence (skill_rag): cut 0.000 rejects 0%" in block
    assert "over 2 layers" in block
