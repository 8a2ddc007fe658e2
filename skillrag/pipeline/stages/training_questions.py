"""Which questions a training stage takes from a split: every dataset in turn, so a small budget
is not spent on the dataset whose ids sort first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import zip_longest

from skillrag.data.schema import Question


def round_robin(by_dataset: Mapping[str, Sequence[Question]], size: int) -> list[Question]:
    """The first `size` questions taking one of each dataset in turn (each sorted by id)."""
    columns = [sorted(questions, key=lambda q: q.id) for _, questions in sorted(by_dataset.items())]
    return [q for row in zip_longest(*columns) for q in row if q is not None][:size]
