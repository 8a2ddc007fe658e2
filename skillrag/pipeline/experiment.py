"""A stage run inside a temporary DVC experiment copy (`skillrag exp`, i.e. `dvc exp run --temp`).

The copy holds the baseline commit's resumable traces, made with the params the experiment changes,
which the resume guard (skillrag.eval.runner) would refuse as "traces run with other settings". DVC
names the stage (DVC_STAGE) and the experiment (DVC_EXP_NAME) and points DVC_ROOT at the user's own
project, which is never touched: only a copy elsewhere is."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from skillrag.registry import STAGES


def start_afresh(root: Path, env: Mapping[str, str] = os.environ) -> list[str]:
    """Clear the running stage's persistent outputs under `root` when `root` is an experiment copy;
    returns the paths cleared (none outside an experiment, or in the user's own project)."""
    stage, experiment, home = (env.get(name) for name in ("DVC_STAGE", "DVC_EXP_NAME", "DVC_ROOT"))
    if not (stage and experiment and home) or root.resolve() == Path(home).resolve():
        return []
    entry = STAGES.get(stage.rsplit(":", 1)[-1])
    cleared = [out.path for out in (entry.outs if entry else ()) if out.persist and (root / out.path).exists()]
    for path in cleared:
        shutil.rmtree(root / path)
    return cleared
