"""The CPU-only deploy path as a user takes it: a real Prefect server (127.0.0.1 only, its own
home), `skillrag deploy --pool cpu` (creates the pool, deploys the cpu deployments by name), a
run of reevaluate-cpu picked up by a real process worker, which fails cleanly: the checkout has
no committed reports/outcomes.csv to compare with."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(cmd: list[str], cwd: Path, env: dict, timeout: int = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


@pytest.fixture
def server(tmp_path):
    """A Prefect server on a free local port; yields the environment that points at it."""
    port = _free_port()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PREFECT_HOME": str(tmp_path / "prefect"),
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_UI_ENABLED": "false"}
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5):
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
                time.sleep(2)
        yield env
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def test_cpu_only_deploy_registers_the_reevaluation_and_its_run_fails_on_missing_outcomes(server, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("prefect.yaml", "params.yaml", "dvc.yaml"):
        shutil.copy(REPO / name, project / name)
    for package in ("skillrag", "flows"):
        shutil.copytree(REPO / package, project / package, ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "no committed run yet"]):
        _run(cmd, project, server)

    cli = [sys.executable, "-c", "from skillrag.cli import run; run()"]  # the project's own code (cwd first on sys.path)
    said = _run([*cli, "deploy", "--pool", "cpu"], project, server)
    assert "pipeline-cpu, reevaluate-cpu on work pool cpu" in said
    listed = _run([str(BIN / "prefect"), "deployment", "ls"], project, server)
    assert "reevaluate-cpu" in listed and "pipeline-cpu" in listed and "gpu" not in listed

    started = _run([str(BIN / "prefect"), "deployment", "run", "reevaluate/reevaluate-cpu"], project, server)
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", started).group(1)
    _run([str(BIN / "prefect"), "worker", "start", "--pool", "cpu", "--run-once"], project, server)
    state = _run([str(BIN / "prefect"), "flow-run", "inspect", run_id], project, server)
    assert re.search(r"type=StateType\.FAILED|'type': 'FAILED'|FAILED", state), state[-2000:]
    logs = _run([str(BIN / "prefect"), "flow-run", "logs", run_id], project, server)
    assert "no committed reports/outcomes.csv at 'HEAD'" in logs
