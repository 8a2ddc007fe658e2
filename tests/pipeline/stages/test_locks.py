"""Every stage holds its workspace lock: while another process holds a stage's lock, a second run
of that stage stops at once, naming the holder, and does no work."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from skillrag import cli
from skillrag.config import load_params
from skillrag.files import WorkspaceBusy
from skillrag.paths import Paths
from skillrag.pipeline.stages import STAGES
from tests.conftest import REPO
from tests.fake_cli import make_workspace

# Holds the lock of every stage named on its command line until its stdin closes.
HOLDER = """
import sys
from contextlib import ExitStack
from pathlib import Path
from skillrag.files import exclusive
with ExitStack() as held:
    for lock in sys.argv[1:]:
        held.enter_context(exclusive(lock, Path(lock).stem))
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def held(tmp_path) -> Iterator[tuple[Paths, subprocess.Popen]]:
    """A workspace whose every stage lock another process holds."""
    paths = Paths(make_workspace(tmp_path / "ws"))
    locks = [str(paths.locks / f"{stage.command}.lock") for stage in STAGES.values()]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *locks], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    yield paths, holder
    holder.stdin.close()
    holder.wait(timeout=30)


def test_every_stage_refuses_to_run_while_another_process_holds_its_lock(held):
    paths, holder = held
    params = load_params(paths.root / "params.yaml")
    before = sorted(p.relative_to(paths.root) for p in paths.root.rglob("*") if ".skillrag" not in p.parts)
    for stage in STAGES.values():
        with pytest.raises(WorkspaceBusy, match=rf"`skillrag {stage.command}` is already running on this workspace \(pid {holder.pid}: "):
            stage(params, paths)
    assert sorted(p.relative_to(paths.root) for p in paths.root.rglob("*") if ".skillrag" not in p.parts) == before


def test_a_second_train_probe_stops_with_one_line_naming_the_holder(held, monkeypatch, capsys):
    paths, holder = held
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(paths.root / "params.yaml"), "train-probe"])
    with pytest.raises(SystemExit) as info:
        cli.run()
    err = capsys.readouterr().err
    assert info.value.code == 1 and len(err.strip().splitlines()) == 1
    assert f"error: `skillrag train-probe` is already running on this workspace (pid {holder.pid}: " in err


def test_a_refused_run_adds_no_leg_to_the_stage_timing(held):
    paths, _ = held
    params = load_params(paths.root / "params.yaml")
    with pytest.raises(WorkspaceBusy):
        STAGES["summarize"](params, paths)
    assert not list((paths.root / ".skillrag").rglob("*.legs.json"))
