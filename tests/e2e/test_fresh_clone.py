"""A new user's first commands on a fresh clone of a finished run (the tiny profile's): `ask`,
`search` and `evaluate --questions` build the index they read themselves (no `skillrag index`
first), and neither they nor `skillrag index` change a git-tracked file: afterwards `git status`
shows only the named run's documented outputs (data/custom/NAME/, reports/custom/NAME/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skillrag.files import read_jsonl, write_jsonl
from tests.conftest import REPO
from tests.e2e.conftest import run

pytestmark = pytest.mark.e2e


@pytest.fixture
def clone(dvc_project: Path, tmp_path: Path, monkeypatch) -> Path:
    """The finished tiny run committed to git as a run commits it, then cloned: no index, no corpus
    copy, no DVC cache."""
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.com")
    origin = Path(shutil.copytree(dvc_project, tmp_path / "origin", ignore=shutil.ignore_patterns("cache", "tmp")))
    for name in (".gitignore", ".dvcignore"):
        shutil.copy(REPO / name, origin / name)
    run(["git", "init", "-q"], origin)
    run(["git", "add", "."], origin)
    run(["git", "commit", "-q", "-m", "the finished run"], origin)
    run(["git", "clone", "-q", str(origin), str(tmp_path / "clone")], tmp_path)
    clone = tmp_path / "clone"
    assert not (clone / "data" / "index").exists() and not (clone / "data" / "corpus").exists()
    return clone


def test_the_documented_commands_on_a_fresh_clone_change_no_tracked_file(clone: Path, tmp_path: Path) -> None:
    asked = run(["skillrag", "ask", "who wrote Hamlet"], clone)
    assert "building the Lucene and bm25s indexes" in asked.stdout + asked.stderr
    assert "answer:" in asked.stdout
    assert "rank" in run(["skillrag", "search", "Hamlet", "-k", "3"], clone).stdout
    questions = list(read_jsonl(clone / "data" / "questions" / "eval" / "hotpotqa.jsonl"))[:2]
    mine = tmp_path / "mine" / "heldout.jsonl"
    write_jsonl(mine, ({k: q[k] for k in ("id", "question", "answers")} for q in questions))
    methods = "evaluate.methods=[no_retrieval,single_step,skill_rag]"
    run(["skillrag", "--set", methods, "evaluate", "--questions", str(mine), "--name", "x"], clone)
    rebuilt = run(["skillrag", "index"], clone)
    assert "the recorded index rebuilt" in rebuilt.stdout
    status = run(["git", "status", "--short", "--untracked-files=all"], clone).stdout.splitlines()
    assert status and all(line[3:].startswith(("data/custom/x/", "reports/custom/x/")) for line in status), status
