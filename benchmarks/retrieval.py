"""Lucene, bm25s, dense and hybrid side by side: recall against the gold passages, build and query costs.

Builds the BM25 indexes (`build_indexes`, as the index stage does) and the dense one
(`build_dense`, as a dense or hybrid backend does on first use) into a temporary directory,
then measures each backend in a fresh process, so that its open time, memory and cold queries are
its own: it opens the retriever, answers the questions of `--split` once (cold), then untimed
warm-up questions from the shared bundle (the JVM compiles its hot code as it runs), then the
questions again one at a time and in batches.

Recall, per dataset and over all questions: gold recall@k is the share of a question's
`gold_passage_ids` in the top k, averaged over the questions that have gold passages; answer
recall@k is the share of questions with some answer string (SQuAD-normalised, whole tokens: the
ACC metric's test) in a top-k passage. `--fusion-k` sweeps hybrid's RRF constant (recall only).
Costs: build seconds (Lucene includes writing the collection it reads; hybrid is Lucene + dense),
index size on disk, seconds and resident memory growth to open, query latency (the first query,
cold p50, warm p50 / p95, single and batched). TriviaQA's questions name no gold passage: its gold
recall is nan. On a shared machine other processes inflate the wall-clock figures; the load
average is printed.

    python benchmarks/retrieval.py [--split eval|dev] [--max-passages 500] [--fusion-k 10,30,60,100]
    python benchmarks/retrieval.py --index data/index --dense data/dense   # built indexes: no build (14 min of dense on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from time import perf_counter

import numpy as np
from tqdm import tqdm

from skillrag.config import DATASETS
from skillrag.data.corpus import read_corpus
from skillrag.data.schema import Question
from skillrag.data.splits import load_split
from skillrag.files import read_jsonl
from skillrag.metrics import accuracy
from skillrag.retrieval import (
    BACKENDS,
    Hit,
    HybridRetriever,
    IndexStats,
    Retriever,
    build_dense,
    build_indexes,
    open_retriever,
)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
RECALL_KS = (1, 3, 5, 10)
INDEX_DIRS = {"lucene": ("lucene",), "bm25s": ("bm25s",), "dense": ("dense",), "hybrid": ("lucene", "dense")}
COST_ROWS = [  # (label, key, format)
    ("build (s)", "build_s", ",.1f"),
    ("index on disk (MB)", "size_mb", ",.1f"),
    ("open (s)", "open_s", ".2f"),
    ("memory on open (MB)", "open_mb", ",.0f"),
    ("first query (ms)", "first_ms", ".1f"),
    ("cold single p50 (ms/query)", "cold_p50", ".2f"),
    ("single p50 (ms/query)", "single_p50", ".2f"),
    ("single p95 (ms/query)", "single_p95", ".2f"),
    ("batched p50 (ms/query)", "batch_p50", ".2f"),
    ("batched p95 (ms/query)", "batch_p95", ".2f"),
]


def warmup_questions(data_dir: Path, n: int, seed: int) -> list[str]:
    """`n` question texts from the shared bundle, the same number from each dataset."""
    rng = random.Random(seed)
    drawn: list[str] = []
    for dataset in DATASETS:
        rows = [row["question"] for row in read_jsonl(data_dir / dataset / "questions.jsonl")]
        drawn += rng.sample(rows, n // len(DATASETS))
    return drawn


def build_seconds(stats: IndexStats, dense_seconds: float) -> dict[str, float]:
    """Each backend's build time; Lucene indexes the written collection, so writing it counts."""
    lucene = stats.collection_seconds + stats.lucene_seconds
    return {"lucene": lucene, "bm25s": stats.bm25s_seconds, "dense": dense_seconds, "hybrid": lucene + dense_seconds}


def size_mb(index_dir: Path, dense_dir: Path, backend: str) -> float:
    roots = {"lucene": index_dir, "bm25s": index_dir, "dense": dense_dir}
    return sum(p.stat().st_size for d in INDEX_DIRS[backend] for p in (roots[d] / d).rglob("*") if p.is_file()) / 2**20


def rss_mb() -> float:
    """This process's resident memory, from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ms(seconds: Sequence[float], percentile: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000, percentile))


def time_single(retriever: Retriever, queries: Sequence[str], k: int) -> tuple[list[float], list[list[Hit]]]:
    """Seconds per query, and the hits."""
    times, hits = [], []
    for query in tqdm(queries, desc="single", leave=False):
        start = perf_counter()
        hits.append(retriever.search(query, k))
        times.append(perf_counter() - start)
    return times, hits


def time_batched(retriever: Retriever, queries: Sequence[str], k: int, batch_size: int) -> list[float]:
    """Seconds per query for each batch (batch time / batch size)."""
    times = []
    for first in range(0, len(queries), batch_size):
        batch = queries[first : first + batch_size]
        start = perf_counter()
        retriever.batch_search(batch, k)
        times.append((perf_counter() - start) / len(batch))
    return times


def measure(
    backend: str, index_dir: Path, dense_dir: Path, queries: list[str], warmup: list[str], k: int, batch_size: int,
    fusion_ks: Sequence[int], fusion_depth: int,
) -> tuple[dict[str, float], dict[str, list[list[Hit]]]]:
    """One backend's cost figures, and its hits for `queries` (for hybrid, also under each of
    `fusion_ks`, keyed `hybrid k=<value>`). Meant for a fresh process: memory and cold times are its own."""
    before, start = rss_mb(), perf_counter()
    retriever = open_retriever(backend, index_dir, fusion_depth=fusion_depth, dense_dir=dense_dir)
    figures = {"open_s": perf_counter() - start, "open_mb": rss_mb() - before}
    cold_times, hits = time_single(retriever, queries, k)
    time_single(retriever, warmup, k)
    single_times, _ = time_single(retriever, queries, k)
    batch_times = time_batched(retriever, queries, k, batch_size)
    figures |= {
        "first_ms": cold_times[0] * 1000,
        "cold_p50": ms(cold_times, 50),
        "single_p50": ms(single_times, 50),
        "single_p95": ms(single_times, 95),
        "batch_p50": ms(batch_times, 50),
        "batch_p95": ms(batch_times, 95),
    }
    runs = {backend: hits}
    if isinstance(retriever, HybridRetriever):
        for fusion_k in fusion_ks:
            swept = HybridRetriever(retriever.sparse, retriever.dense, fusion_k, fusion_depth)
            runs[f"hybrid k={fusion_k}"] = swept.batch_search(queries, k)
    return figures, runs


def recall(questions: Sequence[Question], hits: Sequence[Sequence[Hit]]) -> dict[str, float]:
    """Gold recall@k and answer recall@k over `questions` (see the module docstring)."""
    gold = [(set(q.meta.get("gold_passage_ids") or ()), [h.passage.id for h in top]) for q, top in zip(questions, hits, strict=True)]
    gold = [(ids, ranking) for ids, ranking in gold if ids]
    figures = {}
    for k in RECALL_KS:
        figures[f"gold@{k}"] = float(np.mean([len(ids & set(ranking[:k])) / len(ids) for ids, ranking in gold])) if gold else float("nan")
        figures[f"answer@{k}"] = float(np.mean([
            any(accuracy(h.passage.contents, q.answers) for h in top[:k]) for q, top in zip(questions, hits, strict=True)
        ]))
    return figures


def recall_by_dataset(questions: Sequence[Question], hits: Sequence[Sequence[Hit]]) -> dict[str, dict[str, float]]:
    """`recall` per dataset, and over all questions ("all")."""
    groups = {dataset: [i for i, q in enumerate(questions) if q.dataset == dataset] for dataset in dict.fromkeys(q.dataset for q in questions)}
    groups["all"] = list(range(len(questions)))
    return {name: recall([questions[i] for i in rows], [hits[i] for i in rows]) for name, rows in groups.items()}


def table(title: str, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[float], str]]) -> str:
    """A plain text table: one row per (label, values, format)."""
    lines = [title, f"{'':<28}" + "".join(f"{c:>14}" for c in columns)]
    lines += [f"{label:<28}" + "".join(f"{format(v, fmt):>14}" for v in values) for label, values, fmt in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=SHARED_DATA / "corpus" / "passages.jsonl")
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA, help="the shared bundle (warm-up questions)")
    parser.add_argument("--questions-dir", type=Path, default=REPO / "data" / "questions")
    parser.add_argument("--split", choices=("eval", "dev"), default="eval")
    parser.add_argument("--index", type=Path, default=None,
                        help="measure this built index (the index stage's data/index) instead of building one; build times are then not measured")
    parser.add_argument("--dense", type=Path, default=None, help="with --index: the built dense index's root (data/dense)")
    parser.add_argument("--max-passages", type=int, default=None, help="index only the first N passages (a smoke run)")
    parser.add_argument("--warmup", type=int, default=300, help="untimed questions before the warm passes")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="Lucene indexing threads")
    parser.add_argument("--fusion-k", default="10,30,60,100", help="RRF constants hybrid is also scored with")
    parser.add_argument("--fusion-depth", type=int, default=20)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = parser.parse_args(argv)

    questions = [q for qs in load_split(args.questions_dir, args.split).values() for q in qs]
    queries = [q.question for q in questions]
    warmup = warmup_questions(args.data_dir, args.warmup, args.seed)
    fusion_ks = [int(value) for value in args.fusion_k.split(",") if value]
    k = max(RECALL_KS)
    load_before = os.getloadavg()[0]
    costs: dict[str, dict[str, float]] = {}
    runs: dict[str, list[list[Hit]]] = {}
    with tempfile.TemporaryDirectory(prefix="skillrag-bench-") as tmp:
        if args.index:
            index_dir, dense_dir = args.index, args.dense or args.index.parent / "dense"
            built, corpus = dict.fromkeys(BACKENDS, float("nan")), f"prebuilt index {args.index}"
        else:
            index_dir, dense_dir = Path(tmp) / "index", Path(tmp) / "dense"
            passages = list(read_corpus(args.corpus, args.max_passages))
            stats = build_indexes(passages, Path(tmp) / "corpus", index_dir, args.threads)
            start = perf_counter()
            build_dense(passages, dense_dir)
            built, corpus = build_seconds(stats, perf_counter() - start), f"corpus {stats.passages:,} passages"
        for backend in BACKENDS:
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
                figures, hits = pool.submit(
                    measure, backend, index_dir, dense_dir, queries, warmup, k, args.batch_size, fusion_ks, args.fusion_depth
                ).result()
            costs[backend] = {"build_s": built[backend], "size_mb": size_mb(index_dir, dense_dir, backend), **figures}
            runs |= hits
    recalls = {name: recall_by_dataset(questions, hits) for name, hits in runs.items()}

    print(
        f"\n{corpus}; {len(questions)} {args.split} questions; {len(warmup)} warm-up; "
        f"batch {args.batch_size}; fusion depth {args.fusion_depth}; "
        f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(table("\ncosts", BACKENDS, [(label, [costs[b][key] for b in BACKENDS], fmt) for label, key, fmt in COST_ROWS]))
    metrics = [f"{kind}@{k}" for kind in ("gold", "answer") for k in RECALL_KS]
    for dataset in recalls[BACKENDS[0]]:
        print(table(f"\nrecall: {dataset}", BACKENDS, [(m, [recalls[b][dataset][m] for b in BACKENDS], ".3f") for m in metrics]))
    swept = [name for name in runs if name not in BACKENDS]
    print(table("\nhybrid recall (all questions) by RRF constant", swept, [(m, [recalls[s]["all"][m] for s in swept], ".3f") for m in metrics]))
    if args.json:
        args.json.write_text(json.dumps({"costs": costs, "recall": recalls, "args": {k: str(v) for k, v in vars(args).items()}}, indent=1) + "\n")


if __name__ == "__main__":
    main()
