"""The pull-request workflow is valid YAML, runs the pipeline on both runners (the hosted one with
data it fetches and against the base's own tiny run), and builds its comment with the project
command that exists in the CLI."""

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
    assert "dvc repro --pull" in _runs(default)
    assert 'skillrag report --against "$BASE"' in _runs(default) and "--profile" not in _runs(default)
    for job in (tiny, default):
        assert "cml comment update" in _runs(job)
    assert flow["permissions"]["pull-requests"] == "write"


def test_the_hosted_tiny_run_is_diffed_against_the_bases_tiny_run():
    """Like with like: the base commit's tiny run is made in the same job and committed locally as
    base-tiny, then the pull request's tiny run is compared with it."""
    steps = _workflow()["jobs"]["tiny"]["steps"]
    runs = [step.get("run", "") for step in steps]
    base = next(i for i, run in enumerate(runs) if "git checkout -q HEAD^1" in run)
    head = next(i for i, run in enumerate(runs) if 'git checkout -qf "$PR_COMMIT"' in run)
    comment = next(i for i, run in enumerate(runs) if "skillrag report --against base-tiny" in run)
    assert base < head < comment
    for i in (base, head):
        assert "--profile tiny" in runs[i] and "dvc repro" in runs[i]
    assert "git branch base-tiny" in runs[base]


def test_the_hosted_job_fetches_the_data_bundle_or_fails_saying_why():
    steps = _workflow()["jobs"]["tiny"]["steps"]
    data = next(step for step in steps if "SKILLRAG_DATA_URL" in step.get("env", {}))
    assert data["env"]["SKILLRAG_DATA_URL"] == "${{ secrets.SKILLRAG_DATA_URL }}"
    assert 'if [ -z "$SKILLRAG_DATA_URL" ]' in data["run"] and "::error::" in data["run"] and "exit 1" in data["run"]
    assert "../shared" in data["run"]
    first_repro = next(i for i, step in enumerate(steps) if "dvc repro" in step.get("run", ""))
    assert steps.index(data) < first_repro


def test_the_command_the_workflow_runs_exists():
    result = CliRunner().invoke(cli.app, ["report", "--help"])
    assert result.exit_code == 0 and "--against" in result.output and "--out" in result.output
