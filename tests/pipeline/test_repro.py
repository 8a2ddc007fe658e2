"""`skillrag repro` on a real git + DVC project of six tiny stages shaped like the pipeline's: a
non-reproducible cache-only index read through a fingerprint (`meta: {needs: [data/index]}`),
extract's cache-only vectors that only `probe` reads, a resumable `evaluate` writing one trace
line per question into its git-tracked, persistent output, and a summary.

A new machine is a `git clone` (no DVC cache, no remote): it runs only what is left, rebuilding the
index, never the vectors; a SIGTERM mid-evaluate leaves its partial traces committed and a fresh
clone finishes them as one uninterrupted run would; a budget too short for extract + probe starts
neither."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from skillrag.errors import ConfigError
from skillrag.pipeline.repro import Runner, StageFailed, deadline_of, parse_duration
from skillrag.report.readme import BEGIN, END, results_block

STEP = '''
import json, os, pathlib, signal, sys, time
from skillrag.paths import Paths
from skillrag.interrupts import Interrupted
from skillrag.pipeline.timing import timed
def stop(signum, _):  # as a real stage: it finishes the item in flight, then keeps its stopped leg
    time.sleep(0.5)
    raise Interrupted(signum)
signal.signal(signal.SIGTERM, stop)
stage, started = sys.argv[1], time.monotonic()
P = pathlib.Path
def write(path, text):
    P(path).parent.mkdir(parents=True, exist_ok=True)
    P(path).write_text(text)
def record(stage, wall_s):  # as skillrag.pipeline.timing writes it
    return json.dumps({"stage": stage, "wall_s": wall_s, "legs": 1, "device": "test", "finished": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())})
questions = P("data/questions.txt").read_text().split() if stage != "prepare" else []
if stage == "prepare":
    write("data/questions.txt", "".join(f"q{i}\\n" for i in range(int(P("src.txt").read_text()))))
elif stage == "index":  # random bytes, like Lucene's segment ids; the fingerprint is deterministic
    write("data/index/segment", os.urandom(8).hex())
    write("data/fingerprint.json", json.dumps({"docs": len(questions)}))
elif stage == "extract":
    assert P("data/index/segment").exists(), "extract reads the index"
    write("data/rows.txt", "".join(q.upper() + "\\n" for q in questions))
    write("data/vectors/v", "".join(f"{len(q)}\\n" for q in questions))
elif stage == "probe":
    write("data/probe.txt", str(len(P("data/vectors/v").read_text().split())) + " " + P("data/rows.txt").read_text()[:2])
elif stage == "evaluate":  # resumable: one line per question, a truncated last line dropped
    assert P("data/index/segment").exists(), "evaluate reads the index"
    out = P("data/runs/traces.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = out.read_text().splitlines(keepends=True) if out.exists() else []
    lines = [line for line in lines if line.endswith("\\n")]
    out.write_text("".join(lines))
    probe = P("data/probe.txt").read_text()
    try:
        with timed(Paths(P(".").resolve()), stage), out.open("a") as handle:
            for q in questions[len(lines):]:
                time.sleep(float(os.environ.get("STEP_DELAY", "0")))
                handle.write(json.dumps({"q": q, "a": q.upper(), "probe": probe}) + "\\n")
                handle.flush()
                if os.environ.get("STEP_FAIL") == stage:  # a crash after one more trace
                    sys.exit(3)
    except Interrupted as stopped:  # the CLI's exit status for a signal
        sys.exit(stopped.exit_code)
elif stage == "summarize":
    write("reports/summary.json", json.dumps({"traces": len(P("data/runs/traces.jsonl").read_text().splitlines())}))
if stage not in ("evaluate", "summarize"):  # evaluate's is written by timed, over all its legs
    write(f"reports/timings/{stage}.json", record(stage, round(time.monotonic() - started, 3)))
'''


def _timed(*outs: str) -> list:
    """dvc.yaml outs: git-tracked (`cache: false`), or cache-only when written `!path`."""
    return [out[1:] if out.startswith("!") else {out: {"cache": False}} for out in outs]


PIPELINE = {
    "stages": {
        "prepare": {"cmd": "python step.py prepare", "deps": ["src.txt"],
                    "outs": _timed("data/questions.txt", "reports/timings/prepare.json")},
        "index": {"cmd": "python step.py index", "deps": ["data/questions.txt"],
                  "outs": _timed("!data/index", "data/fingerprint.json", "reports/timings/index.json")},
        "extract": {"cmd": "python step.py extract", "deps": ["data/questions.txt", "data/fingerprint.json"],
                    "meta": {"needs": ["data/index"]},
                    "outs": _timed("!data/vectors", "data/rows.txt", "reports/timings/extract.json")},
        "probe": {"cmd": "python step.py probe", "deps": ["data/rows.txt", "data/vectors"],
                  "outs": _timed("data/probe.txt", "reports/timings/probe.json")},
        "evaluate": {"cmd": "python step.py evaluate", "deps": ["data/questions.txt", "data/fingerprint.json", "data/probe.txt"],
                     "meta": {"needs": ["data/index"]},
                     "outs": [{"data/runs": {"cache": False, "persist": True}}, {"reports/timings/evaluate.json": {"cache": False}}]},
        "summarize": {"cmd": "python step.py summarize", "deps": ["data/runs"], "outs": _timed("reports/summary.json")},
    }
}
AFTER_PROBE = ["evaluate", "summarize"]
LEGS = ".skillrag/timings/evaluate.legs.json"  # skillrag.pipeline.timing: a stopped leg's seconds


def _sh(cwd: Path, *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True, **kwargs)


@pytest.fixture(autouse=True)
def _environment(monkeypatch):
    """Git identity, and `dvc`/`skillrag` from this interpreter's environment."""
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.com")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STEP_DELAY", "0")


def make_project(root: Path, questions: int = 6) -> Path:
    """The six-stage project, committed, nothing run yet."""
    root.mkdir(parents=True)
    _sh(root, "git", "init", "-q")
    _sh(root, "dvc", "init", "-q")
    (root / "step.py").write_text(STEP)
    (root / ".gitignore").write_text("/.skillrag/*\n!/.skillrag/timings/\n")  # as the project's own
    (root / "src.txt").write_text(str(questions))
    (root / "dvc.yaml").write_text(yaml.safe_dump(PIPELINE, sort_keys=False))
    _sh(root, "git", "add", ".")
    _sh(root, "git", "commit", "-q", "-m", "project")
    return root


def _clone(project: Path, into: Path) -> Path:
    _sh(project.parent, "git", "clone", "-q", str(project), str(into))
    return into


def _messages(project: Path) -> list[str]:
    return _sh(project, "git", "log", "--format=%s").stdout.splitlines()


def _committed_traces(project: Path) -> list[str]:
    shown = subprocess.run(["git", "show", "HEAD:data/runs/traces.jsonl"], check=False, cwd=project, capture_output=True, text=True)
    return shown.stdout.splitlines()


def _lock_outs(project: Path, stage: str) -> dict[str, str]:
    return {out["path"]: out["md5"] for out in yaml.safe_load((project / "dvc.lock").read_text())["stages"][stage]["outs"]}


def _quiet(line: str) -> None:
    """Progress lines a test does not read."""


def test_a_new_machine_runs_only_the_stages_left_and_rebuilds_the_index_not_the_vectors(tmp_path):
    project = make_project(tmp_path / "project")
    assert Runner(project, targets=["probe"], echo=_quiet).run() == ["prepare", "index", "extract", "probe"]
    assert [m.split(" (")[0] for m in _messages(project)[:4]] == [f"run: stage {s} finished" for s in ("probe", "extract", "index", "prepare")]
    assert _sh(project, "git", "status", "--porcelain", "--", "dvc.lock", "data/probe.txt", "reports").stdout == ""

    clone = _clone(project, tmp_path / "clone")
    assert not (clone / "data" / "index").exists() and not (clone / ".dvc" / "cache").exists()
    dry = _sh(clone, "skillrag", "repro", "--dry").stdout.splitlines()
    assert dry[:4] == ["prepare: done", "index: done", "extract: done", "probe: done"]
    assert dry[4].startswith("evaluate: pending") and "would rebuild data/index via index" in dry[4]
    assert dry[5].startswith("summarize: pending")
    assert not any("vectors" in line for line in dry)  # its only consumer is done: nothing rebuilds it

    said: list[str] = []
    index_lock = _lock_outs(clone, "index")
    assert Runner(clone, echo=said.append).run() == AFTER_PROBE  # extract and probe stay done after the rebuild
    assert any("rebuilding it with index" in line for line in said)
    rebuilt = _lock_outs(clone, "index")
    assert rebuilt.pop("data/index") != index_lock.pop("data/index")  # other bytes, the same fingerprint:
    assert rebuilt == index_lock  # fingerprint and the original run's wall time as committed
    assert all(step.state == "done" for step in Runner(clone).plan())
    assert json.loads((clone / "reports" / "summary.json").read_text()) == {"traces": 6}


def test_sigterm_commits_the_partial_traces_and_a_fresh_clone_finishes_them_as_one_run_would(tmp_path, monkeypatch):
    whole = make_project(tmp_path / "whole", questions=12)
    Runner(whole, echo=_quiet).run()
    project = make_project(tmp_path / "project", questions=12)
    Runner(project, targets=["probe"], echo=_quiet).run()

    monkeypatch.setenv("STEP_DELAY", "0.4")
    runner = subprocess.Popen(["skillrag", "repro", "--checkpoint", "1s"], cwd=project, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    # A checkpoint committed while it runs, with a trace in it (on a slow machine the first one can
    # come before the stage has written any).
    while not (any("checkpoint" in m for m in _messages(project)) and _committed_traces(project)):
        assert runner.poll() is None and time.monotonic() < deadline, runner.communicate()[0]
        time.sleep(0.2)
    checkpointed = len(_committed_traces(project))
    runner.send_signal(signal.SIGTERM)
    out = runner.communicate(timeout=120)[0]
    assert runner.returncode == 143, out
    assert "evaluate: interrupted; its partial outputs are committed" in out
    committed = _committed_traces(project)
    assert checkpointed <= len(committed) < 12
    assert _sh(project, "git", "status", "--porcelain", "--", "data/runs").stdout == ""
    assert "evaluate" not in yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    stopped_legs = json.loads(_sh(project, "git", "show", f"HEAD:{LEGS}").stdout)  # its wall time so far
    assert len(stopped_legs) == 1 and stopped_legs[0] > 0

    monkeypatch.setenv("STEP_DELAY", "0")
    clone = _clone(project, tmp_path / "clone")
    assert Runner(clone, echo=_quiet).run() == AFTER_PROBE
    for finished in ("data/runs/traces.jsonl", "reports/summary.json", "data/probe.txt"):
        assert (clone / finished).read_bytes() == (whole / finished).read_bytes(), finished
    assert (clone / "data/runs/traces.jsonl").read_text().splitlines()[: len(committed)] == committed
    timing = json.loads((clone / "reports/timings/evaluate.json").read_text())
    assert timing["legs"] == 2 and timing["wall_s"] >= round(stopped_legs[0], 1)  # both machines' legs
    assert _sh(clone, "git", "ls-files", LEGS).stdout == ""  # the finishing commit removed the stopped legs


def test_a_project_that_ignores_the_legs_file_still_commits_a_stopped_stage(tmp_path, monkeypatch):
    project = make_project(tmp_path / "project", questions=40)
    (project / ".gitignore").write_text("/.skillrag/\n")  # as projects did before the legs were carried
    _sh(project, "git", "commit", "-qam", "ignore .skillrag")
    Runner(project, targets=["probe"], echo=_quiet).run()
    monkeypatch.setenv("STEP_DELAY", "0.3")
    runner = Runner(project, deadline=datetime.now(UTC) + timedelta(seconds=70), margin_s=60, checkpoint_s=1, echo=_quiet)
    assert runner.run() == ["evaluate"]
    assert _sh(project, "git", "show", "HEAD:data/runs/traces.jsonl").stdout  # partial traces committed
    assert (project / LEGS).is_file() and _sh(project, "git", "ls-files", LEGS).stdout == ""  # the legs stay here


def _record_times(project: Path, **seconds: float) -> None:
    for stage, wall_s in seconds.items():
        (project / "reports" / "timings" / f"{stage}.json").write_text(
            json.dumps({"stage": stage, "wall_s": wall_s, "legs": 1, "device": "earlier", "finished": "2026-01-01T00:00:00"})
        )


def test_a_budget_too_short_for_extract_and_probe_starts_neither(tmp_path):
    project = make_project(tmp_path / "project")
    Runner(project, targets=["index"], echo=_quiet).run()
    _record_times(project, extract=40 * 60, probe=10 * 60, evaluate=2 * 3600, summarize=5)  # an earlier machine's

    said: list[str] = []
    short = Runner(project, deadline=datetime.now(UTC) + timedelta(minutes=45), margin_s=60, echo=said.append)
    assert short.run() == []
    assert any("extract + probe need ~50.0 min" in line and "not started" in line for line in said), said
    assert not (project / "data" / "rows.txt").exists()
    dry = Runner(project, deadline=datetime.now(UTC) + timedelta(minutes=45), margin_s=60).describe()
    assert "extract + probe need ~50.0 min" in dry[2] and dry[3].endswith("not in this budget")

    roomy = Runner(project, deadline=datetime.now(UTC) + timedelta(minutes=80), margin_s=60, echo=said.append)
    dry = roomy.describe()
    assert "extract runs together with probe in one job (data/vectors: cache-only" in dry[2]
    assert "evaluate needs ~120.0 min" in dry[4] and "it starts, and is stopped before the deadline" in dry[4]
    assert dry[5].endswith("not in this budget")  # evaluate takes what is left


def test_a_stage_without_a_recorded_time_is_estimated_at_the_largest_and_a_changed_input_makes_it_pending(tmp_path):
    project = make_project(tmp_path / "project")
    Runner(project, targets=["prepare"], echo=_quiet).run()
    _record_times(project, index=30)
    dry = Runner(project).describe()
    assert dry[0] == "prepare: done"
    assert dry[2].startswith("extract: pending, ~0.5 min (no recorded time: the largest recorded taken)")
    (project / "src.txt").write_text("7")
    assert Runner(project).describe()[0].startswith("prepare: pending, ")


def _add_stage(project: Path, name: str, dep: str, position: int) -> None:
    """A stage `name` reading `dep`, written at `position` in dvc.yaml, committed."""
    pipeline = yaml.safe_load((project / "dvc.yaml").read_text())
    stages = list(pipeline["stages"].items())
    stage = {"cmd": f"python step.py {name}", "deps": [dep], "outs": _timed(f"reports/timings/{name}.json")}
    pipeline["stages"] = dict([*stages[:position], (name, stage), *stages[position:]])
    (project / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    _sh(project, "git", "commit", "-qam", f"stage {name}")


def test_a_stage_that_does_not_fit_leaves_the_time_to_a_later_one_that_does_not_need_it(tmp_path):
    project = make_project(tmp_path / "project")
    _add_stage(project, "classify", "data/questions.txt", position=6)  # listed last, needs only the questions
    Runner(project, targets=["index"], echo=_quiet).run()
    _record_times(project, extract=40 * 60, probe=10 * 60, evaluate=2 * 3600, summarize=5, classify=60)
    deadline = datetime.now(UTC) + timedelta(minutes=45)
    dry = Runner(project, deadline=deadline, margin_s=60).describe()
    assert "extract + probe need ~50.0 min" in dry[2] and all(line.endswith("not in this budget") for line in dry[3:6])
    assert dry[6].startswith("classify: pending") and "not" not in dry[6]
    assert Runner(project, deadline=deadline, margin_s=60, echo=_quiet).run() == ["classify"]


def test_targets_run_with_what_they_depend_on_and_nothing_else(tmp_path):
    project = make_project(tmp_path / "project")
    _add_stage(project, "classify", "data/rows.txt", position=4)  # listed before evaluate, which does not need it
    dry = Runner(project, targets=["evaluate"]).describe()
    assert [line.split(":")[0] for line in dry] == ["prepare", "index", "extract", "probe", "evaluate"]
    said: list[str] = []
    assert Runner(project, targets=["evaluate"], echo=said.append).run() == ["prepare", "index", "extract", "probe", "evaluate"]
    assert said[-1] == "evaluate and what it depends on: done"
    assert Runner(project, echo=_quiet).run() == ["classify", "summarize"]
    with pytest.raises(ConfigError, match="no stage 'nosuch' in dvc.yaml"):
        Runner(project, targets=["nosuch"]).plan()


def test_durations_and_deadlines():
    assert parse_duration("2h30m") == 9000 and parse_duration("20m") == 1200 and parse_duration("90s") == 90
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert deadline_of("1h", None, now) == now + timedelta(hours=1)
    assert deadline_of(None, "14:30", now) == now.replace(hour=14, minute=30)
    assert deadline_of(None, "11:00", now) == now.replace(hour=11) + timedelta(days=1)  # tomorrow's
    assert deadline_of(None, None, now) is None
    for bad in ("", "2x", "1h 30"):
        with pytest.raises(ConfigError):
            parse_duration(bad)
    with pytest.raises(ConfigError):
        deadline_of("1h", "14:00", now)


def test_a_resumable_stage_is_stopped_before_the_deadline_with_its_partial_outputs_committed(tmp_path, monkeypatch):
    project = make_project(tmp_path / "project", questions=40)
    Runner(project, targets=["probe"], echo=_quiet).run()
    _record_times(project, evaluate=3600)  # far more than is left: it may start only because a checkpoint fits
    monkeypatch.setenv("STEP_DELAY", "0.3")
    said: list[str] = []
    runner = Runner(project, deadline=datetime.now(UTC) + timedelta(seconds=70), margin_s=60, checkpoint_s=1, echo=said.append)
    assert runner.run() == ["evaluate"]
    assert any("it starts, and is stopped before the deadline" in line for line in said), said
    assert any(line.startswith("evaluate: stopped for the deadline") for line in said), said
    committed = _sh(project, "git", "show", "HEAD:data/runs/traces.jsonl").stdout
    assert committed == (project / "data/runs/traces.jsonl").read_text()  # every trace written is in git
    assert 0 < len(committed.splitlines()) < 40
    assert "evaluate" not in yaml.safe_load((project / "dvc.lock").read_text())["stages"]


def test_a_failed_stage_commits_its_partial_outputs_and_leaves_the_last_finished_products(tmp_path, monkeypatch):
    """A stage that starts removes its outputs, its timing record among them. The commit that keeps
    a failed resumable stage's partial traces carries only what resumes it: the last finished run's
    other products, its timing (what the next estimate reads) and the README block showing them stay
    committed, consistent, until the stage finishes."""
    project = make_project(tmp_path / "project")
    (project / "README.md").write_text(f"# tiny\n\n{BEGIN}\n{END}\n")
    _sh(project, "git", "add", "README.md")
    _sh(project, "git", "commit", "-q", "-m", "readme")
    Runner(project, echo=_quiet).run()
    (project / "src.txt").write_text("7")
    _sh(project, "git", "commit", "-q", "-am", "one more question")
    Runner(project, targets=["probe"], echo=_quiet).run()
    finished = {path: _sh(project, "git", "show", f"HEAD:{path}").stdout for path in ("README.md", "reports/timings/evaluate.json")}
    assert "| evaluate |" in finished["README.md"]

    monkeypatch.setenv("STEP_FAIL", "evaluate")
    with pytest.raises(StageFailed):
        Runner(project, echo=_quiet).run()
    assert _messages(project)[0] == "run: stage evaluate failed, partial outputs kept"
    assert not (project / "reports" / "timings" / "evaluate.json").exists()  # removed as it started, not committed
    assert {path: _sh(project, "git", "show", f"HEAD:{path}").stdout for path in finished} == finished
    committed = tmp_path / "committed"
    committed.mkdir()
    subprocess.run(f"git archive HEAD reports | tar -x -C {committed}", shell=True, check=True, cwd=project)
    readme = finished["README.md"]
    assert readme[readme.index(BEGIN):readme.index(END) + len(END)] == results_block(committed / "reports")
    assert "evaluate: pending, ~" in "\n".join(Runner(project).describe())  # estimated from the committed record
    assert "no recorded time" not in next(line for line in Runner(project).describe() if line.startswith("evaluate:"))


def test_a_changed_command_makes_a_stage_pending_and_a_git_ignored_output_is_refused_before_it_runs(tmp_path):
    project = make_project(tmp_path / "project")
    Runner(project, targets=["prepare"], echo=_quiet).run()
    pipeline = yaml.safe_load((project / "dvc.yaml").read_text())
    pipeline["stages"]["prepare"]["cmd"] = "python step.py prepare  # again"
    (project / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    assert Runner(project).plan()[0].state == "pending"
    (project / ".gitignore").write_text("/data/questions.txt\n")
    with pytest.raises(ConfigError, match="data/questions.txt is git-ignored"):
        Runner(project, echo=_quiet).run()


def test_an_output_dvc_yaml_lists_and_dvc_lock_does_not_is_named_as_the_reason_to_run(tmp_path):
    project = make_project(tmp_path / "project")
    Runner(project, targets=["prepare"], echo=_quiet).run()
    pipeline = yaml.safe_load((project / "dvc.yaml").read_text())
    pipeline["stages"]["prepare"]["outs"].append({"data/extra.json": {"cache": False}})
    (project / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    prepare, index = Runner(project).plan()[:2]
    assert (prepare.state, prepare.why) == ("pending", "dvc.lock does not record its data/extra.json")
    assert index.why == "never run here (no dvc.lock entry)"


def test_a_stage_runs_in_its_own_process_group_in_the_callers_session(tmp_path):
    """Its own group, so a stop signal reaches all it started; the caller's session, so it shares the
    caller's scheduling group and priority (Linux autogroups are per session: `nice skillrag repro`)."""
    project = make_project(tmp_path / "project")
    pipeline = yaml.safe_load((project / "dvc.yaml").read_text())
    ids = "import json, os; open('ids.json', 'w').write(json.dumps([os.getsid(0), os.getpgid(0)]))"
    pipeline["stages"]["prepare"]["cmd"] = f'python -c "{ids}" && python step.py prepare'
    (project / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    _sh(project, "git", "commit", "-q", "-am", "prepare records its session and group")
    Runner(project, targets=["prepare"], echo=_quiet).run()
    session, group = json.loads((project / "ids.json").read_text())
    assert session == os.getsid(0)
    assert group not in (os.getpgid(0), session)
