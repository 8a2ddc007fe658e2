"""experiments/router-100/headroom.py still runs against the library it imports (exploration,
skill calibration, traces), on a tiny slice of the experiment's own traces: as git holds them (no
hidden vectors) and with vectors put back (made here), as a re-run of the exploration writes them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from skillrag.vectors import encode_vector
from tests.conftest import REPO
from tests.experiments import load_script

EXPERIMENT = REPO / "experiments" / "router-100"


def _headroom():
    return load_script("router-100/headroom.py")


def _slice(tmp_path: Path, vectors: bool) -> list[str]:
    """The first 40 traces of the experiment (as git holds them: no vectors), each round given a
    random 16-float vector when `vectors`."""
    lines = (EXPERIMENT / "router_traces" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    rng = np.random.default_rng(0)
    rows = [json.loads(line) for line in lines]
    for row in rows:
        for r in row["rounds"]:
            r["state"] = encode_vector(rng.normal(size=16).tolist()) if vectors else None
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return lines


def _oracle_bounds_every_constant_skill(out: str, questions: int) -> None:
    assert out.startswith(f"{questions} questions, ")
    oracle, states = map(int, re.search(r"oracle fixes (\d+) of (\d+)", out).groups())
    alone = {
        skill: int(n)
        for skill, n in re.findall(r"'(\w+)': (\d+)", out.split("each skill always:")[1].split(";")[0])
    }
    assert 0 < states and alone and all(n <= oracle <= states for n in alone.values())
    assert "prompt, content-free" in out


def test_on_the_traces_in_git_headroom_says_where_the_traces_with_vectors_are(tmp_path, capsys):
    lines = _slice(tmp_path, vectors=False)

    _headroom().main(tmp_path)

    out = capsys.readouterr().out
    assert out.startswith(f"{len(lines)} questions, no hidden vectors in ")
    assert "git show f5b474c:experiments/router-100/router_traces/train.jsonl" in out and "oracle" not in out


def test_the_commit_it_names_holds_the_traces_with_their_vectors():
    if subprocess.run(
        ["git", "cat-file", "-e", "f5b474c"], cwd=REPO, capture_output=True, check=False
    ).returncode:
        pytest.skip("a shallow clone: f5b474c is not in its history")
    held = subprocess.run(
        ["git", "show", "f5b474c:experiments/router-100/router_traces/train.jsonl"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(held) == 100 and sum(json.loads(line)["rounds"][0]["state"] is not None for line in held) > 70


def test_with_the_vectors_back_headroom_also_fits_the_learned_router(tmp_path, capsys):
    lines = _slice(tmp_path, vectors=True)

    _headroom().main(tmp_path)

    out = capsys.readouterr().out
    _oracle_bounds_every_constant_skill(out, len(lines))
    assert "learned, balanced (cv)" in out and "no hidden vectors" not in out
