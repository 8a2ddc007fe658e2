"""Each stage's wall time, kept beside the reports so report.md and the README state what a run
cost on the machine that made it.

A stage that is interrupted and resumed (extract, train_router, train_adaptive, evaluate keep
their finished work) runs in several legs: the seconds of each stopped leg wait in the
workspace's `.skillrag/timings/` and are added to the leg that finishes, so the recorded time is
the compute the stage took, not only its last leg.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillrag.files import write_json
from skillrag.paths import Paths


def timing_file(paths: Paths, stage: str) -> Path:
    """`reports/timings/<stage>.json`, named as dvc.yaml names the stage (`@` written `-`)."""
    return paths.reports / "timings" / f"{stage.replace('@', '-')}.json"


def _legs_file(paths: Paths, stage: str) -> Path:
    return paths.locks.parent / "timings" / f"{stage.replace('@', '-')}.legs.json"


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
def timed(paths: Paths, stage: str) -> Iterator[None]:
    """Time the body as one leg of `stage`: a leg that raises (an interrupt included) is kept for
    later; one that finishes writes the stage's total to `timing_file`."""
    legs_file = _legs_file(paths, stage)
    earlier: list[float] = json.loads(legs_file.read_text()) if legs_file.exists() else []
    started = time.monotonic()
    try:
        yield
    except BaseException:
        legs_file.parent.mkdir(parents=True, exist_ok=True)
        legs_file.write_text(json.dumps([*earlier, time.monotonic() - started]))
        raise
    legs = [*earlier, time.monotonic() - started]
    record: dict[str, Any] = {
        "stage": stage,
        "wall_s": round(sum(legs), 1),
        "legs": len(legs),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": _device(),
    }
    write_json(timing_file(paths, stage), record)
    legs_file.unlink(missing_ok=True)
