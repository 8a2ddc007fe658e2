"""Stage `report`: reports/report.md, its figures (reports/figures/, skillrag.report.figures) and
the gates' Data Docs (data/data_docs/); and the body of
the pull-request comment (`skillrag report --against REF`), the same report led by the change
against REF."""

from __future__ import annotations

from pathlib import Path

from skillrag.config import Params
from skillrag.paths import Paths


def report(params: Params, paths: Paths) -> Path:
    """Rebuild the Data Docs, draw the report's figures, then write reports/report.md ("Change against the base" compares
    with the run before this one: the newest commit at or before `report.against` whose metrics
    differ from the workspace's); returns the report's path."""
    from skillrag.files import replace_text
    from skillrag.report.data_docs import build_data_docs
    from skillrag.report.diff import change_since_previous_run
    from skillrag.report.document import render_report
    from skillrag.report.figures import draw_report_figures

    build_data_docs(paths)
    draw_report_figures(paths)
    change = change_since_previous_run(paths.root, params.report.against)
    replace_text(paths.report, render_report(params, paths, paths.report, change))
    return paths.report


def pr_comment(params: Params, paths: Paths, against: str, out: Path | None = None) -> str:
    """The pull-request comment: the report led by `dvc metrics diff` / `dvc params diff` against
    git ref `against`, its links relative to `out` (the current folder when printed). Written to
    `out` when given; reports/report.md is left as it is."""
    from skillrag.files import replace_text
    from skillrag.report.diff import change_section
    from skillrag.report.document import render_report

    body = render_report(params, paths, out or Path.cwd() / "comment.md", change_section(paths.root, against), change_first=True)
    if out is not None:
        replace_text(out, body)
    return body
