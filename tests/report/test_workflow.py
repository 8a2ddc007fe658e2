"""The pull-request workflow is valid YAML, runs the pipeline on both runners, and builds its
comment with the project command that exists in the CLI."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from skillrag import cli
from tests.conftest import REPO


def _workflow() -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / "pr-report.yml").read_text())


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_pull_requests_run_the_pipeline_and_post_the_projects_comment():
    flow = _workflow()
    assert "pull_request" in flow[True]  # YAML 1.1 reads the key `on` as True
    tiny, default = flow["jobs"]["tiny"], flow["jobs"]["default"]
    assert tiny["runs-on"] == "ubuntu-latest" and "self-hosted" in default["runs-on"]
    for job in (tiny, default):
        commands = _runs(job)
        assert "dvc repro --pull" in commands
        assert 'skillrag report --against "$BASE"' in commands and "cml comment update" in commands
    assert "--profile tiny" in _runs(tiny) and "--profile" not in _runs(default)
    assert flow["permissions"]["pull-requests"] == "write"


def test_the_command_the_workflow_runs_exists():
    result = CliRunner().invoke(cli.app, ["report", "--help"])
    assert result.exit_code == 0 and "--against" in result.output and "--out" in result.output
