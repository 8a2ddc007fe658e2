"""recommit's check on real tiny runs: FLARE's traces written again from scratch after a docstring
edit are the same (wall-clock fields aside, numbers within the tolerance), so the comparison finds
nothing; written again under another FLARE threshold they differ, and the comparison names them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from skillrag.pipeline.recommit import differences, repro_tiny

pytestmark = pytest.mark.e2e


def test_a_rerun_after_a_docstring_edit_is_the_same_and_another_threshold_is_not(dvc_project, tmp_path):
    project = Path(shutil.copytree(dvc_project, tmp_path / "project", symlinks=True))
    stages = list(yaml.safe_load((project / "dvc.yaml").read_text())["stages"])
    flare = project / "skillrag" / "methods" / "flare.py"
    flare.write_text(flare.read_text().replace('"""', '"""Edited docstring. ', 1))
    shutil.rmtree(project / "data" / "runs" / "flare")  # traces persist and resume: trace every question anew
    repro_tiny(project)
    assert (project / "data" / "runs" / "flare" / "hotpotqa.jsonl").is_file()
    assert differences(dvc_project, project, stages) == []

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["methods"]["flare"]["theta"] = 0.999  # retrieve at almost every sentence
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.rmtree(project / "data" / "runs" / "flare")  # a resume under other params is refused
    repro_tiny(project)
    found = differences(dvc_project, project, stages)
    assert any(line.startswith("data/runs/flare/") for line in found), found
    assert not any(line.startswith(("data/runs/skill_rag/", "data/runs/single_step/")) for line in found), found
