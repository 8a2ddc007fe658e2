"""Stage `prepare` on another machine: the same inputs give the same bytes (questions and the gate's
result), so re-running it stales nothing downstream."""

from __future__ import annotations

from pathlib import Path

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.pipeline.stages import STAGES
from tests.conftest import make_bundle


def _outputs(paths: Paths) -> dict[str, bytes]:
    files = sorted(p for p in paths.questions.rglob("*") if p.is_file())
    return {
        **{p.relative_to(paths.root).as_posix(): p.read_bytes() for p in files},
        "validation": paths.validation("questions").read_bytes(),
    }


def test_prepare_rerun_in_a_fresh_workspace_gives_byte_identical_questions_and_gate_result(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", {"hotpotqa": 12, "nq": 12, "triviaqa": 12, "musique": 4, "2wiki": 4})
    params = Params(prepare={"local_dir": str(bundle), "train_size": 6, "dev_size": 9, "eval_size": 2})
    first, second = Paths(tmp_path / "one"), Paths(tmp_path / "two")
    for paths in (first, second):
        STAGES["prepare"](params, paths)
    assert not (first.questions / "validation.json").exists()  # never inside the questions' directory
    one, two = _outputs(first), _outputs(second)
    assert len(one) == 12 and one == two  # 11 question files (train: 3 datasets) and the result
    assert b'"success": true' in one["validation"]
