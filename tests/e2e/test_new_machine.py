"""A new machine on the tiny profile: the real stages through train_probe run and are committed by
`skillrag repro`, then a `git clone` (no DVC cache, no remote, nothing but git) is all the next
machine has. It must see those stages as done, rebuild only the index (whose Lucene bytes differ
per build) before the next stage that reads it, and re-running prepare there must reproduce the
committed questions and gate result byte for byte."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from skillrag.pipeline.repro import Runner
from tests.conftest import REPO
from tests.e2e.conftest import make_project, run

pytestmark = pytest.mark.e2e

THROUGH_PROBE = ["prepare", "index", "train_router", "extract", "train_probe"]
AFTER_PROBE = "evaluate-no_retrieval"  # the first reader of the prober (each trainer sits just before its first reader)


@pytest.fixture
def git_identity(monkeypatch):
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.com")


def _committed_project(root: Path) -> Path:
    make_project(root)
    for name in (".gitignore", ".dvcignore"):
        shutil.copy(REPO / name, root / name)
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    run(["git", "add", "."], root)
    run(["git", "commit", "-q", "-m", "project"], root)
    return root


def _lock(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.lock").read_text())["stages"]


def test_a_clone_keeps_the_finished_stages_and_rebuilds_only_the_index(tmp_path, git_identity):
    project = _committed_project(tmp_path / "project")
    run(["skillrag", "repro", "train_probe", "--no-push"], project)
    assert run(["git", "status", "--porcelain", "--", "dvc.lock", "data/probe", "reports"], project).stdout == ""

    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    assert not (clone / "data" / "index").exists() and not (clone / "data" / "states" / "vectors").exists()
    dry = run(["skillrag", "repro", "--dry"], clone).stdout.splitlines()
    assert [line.split(":")[0] for line in dry[:5]] == THROUGH_PROBE and all(line.endswith(": done") for line in dry[:5])
    assert dry[5].startswith(f"{AFTER_PROBE}: pending") and "would rebuild data/index via index" in dry[5]
    assert not any("data/states/vectors" in line and "rebuild" in line for line in dry)  # train_probe is done

    committed = {path: (clone / path).read_bytes() for path in ("reports/validation/questions.json",)}
    committed |= {str(p.relative_to(clone)): p.read_bytes() for p in sorted((clone / "data" / "questions").rglob("*.jsonl"))}
    run(["skillrag", "prepare"], clone)  # prepare re-run on the new machine: the bytes dvc.lock recorded
    assert {path: (clone / path).read_bytes() for path in committed} == committed
    run(["git", "checkout", "--", "reports/timings/prepare.json"], clone)

    before = _lock(clone)
    run(["skillrag", "repro", "train_adaptive", "--no-push"], clone)
    after = _lock(clone)
    for stage in ("train_router", "extract", "train_probe"):  # the rebuilt index stales none of its readers
        assert after[stage] == before[stage], stage
    index_before = {out["path"]: out["md5"] for out in before["index"]["outs"]}
    index_after = {out["path"]: out["md5"] for out in after["index"]["outs"]}
    assert index_after.pop("data/index") != index_before.pop("data/index")  # other Lucene bytes ...
    assert index_after == index_before  # ... the same fingerprint, gate result and recorded wall time
    assert "train_adaptive" in after
    pending = [step.name for step in Runner(clone, echo=lambda line: None).plan() if step.state != "done"]
    assert pending[0] == AFTER_PROBE and "train_adaptive" not in pending and not set(THROUGH_PROBE) & set(pending)
    assert os.path.exists(clone / "data" / "index")
