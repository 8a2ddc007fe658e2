"""`dvc repro` on the tiny profile runs every stage for real (Lucene, GX, the CLI)."""

import json

import pytest

from skillrag.files import read_jsonl
from tests.e2e.conftest import run

pytestmark = pytest.mark.e2e


def test_repro_builds_every_stage_and_is_then_up_to_date(dvc_project):
    questions = dvc_project / "data" / "questions"
    assert sorted(p.name for p in (questions / "eval").iterdir()) == [
        "2wiki.jsonl", "hotpotqa.jsonl", "musique.jsonl", "nq.jsonl", "triviaqa.jsonl",
    ]
    assert len(list(read_jsonl(questions / "train" / "nq.jsonl"))) == 8  # tiny: 24 train / 3 datasets
    assert json.loads((questions / "validation.json").read_text())["success"]
    assert json.loads((dvc_project / "data" / "index" / "validation.json").read_text())["success"]
    assert (dvc_project / "dvc.lock").exists()
    status = run(["dvc", "status"], dvc_project).stdout
    assert "up to date" in status.lower(), status


def test_search_over_the_built_index(dvc_project):
    out = run(["skillrag", "search", "Shirley Temple", "-k", "3"], dvc_project).stdout
    assert "score" in out and out.count("│ p") >= 3
