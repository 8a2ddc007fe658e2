"""Each stage's wall time, kept beside the reports so report.md and the README state what a run
cost on the machine that made it.

A stage that is interrupted and resumed (extract, train_router, train_adaptive, evaluate keep
their finished work) runs in several legs: the seconds of each stopped leg wait in the
workspace's `.skillrag/timings/` and are added to the leg that finishes, so the recorded time is
the compute the stage took, not only its last leg. Only a leg stopped by a signal or killed
counts: a run that fails (bad input, a gate, a lock another run holds) adds nothing, since what a
resumed run reuses is what the stopped legs kept. A leg killed outright (SIGKILL, a machine taken
back) cannot record itself, so a running leg writes its seconds so far beside the stopped legs
every `HEARTBEAT_S`: it counts up to its last heartbeat.

A leg that only rebuilt a cache-only output the recorded run already describes (`Leg.rebuild`:
`skillrag index` on a fresh clone) leaves the git-tracked timing file to that run: its own time
goes to the workspace's untracked log `.skillrag/rebuilds.jsonl`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillrag import interrupts
from skillrag.files import replace_text, write_json
from skillrag.paths import Paths

STOPPED = (interrupts.Interrupted, KeyboardInterrupt)  # a leg stopped by a signal: its kept work is resumed
HEARTBEAT_S = 60.0  # how often a running leg records its seconds so far: what a leg killed outright loses at most


def rebuilds_log(paths: Paths) -> Path:
    """The untracked log of rebuild legs (one JSON record per line): what rebuilding cost here."""
    return paths.root / ".skillrag" / "rebuilds.jsonl"


@dataclass
class Leg:
    """The leg being timed. `rebuild`: set by the body when it only rebuilt outputs that the
    recorded run already describes (same fingerprint): its time is logged in `rebuilds_log`."""

    rebuild: bool = False


def _device() -> str:
    """What the time was measured on: the GPU, or the CPU's model, cores, torch threads and vector
    extension (an AVX2-only CPU runs this model several times slower than one with avx512_bf16)."""
    import platform

    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")] if cpuinfo.is_file() else []
    name = names[0] if names else platform.processor() or "cpu"
    extension = torch.backends.cpu.get_cpu_capability()
    return f"{name} ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads, {extension})"


@contextmanager
def _heartbeat(beat: Callable[[], None]) -> Iterator[None]:
    """Call `beat` every `HEARTBEAT_S` while the body runs, from a thread of its own."""
    finished = threading.Event()

    def beating() -> None:
        while not finished.wait(HEARTBEAT_S):
            beat()

    thread = threading.Thread(target=beating, name="timing heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        finished.set()
        thread.join()


@contextmanager
def timed(paths: Paths, stage: str) -> Iterator[Leg]:
    """Time the body as one leg of `stage`: a leg stopped by a signal or killed is kept for later,
    one that fails is dropped; one that finishes writes the stage's total to `Paths.timing` (a
    rebuild leg: to `rebuilds_log`, the timing file untouched)."""
    legs_file = paths.stopped_legs(stage)
    earlier: list[float] = json.loads(legs_file.read_text()) if legs_file.exists() else []
    leg, started = Leg(), time.monotonic()

    def record_legs(*legs: float) -> None:
        if earlier or legs:
            replace_text(legs_file, json.dumps([*earlier, *legs]))
        else:
            legs_file.unlink(missing_ok=True)

    try:
        with _heartbeat(lambda: record_legs(time.monotonic() - started)):
            yield leg
    except STOPPED:
        record_legs(time.monotonic() - started)
        raise
    except BaseException:
        record_legs()
        raise
    legs = [*earlier, time.monotonic() - started]
    record: dict[str, Any] = {
        "stage": stage,
        "wall_s": round(sum(legs), 1),
        "legs": len(legs),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": _device(),
    }
    if leg.rebuild:
        log = rebuilds_log(paths)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**record, "rebuild": True}) + "\n")
    else:
        write_json(paths.timing(stage), record)
    legs_file.unlink(missing_ok=True)
