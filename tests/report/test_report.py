"""Stage `report` and `skillrag report --against`: report.md from real-shaped traces and
metrics, the pull-request body with DVC's real metrics diff in a real git + DVC project, and
the gates' Data Docs built offline with a file-backed Great Expectations context."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from skillrag import cli
from skillrag.config import Params
from skillrag.files import write_json
from skillrag.paths import Paths
from skillrag.pipeline.stages.analyze import analyze
from skillrag.pipeline.stages.report import report
from skillrag.report.data_docs import data_docs_index
from tests.report.conftest import read_json, simple_trace, write_runs

PARAMS = Params(evaluate={"datasets": ["hotpotqa", "musique"]})


def gate_results(paths: Paths) -> None:
    """A passing and a failing gate result, written by the real gate code."""
    import great_expectations.expectations as gxe

    from skillrag.quality.gate import Check, GateFailed, run_gate

    frame = pd.DataFrame({"id": ["a", "b", "b"]})
    run_gate("questions", {"rows": Check(frame, [gxe.ExpectColumnValuesToNotBeNull(column="id")])},
             paths.validation("questions"))
    with pytest.raises(GateFailed):
        run_gate("runs", {"ids": Check(frame, [gxe.ExpectColumnValuesToBeUnique(column="id")])},
                 paths.validation("runs"))


def test_report_reads_every_method_from_the_traces_and_renders_each_section(workspace):
    gate_results(workspace)
    analyze(PARAMS, workspace)
    path = report(PARAMS, workspace)
    text = path.read_text()
    assert path == workspace.root / "reports" / "report.md"
    # Table 1 layout: in-domain hotpotqa, OOD musique, their averages, with intervals, for every method
    assert "| method | hotpotqa | musique | in-domain | OOD | overall |" in text
    for method in ("no_retrieval", "single_step", "probing_rag", "skill_rag"):
        assert f"| {method} | " in text
    row = next(line for line in text.splitlines() if line.startswith("| no_retrieval | ") and "(" in line)
    assert row.count("–") >= 5  # five cells, each "mean (low–high)"
    assert "latency p95 (s)" in text and "retrieving" in text
    loop = text.split("## The loop's own gain and the final answer", 1)[1].split("\n## ", 1)[0]
    assert "| skill_rag | all |" in loop and "| skill_rag | max_score |" in loop and "| probing_rag | last |" in loop
    # paired: the primary family, skill_rag against every method and the others against single_step (exploratory)
    paired = text.split("## Paired comparisons (same questions)")[1].split("\n## ")[0]
    assert "| skill_rag vs probing_rag | overall | primary (2) | 12 | 25.0 | 33.3 | -8.3 (-41.2 to +26.9) | 2 | 3 |" in paired
    # identical outcomes: an interval that still says how far a difference could be, not "+0.0 (+0.0 to +0.0)"
    assert "| probing_rag vs single_step | overall | exploratory (13) | 14 | 35.7 | 35.7 | +0.0 (-12.2 to +12.2) | 0 | 0 |" in paired
    # one closed-book answer of 14 accepted; 13 retrieval rounds, all rejected
    assert "| skill_rag | 7% of 14 | 0% of 13 |" in text
    assert "| skill_rag | query_rewriting | 4 |" in text
    assert "Prober AUROC 0.740 [0.600, 0.850]" in text and "| before_retrieval | 0.600 | retrieves 90% | 0.300 |" in text
    assert "| after_evidence (skill_rag) | 0.000 (the null: no gain beyond noise) | retries 0% | 0.400 |" in text and "![prober reliability on dev (train_probe)](figures/probe_reliability.png)" in text
    assert "![prober reliability on the evaluation](figures/prober_reliability_eval.png)" in text
    assert "![failure space](figures/failure_space.png)" in text and "13 failure states" in text
    assert "### Case 1: a skill fixed it" in text and "Title three" in text and "query_rewriting query" in text
    assert "### Case 2: no skill fixed it" in text and "### Case 3: the router stopped (exit)" in text
    assert "| runs | FAILED | 1 | 1 | expect_column_values_to_be_unique |" in text
    assert "| questions | passed |" in text
    assert "smollm2-135m (float32)" in text and "| index digest | idx123 |" in text
    assert "| model licence | Apache-2.0 — SmolLM2 licence |" in text and "| model weights digest | abc |" in text
    assert "## Change against the base" in text and "No comparison: `HEAD` is no commit of a git repository here" in text
    index = data_docs_index(workspace)
    assert index.is_file() and "../data/data_docs/gx/uncommitted/data_docs/local_site/index.html" in text
    pages = list(index.parent.glob("validations/**/*.html"))
    assert len(pages) == 2 and any("runs.ids" in p.name for p in pages)


def test_a_new_method_in_the_metrics_appears_without_code_changes(tmp_path):
    paths = Paths(tmp_path)
    write_runs(paths, [simple_trace(i, "nq", "brand_new_rag", right=True) for i in range(3)])
    text = report(PARAMS, paths).read_text()
    assert "| brand_new_rag | 100.0 (43.9–100.0) |" in text
    assert "_No method's rounds carry a prober verdict._" in text and "analysis.json` is missing" in text


def _git_dvc_project(root: Path) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q", "-b", "main"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    (root / "dvc.yaml").write_text(yaml.safe_dump({"metrics": ["reports/metrics.json"]}))
    (root / "params.yaml").write_text(yaml.safe_dump({"report": {"cases": 1}}))
    return env


def test_pr_comment_against_a_ref_leads_with_dvcs_metrics_diff(workspace):
    env = _git_dvc_project(workspace.root)
    subprocess.run(["git", "add", "-A"], cwd=workspace.root, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=workspace.root, env=env, check=True)
    metrics = read_json(workspace.metrics)
    metrics["skill_rag"]["hotpotqa"]["acc"] = 0.99  # the change under review
    write_json(workspace.metrics, metrics)
    (workspace.root / "params.yaml").write_text(yaml.safe_dump({"report": {"cases": 2}}))
    out = workspace.root / "comment.md"
    result = CliRunner().invoke(
        cli.app, ["--params", str(workspace.root / "params.yaml"), "report", "--against", "main", "--out", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    body = out.read_text()
    assert body.index("## Change against the base") < body.index("## Answer quality")
    diff = next(line for line in body.splitlines() if "skill_rag.hotpotqa.acc" in line)
    assert "0.99" in diff and "| reports/metrics.json |" in diff
    assert "`main` has no `reports/outcomes.csv`: only the aggregate diff above is shown." in body
    assert "dvc params diff --md main" in body and "report.cases" in body
    assert "![prober reliability on dev (train_probe)](reports/figures/probe_reliability.png)" in body  # links relative to the comment
    assert not workspace.report.exists()  # the stage's report is not touched


def test_the_router_section_says_how_many_fixable_states_its_choices_fixed_as_run_and_held_out(workspace):
    from skillrag.skills.calibration import choice_report

    qd, ef, stop = "question_decomposition", "evidence_focusing", "exit"
    fixers = [frozenset({qd}), frozenset({qd, ef}), frozenset(), frozenset()]
    write_json(workspace.router_metrics, {
        "trained": False, "reason": "too few states",
        "router_as_run": {"router": "prompt", **choice_report([qd, ef, qd, stop], fixers)},
        "prompt_router": {"fitted_cv_choices": choice_report([qd, stop, stop, stop], fixers)},
    })
    text = report(PARAMS, workspace).read_text()
    assert "its choice fixed 2 of the 2 states some skill fixed; accuracy 0.75" in text
    assert "did not see (cross-validated): fixed 1 of 2, accuracy 0.75" in text
