"""The expectations of each artifact kind (DESIGN §2), as frames + Great Expectations suites."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.config import IndexParams, PrepareParams, ProbeParams
from skillrag.data.origin import origin_side
from skillrag.data.sampling import split_sizes
from skillrag.files import DataError, read_jsonl
from skillrag.quality.gate import Check, GateFailed, run_gate
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


def gate_probe(report: Mapping[str, Any], params: ProbeParams, result_path: Path) -> dict[str, Any]:
    """The gate on `train_probe`'s dev report, run before anything is published: dev AUROC
    recorded per layer; the ensemble must reach `probe.min_dev_auroc` and so must at least half
    the layers (0 = record only: a tiny dev set may hold one class, AUROC null); and the ensemble
    must not rank answers worse than mean token entropy unless `probe.allow_below_entropy`."""
    layers = pd.DataFrame(
        [{"layer": int(layer), "auroc": m["auroc"]} for layer, m in report["per_layer"].items()], columns=["layer", "auroc"]
    )
    prober_auroc, entropy_auroc = report["ensemble"]["auroc"], report["entropy_baseline"]["auroc"]
    ensemble = pd.DataFrame([{"auroc": prober_auroc}])
    ensemble_checks = [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=params.min_dev_auroc)]
    if params.min_dev_auroc > 0:
        ensemble_checks.append(gxe.ExpectColumnValuesToNotBeNull(column="auroc"))
    checks = {
        "per_layer": Check(layers, [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=params.min_dev_auroc, mostly=0.5)]),
        "ensemble": Check(ensemble, ensemble_checks),
    }
    compared = not params.allow_below_entropy and None not in (prober_auroc, entropy_auroc)
    if compared:
        checks["vs_entropy"] = Check(
            pd.DataFrame([{"ensemble_auroc": prober_auroc, "entropy_auroc": entropy_auroc}]),
            [gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="ensemble_auroc", column_B="entropy_auroc", or_equal=True)],
        )
    try:
        return run_gate("probe", checks, result_path)
    except GateFailed as err:
        if compared and prober_auroc < entropy_auroc:
            raise GateFailed(
                f"the prober's ensemble dev AUROC {prober_auroc:.3f} is below the mean-token-entropy "
                f"baseline's {entropy_auroc:.3f}, so it adds nothing over entropy; improve it (more "
                "training questions, probe.* settings) or set probe.allow_below_entropy: true to publish it anyway\n"
                f"{err}"
            ) from None
        raise


def error_share(traces: Sequence[Mapping[str, Any]], max_rate: float) -> str:
    """"ok" when at most `max_rate` of `traces` are error traces, else a line naming the share and
    the most common error (by exception type, with an example message) and its count."""
    errors = [str(t.get("error") or "") for t in traces if t["termination"] == "error"]
    if not traces or len(errors) <= max_rate * len(traces):
        return "ok"
    kind, count = Counter(e.partition(":")[0] for e in errors).most_common(1)[0]
    example = next(e for e in errors if e.partition(":")[0] == kind)
    return (
        f"{len(errors)} of {len(traces)} traces are errors (cap evaluate.max_error_rate={max_rate}); "
        f"most common: {kind} x{count}, e.g. {example[:160]!r}"
    )


def gate_runs(
    paths: Any, methods: Sequence[str], datasets: Sequence[str], limit: int | None, max_error_rate: float
) -> dict[str, Any]:
    """The gate after `evaluate`: every evaluation question has exactly one trace per method,
    each with a known termination, an error trace carries its message, and no run (method,
    dataset) holds more than `max_error_rate` error traces (a rerun retries them)."""
    from skillrag.data.prepare import load_split
    from skillrag.methods.trace import TERMINATIONS

    expected = {dataset: [q.id for q in qs[:limit]] for dataset, qs in load_split(paths.questions, "eval").items()}
    rows, counts = [], []
    for method in methods:
        for dataset in datasets:
            traces = list(read_jsonl(paths.run_file(method, dataset))) if paths.run_file(method, dataset).exists() else []
            ids = [t["question_id"] for t in traces]
            counts.append(
                {
                    "run": f"{method}/{dataset}",
                    "traced": len(set(ids) & set(expected[dataset])),
                    "expected": len(expected[dataset]),
                    "errors": f"{method}/{dataset}: {error_share(traces, max_error_rate)}",
                }
            )
            rows += [
                {
                    "key": f"{method}/{t['question_id']}",
                    "termination": t["termination"],
                    "explained": t["termination"] != "error" or bool(t.get("error")),
                }
                for t in traces
            ]
    checks = {
        "coverage": Check(
            pd.DataFrame(counts, columns=["run", "traced", "expected", "errors"]),
            [
                gxe.ExpectColumnPairValuesToBeEqual(column_A="traced", column_B="expected"),
                gxe.ExpectColumnValuesToMatchRegex(column="errors", regex=": ok$"),
            ],
        ),
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
