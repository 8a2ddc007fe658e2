"""A throw-away copy of the project running the tiny profile against the shared data bundle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillrag.config import load_params
from tests.conftest import REPO, SHARED_DATA


def make_project(root: Path) -> Path:
    """dvc.yaml, params.yaml (the tiny profile's resolved values, as `skillrag params --profile tiny`
    prints them, with absolute data paths) and the code DVC hashes."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    shutil.copytree(REPO / "skillrag", root / "skillrag", ignore=shutil.ignore_patterns("__pycache__"))
    params = load_params(REPO / "params.yaml", profile="tiny").resolved()
    assert params["prepare"]["local_dir"] == str(SHARED_DATA.resolve())
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3000, check=False)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="session")
def dvc_project(tmp_path_factory) -> Path:
    """The tiny project after a full `dvc repro` (shared by the e2e tests)."""
    root = make_project(tmp_path_factory.mktemp("dvc") / "project")
    run(["dvc", "init", "--no-scm", "-q"], root)
    run(["dvc", "repro"], root)
    return root
