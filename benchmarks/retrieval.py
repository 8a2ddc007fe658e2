"""Lucene (pyserini) vs bm25s over the bundled corpus: build speed, query latency, agreement.

Builds both indexes into a temporary directory, then times real questions drawn evenly from the
shared question files: a first (cold) pass right after opening the index, then, after untimed
warm-up questions (the JVM compiles its hot code as it runs), single and batched passes. Top-10
agreement is the mean |top-10 Lucene ∩ top-10 bm25s| / 10 over the timed questions.
Targets: p50 <= 5 ms/query, build >= 5,000 docs/s. The machine's load average is printed too:
on a shared machine other processes inflate the wall-clock figures; the CPU row does not
depend on them.

    python benchmarks/retrieval.py [--questions 200] [--warmup 300] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter, process_time

import numpy as np
from tqdm import tqdm

from skillrag.config import DATASETS
from skillrag.data.corpus import read_corpus
from skillrag.files import read_jsonl
from skillrag.retrieval import BACKENDS, Hit, Retriever, build_indexes, open_retriever

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ROWS = [  # (label, key, format)
    ("build (docs/s)", "build", ",.0f"),
    ("open index (s)", "open", ".2f"),
    ("cold single p50 (ms/query)", "cold_p50", ".2f"),
    ("single p50 (ms/query)", "single_p50", ".2f"),
    ("single p95 (ms/query)", "single_p95", ".2f"),
    ("single CPU mean (ms/query)", "single_cpu", ".2f"),
    ("batched p50 (ms/query)", "batch_p50", ".2f"),
    ("batched p95 (ms/query)", "batch_p95", ".2f"),
]


def sample_questions(data_dir: Path, timed: int, warmup: int, seed: int) -> tuple[list[str], list[str]]:
    """Disjoint timed and warm-up question texts, the same number from each dataset."""
    rng = random.Random(seed)
    n_timed, n_warmup = timed // len(DATASETS), warmup // len(DATASETS)
    timed_questions: list[str] = []
    warmup_questions: list[str] = []
    for dataset in DATASETS:
        rows = [row["question"] for row in read_jsonl(data_dir / dataset / "questions.jsonl")]
        drawn = rng.sample(rows, n_timed + n_warmup)
        timed_questions += drawn[:n_timed]
        warmup_questions += drawn[n_timed:]
    return timed_questions, warmup_questions


def ids(hits: Sequence[Hit]) -> list[str]:
    return [hit.passage.id for hit in hits]


def time_single(retriever: Retriever, queries: Sequence[str], k: int) -> tuple[list[float], list[list[str]]]:
    """Seconds per query, and the ranked ids."""
    times, ranked = [], []
    for query in tqdm(queries, desc="single", leave=False):
        start = perf_counter()
        hits = retriever.search(query, k)
        times.append(perf_counter() - start)
        ranked.append(ids(hits))
    return times, ranked


def time_batched(
    retriever: Retriever, queries: Sequence[str], k: int, batch_size: int
) -> tuple[list[float], list[list[str]]]:
    """Seconds per query for each batch (batch time / batch size), and the ranked ids."""
    times, ranked = [], []
    for first in range(0, len(queries), batch_size):
        batch = queries[first : first + batch_size]
        start = perf_counter()
        hits = retriever.batch_search(batch, k)
        times.append((perf_counter() - start) / len(batch))
        ranked += [ids(h) for h in hits]
    return times, ranked


def ms(seconds: Sequence[float], percentile: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000, percentile))


def measure(
    backend: str, index_dir: Path, queries: list[str], warmup: list[str], k: int, batch_size: int
) -> tuple[dict[str, float], list[list[str]]]:
    """Latency figures for one backend, and its warm single-query rankings."""
    start = perf_counter()
    retriever = open_retriever(backend, index_dir)
    opened = perf_counter() - start
    cold_times, _ = time_single(retriever, queries, k)
    time_single(retriever, warmup, k)
    cpu_start = process_time()  # CPU time of all the process's threads, JVM included
    single_times, ranked = time_single(retriever, queries, k)
    single_cpu = (process_time() - cpu_start) / len(queries)
    batch_times, batch_ranked = time_batched(retriever, queries, k, batch_size)
    figures = {
        "open": opened,
        "cold_p50": ms(cold_times, 50),
        "single_p50": ms(single_times, 50),
        "single_p95": ms(single_times, 95),
        "single_cpu": single_cpu * 1000,
        "batch_p50": ms(batch_times, 50),
        "batch_p95": ms(batch_times, 95),
        "batch_equals_single": float(batch_ranked == ranked),
    }
    return figures, ranked


def row(label: str, values: Sequence[float], fmt: str) -> str:
    cells = "".join(f"{format(v, fmt):>12}" for v in values)
    ratio = f"{values[0] / values[1]:>14.2f}" if values[1] else ""
    return f"{label:<28}{cells}{ratio}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=SHARED_DATA / "corpus" / "passages.jsonl")
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    parser.add_argument("--max-passages", type=int, default=None)
    parser.add_argument("--questions", type=int, default=200, help="timed questions")
    parser.add_argument("--warmup", type=int, default=300, help="untimed questions before the warm passes")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    queries, warmup = sample_questions(args.data_dir, args.questions, args.warmup, args.seed)
    load_before = os.getloadavg()[0]
    results: dict[str, dict[str, float]] = {}
    ranked: dict[str, list[list[str]]] = {}
    with tempfile.TemporaryDirectory(prefix="skillrag-bench-") as tmp:
        corpus = read_corpus(args.corpus, args.max_passages)
        stats = build_indexes(corpus, Path(tmp) / "corpus", Path(tmp) / "index", args.threads)
        # Lucene indexes the written collection, so writing it counts towards Lucene's build.
        build_seconds = {
            "lucene": stats.collection_seconds + stats.lucene_seconds,
            "bm25s": stats.bm25s_seconds,
        }
        for backend in BACKENDS:
            results[backend], ranked[backend] = measure(
                backend, Path(tmp) / "index", queries, warmup, args.k, args.batch_size
            )
            results[backend]["build"] = stats.passages / build_seconds[backend]

    pairs = list(zip(ranked["lucene"], ranked["bm25s"], strict=True))
    overlap = np.mean([len(set(a) & set(b)) / args.k for a, b in pairs])
    same_top1 = np.mean([bool(a) and bool(b) and a[0] == b[0] for a, b in pairs])
    print(
        f"\ncorpus {stats.passages:,} passages (indexed: Lucene {stats.lucene_docs:,}, bm25s {stats.bm25s_docs:,}); "
        f"{len(queries)} timed questions ({len(queries) // len(DATASETS)} per dataset) after {len(warmup)} warm-up; "
        f"k={args.k}, batch {args.batch_size}, threads {args.threads}; "
        f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'':<28}{'lucene':>12}{'bm25s':>12}{'lucene/bm25s':>14}")
    for label, key, fmt in ROWS:
        print(row(label, [results[backend][key] for backend in BACKENDS], fmt))
    print(
        f"batch == single (top-{args.k} ids): "
        + ", ".join(f"{backend} {bool(results[backend]['batch_equals_single'])}" for backend in BACKENDS)
    )
    print(f"top-{args.k} agreement: mean overlap@{args.k} {overlap:.3f}; same top-1 {same_top1:.3f}")
    print("targets: p50 <= 5 ms/query, build >= 5,000 docs/s")


if __name__ == "__main__":
    main()
