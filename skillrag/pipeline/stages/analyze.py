"""Stage `analyze`: the failure space of skill_rag's evaluation traces (paper §4.3, Fig. 2):
reports/analysis.json and two figures in reports/figures/."""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def analyze(params: Params, paths: Paths) -> dict[str, Any]:
    """Failure states of skill_rag on every evaluated dataset (skillrag.report.failures), their
    PCA / t-SNE projections coloured by chosen skill and by fix, and how well a linear probe reads
    the skill from the state; written even with too few states to measure (counts and notes)."""
    from itertools import chain

    from skillrag.files import read_jsonl, write_json
    from skillrag.report.failures import METHOD, analyze_failures

    files = [paths.run_file(METHOD, d) for d in params.evaluate.datasets if paths.run_file(METHOD, d).exists()]
    traces = chain.from_iterable(read_jsonl(f) for f in files)
    p = params.analyze
    result = analyze_failures(traces, paths.failure_space_figure, paths.failure_separability_figure, p.folds, p.tsne_min_points, p.seed)
    result["datasets"] = [f.stem for f in files]
    write_json(paths.analysis, result)
    return result
