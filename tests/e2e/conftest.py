"""A throw-away copy of the project running the tiny profile against the shared data bundle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillrag.config import load_params
from skillrag.pipeline.recommit import run_tiny, tiny_project
from tests.conftest import REPO, SHARED_DATA


def make_project(root: Path) -> Path:
    """dvc.yaml, params.yaml (the tiny profile's resolved values, as `skillrag params --profile tiny`
    prints them, with absolute data paths) and the code DVC hashes (skillrag.pipeline.recommit.tiny_project)."""
    tiny_project(REPO, root)
    params = load_params(root / "params.yaml")
    assert params.prepare.local_dir == SHARED_DATA.resolve()
    return root


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3000, check=False)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="session")
def dvc_project(tmp_path_factory) -> Path:
    """The tiny project after a full `dvc repro` (shared by the e2e tests)."""
    return run_tiny(make_project(tmp_path_factory.mktemp("dvc") / "project"))
