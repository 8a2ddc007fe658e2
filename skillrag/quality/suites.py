"""The expectations of each artifact kind (DESIGN §2), as frames + Great Expectations suites."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.config import IndexParams, PrepareParams
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
    origins = pd.DataFrame(
        [
            {"id": row.get("id"), "orig_split": str((row.get("meta") or {}).get("orig_split")), "side": _side(row)}
            for row in rows
            if row.get("split") == "eval"
        ],
        columns=["id", "orig_split", "side"],
    )
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
    """"eval" / "train" for a stored row's original split; "unknown" when it is not classified."""
    try:
        return origin_side(str(row.get("dataset")), (row.get("meta") or {}).get("orig_split"))
    except DataError:
        return "unknown"


def index_checks(passage_ids: Sequence[str], texts: Sequence[str], counts: Mapping[str, int], smoke_hits: Sequence[bool]) -> dict[str, Check]:
    """Corpus ids unique and texts non-empty; every backend holds as many docs as the corpus;
    smoke queries (passage titles) find a passage of that title in the top 10."""
    passages = pd.DataFrame({"id": list(passage_ids), "text": list(texts)})
    index = pd.DataFrame(
        [{"backend": name, "count": count, "expected": len(passage_ids)} for name, count in counts.items()],
        columns=["backend", "count", "expected"],
    )
    checks = {
        "passages": Check(
            passages,
            [
                gxe.ExpectTableRowCountToBeBetween(min_value=1),
                gxe.ExpectColumnValuesToBeUnique(column="id"),
                gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1),
            ],
        ),
        "index": Check(index, [gxe.ExpectColumnPairValuesToBeEqual(column_A="count", column_B="expected")]),
    }
    if smoke_hits:
        checks["smoke"] = Check(
            pd.DataFrame({"hit": list(smoke_hits)}),
            [gxe.ExpectColumnValuesToBeInSet(column="hit", value_set=[True], mostly=0.8)],
        )
    return checks


def gate_questions(questions_dir: Path, params: PrepareParams) -> dict[str, Any]:
    """The gate after `prepare`: reads the written splits back and validates them."""
    rows = [row for path in sorted(questions_dir.glob("*/*.jsonl")) for row in read_jsonl(path)]
    checks = question_checks(rows, split_sizes(params), params.max_question_chars)
    return run_gate("questions", checks, questions_dir / "validation.json")


def _read_collection(corpus_dir: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(corpus_dir.glob("*.jsonl")):
        for row in read_jsonl(path):
            title, _, text = str(row.get("contents", "")).partition("\n")
            rows.append({"id": str(row.get("id", "")), "title": title, "text": text.strip()})
    return pd.DataFrame(rows, columns=["id", "title", "text"])


def gate_index(corpus_dir: Path, index_dir: Path, params: IndexParams, k1: float, b: float) -> dict[str, Any]:
    """The gate after `index`: the written collection, both indexes' doc counts, and smoke queries
    (the titles of `smoke_queries` evenly spaced passages, each expected to retrieve a passage of
    that title in the Lucene top 10). Both backends' files are first checked against the index
    manifest (IndexCorruptError naming the file otherwise)."""
    from skillrag.retrieval import LuceneRetriever
    from skillrag.retrieval.bm25s_backend import count_bm25s_docs
    from skillrag.retrieval.lucene_backend import count_lucene_docs
    from skillrag.retrieval.manifest import BACKEND_DIRS, verify_index

    for backend in BACKEND_DIRS:
        verify_index(index_dir, backend)

    collection = _read_collection(corpus_dir)
    counts = {"lucene": count_lucene_docs(index_dir / "lucene"), "bm25s": count_bm25s_docs(index_dir / "bm25s")}
    hits = []
    if params.smoke_queries and len(collection):
        retriever = LuceneRetriever(index_dir, k1=k1, b=b)
        step = max(1, len(collection) // params.smoke_queries)
        for title in collection["title"].iloc[::step].head(params.smoke_queries):
            hits.append(any(hit.passage.title == title for hit in retriever.search(title, 10)))
    checks = index_checks(collection["id"].tolist(), collection["text"].tolist(), counts, hits)
    return run_gate("index", checks, index_dir / "validation.json")


def states_checks(rows: pd.DataFrame, shapes: pd.DataFrame, hidden_size: int) -> dict[str, Check]:
    """Every shard/layer tensor finite and [rows in shard, hidden_size]; both labels present in
    train; no question id in both train and dev."""
    splits_per_id = rows.groupby("id")["split"].nunique().rename("n_splits").reset_index()
    train_labels = rows.loc[rows["split"] == "train", ["acc"]]
    return {
        "tensors": Check(
            shapes,
            [
                gxe.ExpectTableRowCountToBeBetween(min_value=1),
                gxe.ExpectColumnValuesToBeInSet(column="finite", value_set=[True]),
                gxe.ExpectColumnValuesToBeBetween(column="cols", min_value=hidden_size, max_value=hidden_size),
                gxe.ExpectColumnPairValuesToBeEqual(column_A="rows", column_B="expected_rows"),
            ],
        ),
        "labels": Check(train_labels, [gxe.ExpectColumnDistinctValuesToContainSet(column="acc", value_set=[0, 1])]),
        "splits": Check(splits_per_id, [gxe.ExpectColumnValuesToBeInSet(column="n_splits", value_set=[1])]),
    }


def gate_states(states_dir: Path) -> dict[str, Any]:
    """The gate after `extract`, over what is on disk."""
    import torch
    from safetensors.torch import load_file

    from skillrag.probe.states import read_meta, read_rows

    meta, rows = read_meta(states_dir), read_rows(states_dir)
    expected = rows.groupby("shard").size()
    shapes = []
    for shard, n in expected.items():
        tensors = load_file(str(states_dir / f"{shard}.safetensors"))
        for layer in meta["layers"]:
            tensor = tensors.get(f"layer_{layer}", torch.empty(0))  # a missing layer fails every check
            shapes.append(
                {
                    "tensor": f"{shard}/layer_{layer}",
                    "rows": tensor.shape[0],
                    "cols": tensor.shape[1] if tensor.ndim == 2 else -1,
                    "expected_rows": int(n),
                    "finite": bool(tensor.numel()) and bool(torch.isfinite(tensor).all()),
                }
            )
    shapes_frame = pd.DataFrame(shapes, columns=["tensor", "rows", "cols", "expected_rows", "finite"])
    return run_gate("states", states_checks(rows, shapes_frame, meta["hidden_size"]), states_dir / "validation.json")


def gate_probe(metrics_file: Path, min_dev_auroc: float) -> dict[str, Any]:
    """The gate after `train_probe`: dev AUROC recorded per layer; the ensemble must beat
    `min_dev_auroc` and so must at least half the layers (single-class dev sets give null)."""
    report = json.loads(Path(metrics_file).read_text())
    layers = pd.DataFrame(
        [{"layer": int(layer), "auroc": m["auroc"]} for layer, m in report["per_layer"].items()], columns=["layer", "auroc"]
    )
    ensemble = pd.DataFrame([{"auroc": report["ensemble"]["auroc"]}])
    ensemble_checks = [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=min_dev_auroc)]
    if min_dev_auroc > 0:  # 0 means "record only": a tiny dev set may hold one class (AUROC null)
        ensemble_checks.append(gxe.ExpectColumnValuesToNotBeNull(column="auroc"))
    checks = {
        "per_layer": Check(layers, [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=min_dev_auroc, mostly=0.5)]),
        "ensemble": Check(ensemble, ensemble_checks),
    }
    return run_gate("probe", checks, Path(metrics_file).with_name("probe_validation.json"))


def gate_runs(paths: Any, methods: Sequence[str], datasets: Sequence[str], limit: int | None) -> dict[str, Any]:
    """The gate after `evaluate`: every evaluation question has exactly one trace per method,
    each with a known termination, and an error trace carries its message."""
    from skillrag.data.prepare import load_split
    from skillrag.methods.trace import TERMINATIONS

    expected = {dataset: [q.id for q in qs[:limit]] for dataset, qs in load_split(paths.questions, "eval").items()}
    rows, counts = [], []
    for method in methods:
        for dataset in datasets:
            traces = list(read_jsonl(paths.run_file(method, dataset))) if paths.run_file(method, dataset).exists() else []
            ids = [t["question_id"] for t in traces]
            counts.append({"run": f"{method}/{dataset}", "traced": len(set(ids) & set(expected[dataset])), "expected": len(expected[dataset])})
            rows += [
                {
                    "key": f"{method}/{t['question_id']}",
                    "termination": t["termination"],
                    "explained": t["termination"] != "error" or bool(t.get("error")),
                }
                for t in traces
            ]
    checks = {
        "coverage": Check(pd.DataFrame(counts), [gxe.ExpectColumnPairValuesToBeEqual(column_A="traced", column_B="expected")]),
        "traces": Check(
            pd.DataFrame(rows, columns=["key", "termination", "explained"]),
            [
                gxe.ExpectColumnValuesToBeUnique(column="key"),
                gxe.ExpectColumnValuesToBeInSet(column="termination", value_set=list(TERMINATIONS)),
                gxe.ExpectColumnValuesToBeInSet(column="explained", value_set=[True]),
            ],
        ),
    }
    return run_gate("runs", checks, paths.runs / "validation.json")
