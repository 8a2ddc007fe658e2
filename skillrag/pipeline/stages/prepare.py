"""Stage `prepare`: the question splits (data/questions/) and their gate."""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def prepare(params: Params, paths: Paths) -> dict[str, dict[str, int]]:
    """Sample the question splits into data/questions/<split>/<dataset>.jsonl; returns counts."""
    from skillrag.data.questions import prepare_questions

    return prepare_questions(params.prepare, paths.questions)


def gate_prepare(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.questions_gate import gate_questions

    return gate_questions(paths.questions, params.prepare, paths.validation("questions"))
