"""The tiny profile's `dvc repro` ends with the failure-space analysis and the report, built from
the real traces; `skillrag report --against <ref>` gives a comment body with DVC's metrics diff."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import run

pytestmark = pytest.mark.e2e


def test_repro_writes_the_report_figures_analysis_and_data_docs(dvc_project):
    analysis = json.loads((dvc_project / "reports" / "analysis.json").read_text())
    assert analysis["with_state"] == analysis["failure_states"]  # evaluate kept skill_rag's hidden vectors
    for name in ("failure_space.png", "failure_separability.png", "probe_reliability.png"):
        assert (dvc_project / "reports" / "figures" / name).read_bytes().startswith(b"\x89PNG")
    text = (dvc_project / "reports" / "report.md").read_text()
    metrics = json.loads((dvc_project / "reports" / "metrics.json").read_text())
    for method in metrics:
        assert f"| {method} | " in text
    assert "| method | hotpotqa | musique | in-domain | OOD | overall |" in text
    assert "### Case 1:" in text and "## Provenance" in text
    assert (dvc_project / "data" / "data_docs" / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html").is_file()


def test_report_against_a_ref_shows_the_metrics_diff(dvc_project, tmp_path):
    project = Path(shutil.copytree(dvc_project, tmp_path / "project", symlinks=True))
    (project / ".gitignore").write_text("/data/\n/.dvc/cache/\n/.dvc/tmp/\n")
    run(["dvc", "config", "core.no_scm", "false"], project)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        run(cmd, project)
    metrics = json.loads((project / "reports" / "metrics.json").read_text())
    metrics["skill_rag"]["hotpotqa"]["acc"] = 0.987
    (project / "reports" / "metrics.json").write_text(json.dumps(metrics))
    body = run(["skillrag", "report", "--against", "HEAD"], project).stdout
    assert body.startswith("# Skill-RAG evaluation report")
    # dvc's diff row: path | metric | HEAD | workspace | change (the change equals the new value when HEAD's is 0)
    row = next(line for line in body.splitlines() if "skill_rag.hotpotqa.acc" in line)
    assert [cell.strip() for cell in row.strip("|").split("|")][3] == "0.987"
