"""The questions gate (after `prepare`): ids unique, questions non-empty and bounded, answers
non-empty, no question in two splits, split sizes, evaluation questions from dev/test splits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.config import PrepareParams
from skillrag.data.origin import origin_side
from skillrag.data.sampling import split_sizes
from skillrag.files import DataError, read_jsonl
from skillrag.quality.gate import Check, run_gate
from skillrag.text import normalize


def question_checks(
    rows: Sequence[Mapping[str, Any]], expected: Mapping[str, Mapping[str, int]], max_chars: int
) -> dict[str, Check]:
    """ids unique, question non-empty and at most `max_chars` long, answers a non-empty list, no
    question text in two splits, every evaluation question from its dataset's original dev/test
    split, and each (split, dataset) file holding the expected number of questions. `rows` are the
    raw stored rows (with `split` and `dataset`), so one run reports every problem at once."""
    frame = pd.DataFrame(
        [
            {
                "id": row.get("id"),
                "question": str(row.get("question") or "").strip(),
                "key": normalize(str(row.get("question") or "")),
                "n_answers": len([a for a in row.get("answers") or [] if str(a).strip()]),
            }
            for row in rows
        ],
        columns=["id", "question", "key", "n_answers"],
    )
    origins = pd.DataFrame([{"side": _side(row)} for row in rows if row.get("split") == "eval"], columns=["side"])
    found = Counter((row.get("split"), row.get("dataset")) for row in rows)
    sizes = pd.DataFrame(
        [
            {"file": f"{split}/{dataset}", "count": found[(split, dataset)], "expected": count}
            for split, by_dataset in expected.items()
            for dataset, count in by_dataset.items()
        ],
        columns=["file", "count", "expected"],
    )
    return {
        "rows": Check(
            frame,
            [
                gxe.ExpectTableRowCountToBeBetween(min_value=1),
                gxe.ExpectColumnValuesToBeUnique(column="id"),
                gxe.ExpectColumnValuesToBeUnique(column="key"),
                gxe.ExpectColumnValueLengthsToBeBetween(column="question", min_value=1, max_value=max_chars),
                gxe.ExpectColumnValuesToBeBetween(column="n_answers", min_value=1),
            ],
        ),
        "eval_origin": Check(origins, [gxe.ExpectColumnValuesToBeInSet(column="side", value_set=["eval"])]),
        "sizes": Check(sizes, [gxe.ExpectColumnPairValuesToBeEqual(column_A="count", column_B="expected")]),
    }


def _side(row: Mapping[str, Any]) -> str:
    """"eval" for a stored row from an original dev/test split, else what the gate should show:
    the side ("train" or "unknown"), the row's id and its orig_split."""
    orig_split = (row.get("meta") or {}).get("orig_split")
    try:
        side = origin_side(str(row.get("dataset")), orig_split)
    except DataError:
        side = "unknown"
    return side if side == "eval" else f"{side}: {row.get('id')} (orig_split {orig_split!r})"


def gate_questions(questions_dir: Path, params: PrepareParams, result_path: Path) -> dict[str, Any]:
    """The gate after `prepare`: reads the written splits back and validates them."""
    rows = [row for path in sorted(questions_dir.glob("*/*.jsonl")) for row in read_jsonl(path)]
    checks = question_checks(rows, split_sizes(params), params.max_question_chars)
    return run_gate("questions", checks, result_path)
