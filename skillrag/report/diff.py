"""What a change did to every number: DVC's own `dvc metrics diff --md` (and `dvc params diff
--md`) between a git ref and the workspace, run in the project; then, from the per-question
outcomes (reports/outcomes.csv at the ref, by `git show`, and in the workspace), each quality
change tested on the same questions (beyond noise or not) and the questions whose strict ACC
flipped, per method, right -> wrong first.

A comparison that cannot be made (no git repository, an unknown ref, no dvc, no outcomes file) is
reported as a sentence saying why, never as an error: the report must still be written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from skillrag.gitutil import git
from skillrag.report.outcomes import KEY, read_outcomes
from skillrag.report.paired import LEVEL, outcome_changes
from skillrag.report.tables import markdown_table

OUTCOMES = "reports/outcomes.csv"
METRICS = "reports/metrics.json"
TESTED = ("acc", "em", "no_answer")
FLIPS_SHOWN = 10  # flipped questions listed per method; the rest are counted


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


def _committed(root: Path, commit: str, path: str) -> str | None:
    """`path` as committed at `commit`, stripped (None when it is not there)."""
    return git("show", f"{commit}:./{path}", cwd=root)


def previous_run(root: Path, start: str) -> str | None:
    """The newest commit at or before `start` whose reports/metrics.json differs from the workspace's
    (or holds none): the run before this one. `skillrag repro` commits summarize's metrics before the
    report stage runs, so `start` (HEAD) may already hold this run's own. None when there is no such
    commit (the first committed run) or no git history to read."""
    current = (root / METRICS).read_text(encoding="utf-8").strip() if (root / METRICS).is_file() else None
    for commit in (git("rev-list", start, "--", METRICS, cwd=root) or "").split():
        if _committed(root, commit, METRICS) != current:
            return commit
    return None


def committed_outcomes(root: Path, against: str) -> pd.DataFrame | None:
    """reports/outcomes.csv as committed at `against` (None when it is not there)."""
    committed = _committed(root, against, OUTCOMES)
    return None if committed is None else read_outcomes(committed)


def flips(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """The questions both runs answered whose strict ACC differs: method, dataset, question id,
    question, both answers and `direction` ("right → wrong" or "wrong → right"), right -> wrong
    first, then by method, dataset and question id."""
    merged = before.merge(after, on=list(KEY), suffixes=("_before", "_after"))
    changed = merged[merged["acc_before"] != merged["acc_after"]].copy()
    changed["direction"] = ["right → wrong" if acc else "wrong → right" for acc in changed["acc_before"]]
    changed["question"] = changed["question_after"]
    order = ["direction", *KEY]  # "right → wrong" sorts before "wrong → right"
    return changed.sort_values(order, ignore_index=True)[
        [*KEY, "question", "answer_before", "answer_after", "direction"]]


def paired_changes(before: pd.DataFrame, after: pd.DataFrame) -> str:
    """Each changed quality metric (ACC, EM, no-answer rate) per method, per dataset and over all,
    tested on the same questions: exact McNemar, beyond noise when p < 1 - LEVEL."""
    alpha = 1 - LEVEL
    rows = [
        [c.method, c.scope, c.metric, str(c.n), f"{c.before:.3f}", f"{c.after:.3f}", str(c.worse), str(c.better),
         f"{c.p_two_sided:.3f}", "beyond noise" if c.p_two_sided < alpha else "within noise"]
        for c in outcome_changes(before, after, TESTED) if c.worse or c.better
    ]
    if not rows:
        return "_No question's ACC, EM or no-answer outcome changed._"
    return (f"Each changed quality metric tested on the questions both runs answered (exact McNemar, beyond noise "
            f"when p < {alpha:.2f}; {len(rows)} tests, so about {alpha * len(rows):.1f} could pass by chance):\n\n"
            + markdown_table(["method", "scope", "metric", "n", "before", "after", "worse", "better", "p",
                              "verdict"], rows))


def flipped_questions(before: pd.DataFrame, after: pd.DataFrame, shown: int = FLIPS_SHOWN) -> str:
    """Per method, the questions whose strict ACC flipped, right -> wrong first; at most `shown`
    listed, the rest counted."""
    flipped = flips(before, after)
    if flipped.empty:
        return "_No question's strict ACC flipped._"
    parts = []
    for method, group in flipped.groupby("method", sort=True):
        counts = group["direction"].value_counts()
        head = (f"**{method}**: {counts.get('right → wrong', 0)} right → wrong, "
                f"{counts.get('wrong → right', 0)} wrong → right")
        rows = [[r.direction, r.dataset, r.question, r.answer_before, r.answer_after]
                for r in group.head(shown).itertuples(index=False)]
        rest = f"\n\n… and {len(group) - shown} more." if len(group) > shown else ""
        parts.append(head + "\n\n" + markdown_table(["flip", "dataset", "question", "before", "after"], rows) + rest)
    return "\n\n".join(parts)


def outcomes_section(root: Path, against: str) -> str:
    """The paired part of "Change against the base" (see the module docstring)."""
    before = committed_outcomes(root, against)
    if before is None:
        return f"_`{against}` has no `{OUTCOMES}`: only the aggregate diff above is shown._"
    current = root / OUTCOMES
    if not current.is_file():
        return f"_The workspace has no `{OUTCOMES}` (run `dvc repro`): only the aggregate diff above is shown._"
    after = read_outcomes(current.read_text(encoding="utf-8"))
    return (paired_changes(before, after) + f"\n\nQuestions whose strict ACC flipped against `{against}`:\n\n"
            + flipped_questions(before, after))


def change_since_previous_run(root: Path, start: str) -> str:
    """The report stage's "Change against the base": `change_section` against `previous_run`, said
    which commit that is, or a line saying there is no earlier run to compare with."""
    base = previous_run(root, start)
    if base is None and git("rev-parse", "--verify", f"{start}^{{commit}}", cwd=root) is None:
        return f"_No comparison: `{start}` is no commit of a git repository here._"
    if base is None:
        return (f"_No commit at or before `{start}` holds other metrics than the workspace's `{METRICS}`: this is "
                "the first committed run, so there is nothing to compare with._")
    return (f"The base is `{base[:12]}`, the newest commit at or before `{start}` whose `{METRICS}` differs from the "
            "workspace's: the run before this one.\n\n" + change_section(root, base))


def change_section(root: Path, against: str) -> str:
    """The body of "Change against the base": metrics, the paired tests and flipped questions,
    then params, against `against`."""
    return (
        f"`dvc metrics diff --md {against}` (the workspace's metrics against the ones committed at `{against}`; "
        "only changed values are listed):\n\n"
        + dvc_diff(root, "metrics", against)
        + "\n\n" + outcomes_section(root, against)
        + f"\n\n`dvc params diff --md {against}`:\n\n"
        + dvc_diff(root, "params", against)
    )
