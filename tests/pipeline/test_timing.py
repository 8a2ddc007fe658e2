import json
import subprocess
import sys
import time

import pytest

from skillrag.interrupts import Interrupted
from skillrag.paths import Paths
from skillrag.pipeline.timing import rebuilds_log, timed


class Stopped(Exception):
    pass


def test_a_finished_stage_records_its_wall_time(tmp_path):
    paths = Paths(tmp_path)
    with timed(paths, "evaluate-skill_rag"):
        pass
    record = json.loads(paths.timing("evaluate-skill_rag").read_text())
    assert paths.timing("evaluate-skill_rag").name == "evaluate-skill_rag.json"
    assert record["stage"] == "evaluate-skill_rag"
    assert record["legs"] == 1
    assert 0 <= record["wall_s"] < 60
    assert record["device"]


def test_an_interrupted_leg_is_added_to_the_leg_that_finishes(tmp_path, monkeypatch):
    clock = iter([0.0, 100.0, 1000.0, 1030.0, 2000.0, 2005.0])  # legs of 100 s (stopped), 30 s, then 5 s
    monkeypatch.setattr("skillrag.pipeline.timing.time.monotonic", lambda: next(clock))
    paths = Paths(tmp_path)
    with pytest.raises(Interrupted), timed(paths, "extract"):
        raise Interrupted(15)
    assert not paths.timing("extract").exists()
    with timed(paths, "extract"):
        pass
    record = json.loads(paths.timing("extract").read_text())
    assert (record["wall_s"], record["legs"]) == (130.0, 2)
    with timed(paths, "extract"):  # the next run starts afresh
        pass
    assert json.loads(paths.timing("extract").read_text())["legs"] == 1


def test_a_failed_leg_adds_no_leg_to_the_next_run(tmp_path):
    paths = Paths(tmp_path)
    for _ in range(4):
        with pytest.raises(ValueError), timed(paths, "summarize"):
            raise ValueError("bad input")
    with timed(paths, "summarize"):
        pass
    assert json.loads(paths.timing("summarize").read_text())["legs"] == 1


def test_a_rebuild_leg_leaves_the_recorded_timing_and_logs_its_own_time(tmp_path):
    paths = Paths(tmp_path)
    paths.timing("index").parent.mkdir(parents=True)
    paths.timing("index").write_text('{"stage": "index", "wall_s": 865.0}')
    with timed(paths, "index") as leg:
        leg.rebuild = True
    assert paths.timing("index").read_text() == '{"stage": "index", "wall_s": 865.0}'
    (logged,) = [json.loads(line) for line in rebuilds_log(paths).read_text().splitlines()]
    assert logged["stage"] == "index" and logged["rebuild"] is True


def test_a_leg_killed_outright_counts_to_its_last_heartbeat(tmp_path):
    """SIGKILL (or a machine taken back) gives the leg no chance to record itself: its heartbeat
    did, so the leg that finishes the stage adds the killed leg's seconds."""
    leg = (
        "import sys, time\nfrom pathlib import Path\n"
        "from skillrag.paths import Paths\n"
        "from skillrag.pipeline import timing\n"
        "timing.HEARTBEAT_S = 0.1\n"
        "with timing.timed(Paths(Path(sys.argv[1])), 'extract'):\n"
        "    time.sleep(60)\n"
    )
    paths = Paths(tmp_path)
    legs_file = paths.stopped_legs("extract")
    running = subprocess.Popen([sys.executable, "-c", leg, str(tmp_path)])
    try:
        deadline = time.monotonic() + 60
        while not (legs_file.exists() and json.loads(legs_file.read_text())[-1] >= 0.3):
            assert time.monotonic() < deadline and running.poll() is None, "the running leg never beat"
            time.sleep(0.05)
    finally:
        running.kill()
        running.wait()
    [killed] = json.loads(legs_file.read_text())
    with timed(paths, "extract"):
        pass
    record = json.loads(paths.timing("extract").read_text())
    assert record["legs"] == 2 and record["wall_s"] >= round(killed, 1) >= 0.3
    assert not legs_file.exists()
