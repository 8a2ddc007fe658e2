"""The runs gate's retrieval rule: a method meant to retrieve that never retrieved on a dataset
fails the gate, naming the method, the dataset and what decides its retrieval."""

from __future__ import annotations

import json

import pytest

from skillrag.eval.runner import settings_file
from skillrag.files import write_json
from skillrag.methods import Cost, Trace
from skillrag.paths import Paths
from skillrag.quality import GateFailed
from skillrag.quality.runs_gate import gate_runs
from skillrag.registry import METHODS
from tests.conftest import write_rows


def _workspace(tmp_path, retrievals: dict[str, list[int]]) -> Paths:
    """Two nq evaluation questions; per method, its traces' retrieval counts and the settings its
    run recorded (what the registry says: whether it retrieves, what triggers it)."""
    paths = Paths(tmp_path)
    write_rows(
        paths.question_file("eval", "nq"),
        [{"id": f"nq-{i}", "dataset": "nq", "question": f"Question {i}?", "answers": ["a"], "split": "eval"} for i in range(2)],
    )
    for method, counts in retrievals.items():
        traces = [
            Trace(f"nq-{i}", "nq", f"Question {i}?", ["a"], method, totals=Cost(retrievals=n)).to_dict()
            for i, n in enumerate(counts)
        ]
        write_rows(paths.run_file(method, "nq"), traces)
        entry = METHODS[method]
        write_json(settings_file(paths.run_file(method, "nq")), {"retrieves": entry.retrieves, "trigger": entry.trigger})
    return paths


def test_a_retrieving_method_that_never_retrieved_fails_naming_its_trigger(tmp_path):
    runs = {"no_retrieval": [0, 0], "single_step": [1, 1], "ircot": [0, 2], "probing_rag": [0, 0], "adaptive_rag": [0, 0]}
    paths = _workspace(tmp_path, runs)
    with pytest.raises(GateFailed) as failed:
        gate_runs(paths, list(runs), ["nq"], None, 0.05)
    message = str(failed.value)
    assert "probing_rag/nq: 0 retrievals over 2 questions, though probing_rag is meant to retrieve: check probe.threshold" in message
    assert "adaptive_rag/nq: 0 retrievals" in message and "skillrag train-adaptive" in message
    assert "no_retrieval/nq: 0" not in message and "ircot/nq: 0" not in message and "single_step/nq: 0" not in message
    result = json.loads(paths.validation("runs").read_text())
    assert result["success"] is False


def test_methods_that_retrieved_somewhere_pass(tmp_path):
    runs = {"no_retrieval": [0, 0], "single_step": [1, 1], "ircot": [0, 2]}
    assert gate_runs(_workspace(tmp_path, runs), list(runs), ["nq"], None, 0.05)["success"]


def test_a_run_that_never_retrieved_is_only_logged_when_retrieval_is_not_required(tmp_path, caplog):
    runs = {"single_step": [1, 1], "probing_rag": [0, 0]}
    with caplog.at_level("WARNING"):
        assert gate_runs(_workspace(tmp_path, runs), list(runs), ["nq"], None, 0.05, require_retrieval=False)["success"]
    assert "probing_rag/nq: 0 retrievals over 2 questions" in caplog.text and "not required" in caplog.text


def test_the_gate_reads_the_runs_settings_not_the_methods_code(tmp_path):
    """A run whose settings say it is not meant to retrieve passes without retrievals; one whose
    settings are missing fails, saying so."""
    paths = _workspace(tmp_path, {"single_step": [0, 0], "ircot": [0, 0]})
    write_json(settings_file(paths.run_file("single_step", "nq")), {"retrieves": False, "trigger": "-"})
    settings_file(paths.run_file("ircot", "nq")).unlink()
    with pytest.raises(GateFailed) as failed:
        gate_runs(paths, ["single_step", "ircot"], ["nq"], None, 0.05)
    assert "ircot/nq: no run settings say whether it is meant to retrieve" in str(failed.value)
    assert "single_step/nq: 0" not in str(failed.value)


def test_a_torn_last_trace_fails_the_gate_naming_the_run_and_is_left_to_its_run(tmp_path):
    paths = _workspace(tmp_path, {"single_step": [1, 1]})
    run_file = paths.run_file("single_step", "nq")
    torn = run_file.read_text()[:-20]  # the second trace cut off mid-line, as a kill leaves it
    run_file.write_text(torn)
    with pytest.raises(GateFailed) as failed:
        gate_runs(paths, ["single_step"], ["nq"], None, 0.05)
    assert "[coverage] expect_column_pair_values_to_be_equal" in str(failed.value)
    assert "(run: single_step/nq)" in str(failed.value)
    assert run_file.read_text() == torn  # a reader never rewrites the evaluate stage's output
