"""The PR comment's paired part: exactly the questions that flipped between a base and a head
outcomes file, right -> wrong first, capped; each quality change tested; no base file said."""

from __future__ import annotations

import subprocess

from skillrag.report.diff import (
    change_since_previous_run,
    flipped_questions,
    flips,
    outcomes_section,
    paired_changes,
    previous_run,
)
from skillrag.report.outcomes import outcome_frame, to_csv


def _trace(method: str, dataset: str, index: int, right: bool, answer: str) -> dict:
    return {"method": method, "dataset": dataset, "question_id": f"{dataset}-{index:02d}", "question": f"Q{index}?",
            "answer": answer, "termination": "done", "totals": {"llm_calls": 1, "retrievals": 1},
            "scores": {"acc": float(right), "em": float(right), "f1": float(right)}}


def _pair():
    """Base and head on 20 nq questions x two methods: skill_rag loses 0-3 and gains 10,
    single_step loses 4-15 (12 questions); everything else unchanged."""
    base, head = [], []
    for i in range(20):
        base.append(_trace("skill_rag", "nq", i, i < 4, f"base {i}"))
        head.append(_trace("skill_rag", "nq", i, i == 10, f"head {i}"))
        base.append(_trace("single_step", "nq", i, True, f"same {i}"))
        head.append(_trace("single_step", "nq", i, not 4 <= i < 16, f"same {i}" if not 4 <= i < 16 else "nope"))
    return outcome_frame(base), outcome_frame(head)


def test_flips_are_exactly_the_changed_questions_right_to_wrong_first():
    before, after = _pair()
    flipped = flips(before, after)
    got = list(zip(flipped["method"], flipped["question_id"], flipped["direction"]))
    expected_lost = [("single_step", f"nq-{i:02d}", "right → wrong") for i in range(4, 16)]
    expected_lost += [("skill_rag", f"nq-{i:02d}", "right → wrong") for i in range(4)]
    assert got == [*expected_lost, ("skill_rag", "nq-10", "wrong → right")]
    row = flipped.iloc[-1]
    assert (row.question, row.answer_before, row.answer_after) == ("Q10?", "base 10", "head 10")


def test_each_method_lists_its_flips_with_both_answers_capped_with_a_count():
    body = flipped_questions(*_pair(), shown=5)
    skill, single = body.split("**skill_rag**")[1], body.split("**skill_rag**")[0]
    assert "**single_step**: 12 right → wrong, 0 wrong → right" in single and "… and 7 more." in single
    assert ": 4 right → wrong, 1 wrong → right" in skill and "more." not in skill
    assert "| right → wrong | nq | Q0? | base 0 | head 0 |" in skill
    assert skill.index("right → wrong | nq | Q3?") < skill.index("wrong → right | nq | Q10?")


def test_changes_are_marked_beyond_noise_only_when_the_paired_test_says_so():
    body = paired_changes(*_pair())
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:3]): line for line in body.splitlines()[3:]}
    assert "beyond noise" in rows[("single_step", "nq", "acc")]  # 12 lost, 0 won: p = 0.0005
    assert "within noise" in rows[("skill_rag", "nq", "acc")]  # 4 lost, 1 won: p = 0.375
    assert ("skill_rag", "nq", "no_answer") not in rows  # unchanged metrics are not tested


def _git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def _commit_metrics(root, text):
    """Commit reports/metrics.json holding `text`; return the commit's id."""
    (root / "reports").mkdir(exist_ok=True)
    (root / "reports" / "metrics.json").write_text(text)
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", text)
    return _git(root, "rev-parse", "HEAD")


def test_the_base_is_the_newest_commit_whose_metrics_differ_from_the_workspaces(tmp_path):
    _git(tmp_path, "init", "-q")
    assert previous_run(tmp_path, "HEAD") is None  # no commit at all
    assert "is no commit of a git repository here" in change_since_previous_run(tmp_path, "HEAD")
    first = _commit_metrics(tmp_path, '{"acc": 0.1}')
    assert previous_run(tmp_path, "HEAD") is None  # the workspace's metrics are the only ones committed
    assert "this is the first committed run" in change_since_previous_run(tmp_path, "HEAD")
    second = _commit_metrics(tmp_path, '{"acc": 0.2}')  # as `skillrag repro` commits summarize before report
    (tmp_path / "other.txt").write_text("a later commit that leaves the metrics alone")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "other")
    assert previous_run(tmp_path, "HEAD") == first
    (tmp_path / "reports" / "metrics.json").write_text('{"acc": 0.3}')  # a new run in the workspace
    assert previous_run(tmp_path, "HEAD") == second
    assert previous_run(tmp_path, "nosuchref") is None


def test_against_a_ref_without_outcomes_only_the_aggregate_diff_is_shown(tmp_path):
    before, after = _pair()
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "empty")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "outcomes.csv").write_text(to_csv(before))
    assert outcomes_section(tmp_path, "HEAD") == "_`HEAD` has no `reports/outcomes.csv`: only the aggregate diff above is shown._"
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    (tmp_path / "reports" / "outcomes.csv").write_text(to_csv(after))
    body = outcomes_section(tmp_path, "HEAD")
    assert "**single_step**: 12 right → wrong" in body and "| skill_rag | nq | acc |" in body
