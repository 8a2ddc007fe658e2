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


def test_the_self_hosted_job_runs_no_forks_code_and_pushes_nothing():
    """A persistent runner holding the data and the DVC remote runs only same-repository pull
    requests or a maintainer's dispatch, and a pull request's run writes nothing to the remote."""
    flow = _workflow()
    default = flow["jobs"]["default"]
    condition = " ".join(default["if"].split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition
    assert "vars.SKILLRAG_SELF_HOSTED == 'true' && (" in condition  # the repository check is never or-ed away
    assert set(flow[True]) <= {"pull_request", "workflow_dispatch"}  # no pull_request_target: no secrets for forks
    for job in flow["jobs"].values():
        assert "dvc push" not in _runs(job)
        checkout = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/checkout"))
        assert checkout["with"]["persist-credentials"] is False


def test_the_data_secret_reaches_nothing_the_pull_request_built():
    """The step holding SKILLRAG_DATA_URL runs before the pull request's set-up and uses no tool of
    its venv; no other step sees the secret."""
    steps = _workflow()["jobs"]["tiny"]["steps"]
    holders = [i for i, step in enumerate(steps) if "secrets.SKILLRAG_DATA_URL" in str(step)]
    assert len(holders) == 1
    data = steps[holders[0]]
    first_pr_code = next(i for i, step in enumerate(steps) if "scripts/setup.sh" in step.get("run", ""))
    assert holders[0] < first_pr_code
    assert ".venv" not in data["run"] and "RUNNER_TEMP/fetch/bin/dvc" in data["run"]
