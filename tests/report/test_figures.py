"""The report stage's figures, drawn from real-shaped traces: every axis labelled, intervals
from the Wilson interval, the reliability plot's counts per bin and its dev cuts."""

from __future__ import annotations

from skillrag.report.figures import (
    draw_accuracy_cost,
    draw_accuracy_overall,
    draw_figures,
    draw_reliability,
    reliability_points,
    report_figures,
)
from skillrag.report.inputs import load_inputs

DATASETS = ["hotpotqa", "musique"]


def _labelled(fig) -> bool:
    return all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)


def test_every_figure_is_written_and_every_axis_is_labelled(workspace):
    inputs = load_inputs(workspace)
    figures = report_figures(workspace)
    assert draw_figures(inputs, DATASETS, "skill_rag", workspace) == {file.name: True for file in figures}
    for file in figures:
        assert file.parent == workspace.figures and file.read_bytes().startswith(b"\x89PNG")
    for fig in (draw_accuracy_cost(inputs, DATASETS, "skill_rag", workspace.figures / "a.png"),
                draw_accuracy_overall(inputs, DATASETS, "skill_rag", workspace.figures / "b.png"),
                draw_reliability(inputs, "skill_rag", workspace.figures / "c.png")):
        assert _labelled(fig)


def test_accuracy_against_cost_places_each_method_at_its_cost_and_acc(workspace):
    inputs = load_inputs(workspace)
    fig = draw_accuracy_cost(inputs, DATASETS, "skill_rag", workspace.figures / "a.png")
    calls = fig.axes[0]
    names = [t.get_text() for t in calls.texts]
    assert names == ["no_retrieval", "single_step", "probing_rag", "skill_rag"]
    # no_retrieval: one call per question, 5 of 14 right (i % 3 == 0)
    x, y = calls.texts[0].xy
    assert (x, round(y, 1)) == (1.0, round(100 * 5 / 14, 1))


def test_the_reliability_plot_counts_answers_per_bin_and_marks_the_dev_cuts(workspace):
    inputs = load_inputs(workspace)
    scores, right = reliability_points(inputs, "skill_rag", "no_retrieval")
    assert len(scores) == 14 and right.sum() == 0  # every closed-book answer of the fixture is wrong
    fig = draw_reliability(inputs, "skill_rag", workspace.figures / "c.png")
    closed_book = fig.axes[0]
    assert [t.get_text() for t in closed_book.texts] == ["n=14"]  # all scored 0.1: one bin
    assert any("dev cut 0.600" in line.get_label() for line in closed_book.get_lines())
    after_evidence = fig.axes[2]
    assert [t.get_text() for t in after_evidence.texts] == ["n=13"]
    assert any("dev cut 0.000" in line.get_label() for line in after_evidence.get_lines())


def test_with_nothing_to_plot_each_figure_still_exists_and_says_so(tmp_path):
    from skillrag.paths import Paths
    from tests.report.conftest import simple_trace, write_runs

    paths = Paths(tmp_path)
    write_runs(paths, [simple_trace(0, "nq", "single_step", right=True)])
    drawn = draw_figures(load_inputs(paths), ["nq"], "skill_rag", paths)
    assert drawn == {"accuracy_cost.png": True, "accuracy_overall.png": True, "prober_reliability_eval.png": False}
    assert all(file.is_file() for file in report_figures(paths))
