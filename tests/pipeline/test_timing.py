import json

import pytest

from skillrag.paths import Paths
from skillrag.pipeline.timing import timed, timing_file


class Stopped(Exception):
    pass


def test_a_finished_stage_records_its_wall_time(tmp_path):
    paths = Paths(tmp_path)
    with timed(paths, "evaluate-skill_rag"):
        pass
    record = json.loads(timing_file(paths, "evaluate-skill_rag").read_text())
    assert timing_file(paths, "evaluate-skill_rag").name == "evaluate-skill_rag.json"
    assert record["stage"] == "evaluate-skill_rag"
    assert record["legs"] == 1
    assert 0 <= record["wall_s"] < 60
    assert record["device"]


def test_an_interrupted_leg_is_added_to_the_leg_that_finishes(tmp_path, monkeypatch):
    clock = iter([0.0, 100.0, 1000.0, 1030.0, 2000.0, 2005.0])  # legs of 100 s (stopped), 30 s, then 5 s
    monkeypatch.setattr("skillrag.pipeline.timing.time.monotonic", lambda: next(clock))
    paths = Paths(tmp_path)
    with pytest.raises(Stopped), timed(paths, "extract"):
        raise Stopped
    assert not timing_file(paths, "extract").exists()
    with timed(paths, "extract"):
        pass
    record = json.loads(timing_file(paths, "extract").read_text())
    assert (record["wall_s"], record["legs"]) == (130.0, 2)
    with timed(paths, "extract"):  # the next run starts afresh
        pass
    assert json.loads(timing_file(paths, "extract").read_text())["legs"] == 1
