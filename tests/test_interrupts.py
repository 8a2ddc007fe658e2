"""Ctrl-C, SIGTERM, SIGKILL and a second run, against the real CLI in a subprocess (tests/fake_cli.py:
fakes for the LM and the retriever only). A run is stopped while a question is in flight, then
resumed; the result must equal an uninterrupted run's, and nothing may land outside the outputs.

Marked slow: each subprocess imports the whole stack (torch, Great Expectations), about half a
minute per test on two shared cores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from skillrag.probe.state_store import load_features, read_rows
from tests.conftest import REPO
from tests.fake_cli import make_workspace

pytestmark = pytest.mark.slow

OUTPUTS = {"evaluate": ("data/runs/", "reports/", ".skillrag/"), "extract": ("data/states", "reports/timings/", "reports/validation/", ".skillrag/")}


def start(workspace: Path, command: str, **fake: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **fake}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fake_cli", "--params", str(workspace / "params.yaml"), command],
        cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=300)
    return process.returncode, err


def wait_for(path: Path, process: subprocess.Popen) -> None:
    """Until the fake LM says it is mid-question (no timing: it waits there for us)."""
    while not path.exists():
        assert process.poll() is None, f"the run ended before pausing:\n{process.stderr.read()[-3000:]}"
        time.sleep(0.05)


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def untimed(value):
    """`value` without latencies, which differ between any two runs."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if "latency" not in k}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def evaluate_result(workspace: Path) -> dict:
    runs = {
        p.relative_to(workspace).as_posix(): [untimed(json.loads(line)) for line in p.read_text().splitlines()]
        for p in sorted((workspace / "data" / "runs").glob("*/*.jsonl"))
    }
    return {"runs": runs, "metrics": untimed(json.loads((workspace / "reports" / "metrics.json").read_text()))}


def extract_result(workspace: Path) -> tuple[pd.DataFrame, dict]:
    states = workspace / "data" / "states"
    rows = read_rows(states)
    return rows.drop(columns=["shard", "offset"]), load_features(states, rows)


RESULT = {"evaluate": evaluate_result, "extract": extract_result}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Each stage's result when nothing interrupts it."""
    results = {}
    for command in ("evaluate", "extract"):
        workspace = make_workspace(tmp_path_factory.mktemp(f"reference-{command}"))
        code, err = finish(start(workspace, command))
        assert code == 0, err[-3000:]
        results[command] = RESULT[command](workspace)
    return results


def assert_same(command: str, got, want) -> None:
    if command == "evaluate":
        assert got == want
    else:
        pd.testing.assert_frame_equal(got[0], want[0])
        assert all(torch.equal(got[1][layer], want[1][layer]) for layer in want[1])


@pytest.mark.parametrize(
    ("command", "signum"),
    [
        ("evaluate", signal.SIGINT),
        ("evaluate", signal.SIGTERM),
        ("evaluate", signal.SIGKILL),
        ("extract", signal.SIGINT),
        ("extract", signal.SIGKILL),
    ],
    ids=["evaluate-SIGINT", "evaluate-SIGTERM", "evaluate-SIGKILL", "extract-SIGINT", "extract-SIGKILL"],
)
def test_a_signal_mid_question_loses_nothing_finished_and_a_rerun_completes_the_same_result(
    tmp_path, reference, command, signum
):
    workspace = make_workspace(tmp_path / "ws")
    inputs = files(workspace)
    ready = tmp_path / "paused"
    process = start(workspace, command, FAKE_PAUSE_AT="3", FAKE_READY=str(ready))
    wait_for(ready, process)  # two calls answered, the third in flight
    process.send_signal(signum)
    code, err = finish(process)

    if signum == signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        assert code == 128 + signum
        assert f"interrupted ({signal.Signals(signum).name}): finished work is kept; rerun the same command to continue" in err
        assert "Traceback" not in err
    if command == "evaluate":
        kept = [json.loads(line) for line in (workspace / "data/runs/no_retrieval/nq.jsonl").read_text().splitlines()]
        assert [t["question_id"] for t in kept] == ["nq-eval-0", "nq-eval-1"]  # finished ones kept, in-flight one not
        assert all(t["termination"] != "error" for t in kept)
    else:
        assert len(read_rows(workspace / "data" / "states.partial")) == 4  # the two finished batches
    new = files(workspace) - inputs
    assert all(name.startswith(OUTPUTS[command]) for name in new), sorted(new)
    assert not list(workspace.glob("hs_err_pid*"))

    code, err = finish(start(workspace, command))
    assert code == 0, err[-3000:]
    assert_same(command, RESULT[command](workspace), reference[command])
    new = files(workspace) - inputs
    assert all(name.startswith(OUTPUTS[command]) for name in new), sorted(new)


def test_a_signal_mid_batch_keeps_the_finished_questions_and_a_rerun_completes_the_same_result(tmp_path, reference):
    """Questions answered two at a time (lm.concurrency): the signal stops the batch in flight."""
    workspace = make_workspace(tmp_path / "ws")
    params = workspace / "params.yaml"
    params.write_text(params.read_text().replace("concurrency: 1", "concurrency: 2"))
    ready = tmp_path / "paused"
    process = start(workspace, "evaluate", FAKE_PAUSE_AT="2", FAKE_READY=str(ready))
    wait_for(ready, process)  # the first batch (two questions) answered, the second in flight
    process.send_signal(signal.SIGTERM)
    code, err = finish(process)
    assert code == 143 and "Traceback" not in err, err[-3000:]
    kept = [json.loads(line) for line in (workspace / "data/runs/no_retrieval/nq.jsonl").read_text().splitlines()]
    assert [t["question_id"] for t in kept] == ["nq-eval-0", "nq-eval-1"]
    assert all(t["termination"] != "error" for t in kept)

    code, err = finish(start(workspace, "evaluate"))
    assert code == 0, err[-3000:]
    assert evaluate_result(workspace) == reference["evaluate"]


def test_a_second_evaluate_on_the_same_workspace_is_refused_and_the_first_completes(tmp_path, reference):
    workspace = make_workspace(tmp_path / "ws")
    ready, release = tmp_path / "paused", tmp_path / "go-on"
    first = start(workspace, "evaluate", FAKE_PAUSE_AT="3", FAKE_READY=str(ready), FAKE_RELEASE=str(release))
    wait_for(ready, first)
    before = (workspace / "data/runs/no_retrieval/nq.jsonl").read_text()

    code, err = finish(start(workspace, "evaluate"))
    assert code == 1
    assert f"`skillrag evaluate` is already running on this workspace (pid {first.pid}: " in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert (workspace / "data/runs/no_retrieval/nq.jsonl").read_text() == before  # it did no work

    release.touch()
    code, err = finish(first)
    assert code == 0, err[-3000:]
    assert evaluate_result(workspace) == reference["evaluate"]
