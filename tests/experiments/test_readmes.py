"""Every side experiment says what it asked, how it ran and what it found, in lines a report
generator can read: a `# name: title` first line, then one `Question:`, `Command:`, `Result:`,
`Date:` and `Commit:` line each."""

from __future__ import annotations

from tests.conftest import REPO

FIELDS = ("Question:", "Command:", "Result:", "Date:", "Commit:")


def test_each_experiment_readme_opens_with_its_name_and_has_one_line_per_field():
    readmes = sorted((REPO / "experiments").glob("*/README.md"))
    assert readmes
    for readme in readmes:
        lines = readme.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith(f"# {readme.parent.name}: "), f"{readme}: first line must be '# {readme.parent.name}: <title>'"
        for field in FIELDS:
            found = [line for line in lines if line.startswith(field)]
            assert len(found) == 1 and found[0][len(field):].strip(), f"{readme}: needs exactly one non-empty '{field}' line"
