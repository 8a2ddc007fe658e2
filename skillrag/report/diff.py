"""What a change did to every number: DVC's own `dvc metrics diff --md` (and `dvc params diff
--md`) between a git ref and the workspace, run in the project.

A comparison that cannot be made (no git repository, an unknown ref, no dvc) is reported as a
sentence saying why, never as an error: the report must still be written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _dvc() -> str:
    """The dvc of this interpreter's environment (a venv need not be activated), else PATH's."""
    beside = Path(sys.executable).parent / "dvc"
    return str(beside) if beside.exists() else "dvc"


def dvc_diff(root: Path, kind: str, against: str) -> str:
    """`dvc <kind> diff --md <against>` in `root` (kind: metrics | params): the markdown table,
    a line saying nothing changed, or a line saying why no comparison was made."""
    try:
        done = subprocess.run(
            [_dvc(), kind, "diff", "--md", *(["--precision", "4"] if kind == "metrics" else []), against],
            cwd=root, capture_output=True, text=True, timeout=300, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"_No {kind} comparison with `{against}`: {err}._"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["dvc failed"])[-1]
        return f"_No {kind} comparison with `{against}`: {reason}_"
    table = done.stdout.strip()
    return table or f"_No {kind} changed against `{against}`._"


def change_section(root: Path, against: str) -> str:
    """The body of "Change against the base": metrics, then params, against `against`."""
    return (
        f"`dvc metrics diff --md {against}` (the workspace's metrics against the ones committed at `{against}`; "
        "only changed values are listed):\n\n"
        + dvc_diff(root, "metrics", against)
        + f"\n\n`dvc params diff --md {against}`:\n\n"
        + dvc_diff(root, "params", against)
    )
