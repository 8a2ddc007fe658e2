"""experiments/strip_vectors.py takes the hidden vectors out of trace files and nothing else; and
no trace file an experiment keeps in git carries one (git would hold ~20 MB of vectors that nothing
reads and the experiment's command writes again)."""

from __future__ import annotations

import json
import subprocess

import pytest

from skillrag.methods.trace import Round, Trace
from tests.conftest import REPO
from tests.experiments import load_script


def _strip_vectors():
    return load_script("strip_vectors.py")


def _trace(question_id: str, states: list[list[float] | None]) -> dict:
    rounds = [
        Round(index=i, stage="retrieval", answer="Paris", state=state) for i, state in enumerate(states)
    ]
    return Trace(
        question_id, "nq", "capital of France?", ["Paris"], "skill_rag", rounds, answer="Paris é"
    ).to_dict()


def test_stripping_nulls_every_rounds_vector_and_keeps_the_rest_of_each_line(tmp_path, capsys):
    folder = tmp_path / "exp" / "runs" / "skill_rag"
    folder.mkdir(parents=True)
    with_vectors, without = _trace("q1", [[0.5] * 64, [1.5] * 64]), _trace("q2", [None])
    traces = folder / "nq.jsonl"
    traces.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in (with_vectors, without)),
        encoding="utf-8",
    )

    _strip_vectors().main([str(tmp_path / "exp")])

    lines = traces.read_text(encoding="utf-8").splitlines()
    stripped = [Trace.from_dict(json.loads(line)) for line in lines]
    assert [r.state for t in stripped for r in t.rounds] == [None, None, None]
    expected = {**with_vectors, "rounds": [{**r, "state": None} for r in with_vectors["rounds"]]}
    assert json.loads(lines[0]) == expected
    assert lines[1] == json.dumps(without, ensure_ascii=False)  # a line without vectors is left byte for byte
    assert "in all: " in capsys.readouterr().out


def test_a_missing_file_is_named_and_nothing_is_written(tmp_path):
    kept = tmp_path / "a.jsonl"
    kept.write_text(json.dumps(_trace("q1", [[0.5] * 8])) + "\n", encoding="utf-8")
    before = kept.read_text(encoding="utf-8")

    with pytest.raises(SystemExit, match="no such file: .*missing.jsonl"):
        _strip_vectors().main([str(kept), str(tmp_path / "missing.jsonl")])

    assert kept.read_text(encoding="utf-8") == before


def test_no_trace_an_experiment_keeps_in_git_holds_a_hidden_vector():
    tracked = subprocess.run(
        ["git", "ls-files", "experiments/*.jsonl"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked
    holding = []
    for name in tracked:
        for number, line in enumerate((REPO / name).read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(line)
            rounds = row.get("rounds") or [] if isinstance(row, dict) else []
            if any(r.get("state") is not None for r in rounds):
                holding.append(f"{name}:{number}")
                break
    assert not holding, (
        f"hidden vectors in git: {holding}; run `python experiments/strip_vectors.py <folder>`"
    )
