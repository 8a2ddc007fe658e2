"""Numbers in prose are generated or dated: a measured number in the README, docs/ or a
params.yaml comment needs a generated block or a '(measured DATE, COMMIT, MACHINE)' marker."""

from __future__ import annotations

from pathlib import Path

from skillrag.report.numbers import undated_in_markdown, undated_in_yaml_comments, undated_numbers
from skillrag.report.readme import BEGIN, END

REPO = Path(__file__).resolve().parents[2]


def _numbers(text: str) -> list[str]:
    return [u.number for u in undated_in_markdown(Path("x.md"), text)]


def test_the_committed_readme_docs_and_params_hold_no_undated_ungenerated_number():
    undated = undated_numbers(REPO)
    assert not undated, "\n".join(map(str, undated))


def test_a_measured_number_needs_a_dated_marker_in_its_paragraph():
    assert _numbers("The index builds in 15 s on two cores.") == ["15 s"]
    assert _numbers("The index builds in 15 s\n(measured 2026-12-03, 7d9dd55, Xeon AMX).") == []
    assert _numbers("Dated above.\n(measured 2026-12-03, 7d9dd55, Xeon)\n\nBut this 865 s is not.") == ["865 s"]
    assert _numbers("Dev AUROC 0.594 and 85% decompose, 2.2x faster, 1.1 GB.") == ["0.594", "85%", "2.2x", "1.1 GB"]
    assert _numbers("A marker without a commit (measured 2026-12-03, Xeon): 12 s.") == ["12 s"]


def test_code_generated_blocks_settings_and_interval_levels_are_not_claims():
    assert _numbers("Run `skillrag repro --budget 2h30m` (paper: 500), a 95% Wilson interval, 30 x 5.") == []
    assert _numbers(f"{BEGIN}\nACC 32.7%, 107.2 s per question\n{END}\n") == []
    assert _numbers("| host | time |\n|---|---|\n| xeon | 3.2 s |") == ["3.2 s"]
    assert _numbers("Speeds (measured 2026-12-01, ab5e506, two hosts):\n\n| host | time |\n|---|---|\n| xeon | 3.2 s |") == []


def test_params_comments_are_read_line_by_line():
    text = ("k: 3   # ~7 s per answer over 3\n"
            "b: 0.4 # ~7 s per answer (measured 2026-12-01, b3e9881, 2-core Xeon)\n"
            "lr: 0.01 # paper: 0.001\n")
    assert [(u.line, u.number) for u in undated_in_yaml_comments(Path("params.yaml"), text)] == [(1, "7 s")]
