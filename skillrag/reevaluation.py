"""Scheduled re-evaluation (flows/reevaluate.py): bring the artifacts up to date with DVC, re-run
the evaluation and what follows it, and compare every headline metric with the committed
reports/metrics.json, so a silent regression (a library upgrade, another machine, a changed
input) fails the run and names the metric.

Quality metrics (EM, ACC, F1) regress when they fall, the no-answer rate when it rises; costs
(retrievals, LLM calls) and counts are compared and shown but never fail a run. A (method,
dataset, metric) that was committed and is now missing is a regression too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HIGHER_IS_BETTER = ("em", "acc", "f1")
LOWER_IS_BETTER = ("no_answer_rate",)
METRICS = "reports/metrics.json"


@dataclass(frozen=True)
class Change:
    """One metric, `method/dataset/name`, before (committed) and after (this run)."""

    key: str
    before: float | None
    after: float | None

    @property
    def worse_by(self) -> float:
        """How much worse the metric got (negative: better; 0 for costs and counts)."""
        name = self.key.rsplit("/", 1)[-1]
        if self.before is None or self.after is None:
            return 0.0
        if name in HIGHER_IS_BETTER:
            return self.before - self.after
        if name in LOWER_IS_BETTER:
            return self.after - self.before
        return 0.0

    def regressed(self, tolerance: float) -> bool:
        return (self.before is not None and self.after is None) or self.worse_by > tolerance

    def describe(self) -> str:
        if self.after is None:
            return f"{self.key}: committed {self.before}, now missing"
        return f"{self.key}: {self.before} -> {self.after} (worse by {self.worse_by:.4f})"


class Regression(RuntimeError):
    """Metrics got worse than committed by more than the tolerance; str() names each one."""


def flat(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """{"method": {"dataset": {"acc": 0.5}}} -> {"method/dataset/acc": 0.5} (numbers only)."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            out.update(flat(value, f"{prefix}{key}/"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = float(value)
    return out


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Every metric of either side, in a stable order."""
    old, new = flat(before), flat(after)
    return [Change(key, old.get(key), new.get(key)) for key in sorted(old.keys() | new.keys())]


def table(changes: list[Change], tolerance: float) -> list[dict[str, Any]]:
    """One row per metric, as the flow's table artifact shows it."""
    return [
        {"metric": c.key, "committed": c.before, "now": c.after, "worse_by": c.worse_by, "regressed": c.regressed(tolerance)}
        for c in changes
    ]


def check(changes: list[Change], tolerance: float) -> None:
    """Raise `Regression` naming every metric worse by more than `tolerance`."""
    worse = [change for change in changes if change.regressed(tolerance)]
    if worse:
        lines = "; ".join(change.describe() for change in worse)
        raise Regression(f"{len(worse)} metric(s) worse than committed by more than {tolerance}: {lines}")


def committed_metrics(project: Path, ref: str) -> dict[str, Any]:
    """reports/metrics.json as committed at `ref` (git show), e.g. HEAD or origin/main."""
    done = subprocess.run(
        ["git", "show", f"{ref}:{METRICS}"], cwd=project, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise FileNotFoundError(f"no committed {METRICS} at {ref!r} in {project}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def _dvc(project: Path, *args: str) -> str:
    """Run dvc (and the stages' `skillrag` commands) from this interpreter's environment."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["dvc", *args], cwd=project, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`dvc {' '.join(args)}` failed in {project}: {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


def bring_up_to_date(project: Path, force_evaluate: bool = True, set_params: Sequence[str] = ()) -> list[str]:
    """`dvc pull` when a remote is configured, `dvc repro` of whatever changed, then (when
    `force_evaluate`) evaluate and every stage after it again even if nothing changed.
    `set_params` (e.g. lm.device=cuda): run as `dvc exp run -S ...` instead, since `dvc repro`
    reads params.yaml only (the values are written to params.yaml, as exp run does). Returns
    the dvc commands run."""
    run = ["exp", "run", *(arg for value in set_params for arg in ("-S", value))] if set_params else ["repro"]
    commands = []
    if _dvc(project, "remote", "list").strip():
        commands.append(["pull", "--allow-missing"])
    commands.append(run)
    if force_evaluate:
        commands.append([*run, "--force", "--downstream", "evaluate"])
    for command in commands:
        _dvc(project, *command)
    return [" ".join(["dvc", *command]) for command in commands]
