"""Scheduled re-evaluation (flows/reevaluate.py): bring the artifacts up to date (`skillrag repro`'s
runner), then judge the new per-question outcomes against the committed reports/outcomes.csv on the same
questions, so that noise (a few flipped questions) stays quiet and a real change fails the run.

Two alarms, told apart:

- **regression**: for ACC, EM and the no-answer rate, per method over all datasets and per
  dataset, a one-sided exact McNemar test (skillrag.report.paired) that the outcomes got worse,
  significant at `reevaluate.alpha` after Holm's correction over every test of the run; and a
  committed question with no outcome now.
- **non-deterministic**: outcomes of a run changed although every input digest its settings
  file records (model and dtype, questions, index, prober, prompts, the params the method reads)
  and the device are those of the traces it replaced. Re-running on unchanged inputs on one
  machine must reproduce every outcome, so this is a bug, not a regression.

A run on another device (CPU vs GPU) is compared like any other; the result says the device changed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from statsmodels.stats.multitest import multipletests

from skillrag.pipeline.repro import Runner, apply_params
from skillrag.report.outcomes import COLUMNS, KEY, read_outcomes
from skillrag.report.paired import outcome_changes

TESTED = ("acc", "em", "no_answer")
OUTCOMES = "reports/outcomes.csv"
CORRECTION = "holm"
PROVENANCE = "provenance"


class Regression(RuntimeError):
    """Outcomes got significantly worse than committed; str() names each test."""


class NonDeterministic(RuntimeError):
    """Outcomes changed while every recorded input stayed the same."""


@dataclass(frozen=True)
class RunInputs:
    """What one run's traces (method, dataset) were made with: its settings file less the
    provenance, and the device of the run that wrote them last (None when not recorded)."""

    settings: Mapping[str, Any]
    device: str | None


def run_inputs(runs_dir: Path) -> dict[tuple[str, str], RunInputs]:
    """Every run's recorded inputs, from `runs_dir/<method>/<dataset>.settings.json`."""
    found = {}
    for file in sorted(runs_dir.glob("*/*.settings.json")):
        dataset = file.name.removesuffix(".settings.json")
        if ".part-" in dataset:  # a shard's part file (skillrag.eval.runner.part_file)
            continue
        settings = json.loads(file.read_text(encoding="utf-8"))
        history = settings.pop(PROVENANCE, None) or [{}]
        found[(file.parent.name, dataset)] = RunInputs(settings, history[-1].get("device"))
    return found


@dataclass
class Verdict:
    """The comparison of a re-run with the committed outcomes and with the traces it replaced."""

    alpha: float
    tests: list[dict[str, Any]]  # one row per (method, scope, metric): the table artifact
    missing: int  # committed questions with no outcome now
    unexplained: dict[str, int] = field(default_factory=dict)  # "method/dataset" -> outcomes changed, inputs identical
    devices: dict[str, str] = field(default_factory=dict)  # "method/dataset" -> "cpu -> cuda"

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [row for row in self.tests if row["regressed"]]

    def lines(self) -> list[str]:
        """What a reader is told, alarms first."""
        out = []
        if self.unexplained:
            runs = ", ".join(f"{run} {n}" for run, n in sorted(self.unexplained.items()))
            out.append(f"non-deterministic: {sum(self.unexplained.values())} outcomes changed with identical inputs ({runs})")
        if self.regressions or self.missing:
            worse = "; ".join(
                f"{r['method']}/{r['scope']}/{r['metric']}: {r['before']:.3f} -> {r['after']:.3f} "
                f"({r['worse']} worse, {r['better']} better, Holm p {r['p_holm']:.4f})"
                for r in self.regressions
            )
            gone = f"; {self.missing} committed outcome(s) missing" if self.missing else ""
            out.append(f"regression at alpha {self.alpha} ({len(self.tests)} one-sided tests, {CORRECTION}-corrected): "
                       f"{worse or 'no test'}{gone}")
        if self.devices:
            out.append("device changed: " + ", ".join(f"{run} {change}" for run, change in sorted(self.devices.items())))
        if not out:
            out.append(f"no regression at alpha {self.alpha} ({len(self.tests)} one-sided tests, {CORRECTION}-corrected)")
        return out

    def check(self) -> None:
        """Raise `NonDeterministic` (it comes first: then no comparison can be trusted) or `Regression`."""
        text = "; ".join(self.lines())
        if self.unexplained:
            raise NonDeterministic(text)
        if self.regressions or self.missing:
            raise Regression(text)


def regression_tests(before: pd.DataFrame, after: pd.DataFrame, alpha: float) -> list[dict[str, Any]]:
    """One-sided paired tests that each method got worse (see the module docstring), Holm-corrected."""
    changes = outcome_changes(before, after, TESTED)
    if not changes:
        return []
    rejected, adjusted, _, _ = multipletests([c.p_worse for c in changes], alpha=alpha, method=CORRECTION)
    return [
        {"method": c.method, "scope": c.scope, "metric": c.metric, "n": c.n, "before": c.before, "after": c.after,
         "worse": c.worse, "better": c.better, "p": c.p_worse, "p_holm": float(p), "regressed": bool(reject)}
        for c, p, reject in zip(changes, adjusted, rejected)
    ]


def changed_outcomes(before: pd.DataFrame, after: pd.DataFrame) -> dict[tuple[str, str], int]:
    """Per (method, dataset), how many questions both frames hold have any column different."""
    merged = before.merge(after, on=list(KEY), suffixes=("_before", "_after"))
    differs = pd.Series(False, index=merged.index)
    for column in (c for c in COLUMNS if c not in KEY):
        differs |= merged[f"{column}_before"] != merged[f"{column}_after"]
    counts = merged[differs].groupby(["method", "dataset"]).size()
    return {key: int(n) for key, n in counts.items()}


def judge(
    committed: pd.DataFrame,
    replaced: pd.DataFrame | None,
    current: pd.DataFrame,
    inputs_before: Mapping[tuple[str, str], RunInputs],
    inputs_after: Mapping[tuple[str, str], RunInputs],
    alpha: float,
) -> Verdict:
    """`committed`: the outcomes at the ref; `replaced`: those of the traces in the workspace
    before DVC ran (None when there were none), made with `inputs_before`; `current`: after,
    made with `inputs_after`."""
    on = list(KEY)
    missing = len(committed.merge(current[on], on=on, how="left", indicator=True).query("_merge == 'left_only'"))
    verdict = Verdict(alpha, regression_tests(committed, current, alpha), missing)
    for run, after in inputs_after.items():
        before = inputs_before.get(run)
        if before is None:
            continue
        name = "/".join(run)
        if before.device and after.device and before.device != after.device:
            verdict.devices[name] = f"{before.device} -> {after.device}"
        elif replaced is not None and before.settings == after.settings:
            changed = changed_outcomes(replaced, current).get(run, 0)
            if changed:
                verdict.unexplained[name] = changed
    return verdict


def committed_outcomes(project: Path, ref: str) -> pd.DataFrame:
    """reports/outcomes.csv as committed at `ref` (git show), e.g. HEAD or origin/main."""
    done = subprocess.run(
        ["git", "show", f"{ref}:./{OUTCOMES}"], cwd=project, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise FileNotFoundError(
            f"no committed {OUTCOMES} at {ref!r} in {project}: commit a run's outcomes first ({done.stderr.strip()})"
        )
    return read_outcomes(done.stdout)


def bring_up_to_date(
    project: Path,
    force_evaluate: bool = True,
    set_params: Sequence[str] = (),
    commit: bool = False,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Run what is stale through `skillrag repro`'s runner (skillrag.pipeline.repro: absent cache-only inputs
    restored or rebuilt, partial traces kept) and, when `force_evaluate`, every evaluate stage and
    every stage after them again even if nothing changed. `set_params` (e.g. lm.device=cuda) are
    written to params.yaml first, as `dvc exp run -S` does. `commit`: commit each stage to git (off:
    the committed outcomes stay the reference the next run is judged against). Returns the stages run."""
    if set_params:
        apply_params(project, set_params)
    runner = Runner(project, force=("evaluate",) if force_evaluate else (), git=commit, echo=echo)
    return runner.run()
