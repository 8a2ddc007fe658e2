"""The index gate and the dense gate: a fresh build passes; a truncated vector file, a short
vector count or an unnormalised vector fail the dense one; neither records a float the CPU
computes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from skillrag.config import Params
from skillrag.files import write_jsonl
from skillrag.paths import Paths
from skillrag.pipeline.runtime import ensure_dense
from skillrag.pipeline.stages import STAGES
from skillrag.quality.gate import GateFailed, run_gate
from skillrag.quality.index_gate import gate_dense, index_checks
from skillrag.retrieval import IndexCorruptError
from skillrag.retrieval.dense import VECTORS, build_dense_index, stored_vectors
from skillrag.retrieval.index_manifest import write_index_manifest
from tests.retrieval.corpus import make_passages


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Params, Paths]:
    """The index stage (build and gate) on the small corpus, then the dense index as a dense
    backend builds it on first use, once for the module."""
    root = tmp_path_factory.mktemp("gate")
    corpus = root / "passages.jsonl"
    write_jsonl(corpus, ({"id": p.id, "title": p.title, "text": p.text} for p in make_passages()))
    params = Params(index={"corpus_file": str(corpus), "smoke_queries": 5, "threads": 2})
    paths = Paths(root / "workspace")
    STAGES["index"](params, paths)
    ensure_dense(params, paths, print)
    return params, paths


@pytest.fixture
def workspace(built: tuple[Params, Paths], tmp_path: Path) -> tuple[Params, Paths]:
    """A private copy of the built workspace, to damage."""
    params, paths = built
    return params, Paths(Path(shutil.copytree(paths.root, tmp_path / "workspace")))


def _gate_dense(params: Params, paths: Paths) -> dict:
    return gate_dense(paths.corpus, paths.dense_index, params.index.smoke_queries, paths.dense_index / "validation.json")


def test_a_fresh_build_passes_the_index_gate_and_the_dense_gate(built: tuple[Params, Paths]) -> None:
    _, paths = built
    result = json.loads(paths.validation("index").read_text())
    assert result["success"] and set(result["checks"]) == {"passages", "index", "smoke"}
    dense = json.loads((paths.dense_index / "validation.json").read_text())
    assert dense["success"] and {"passages", "index", "norms", "dense_smoke"} <= set(dense["checks"])


def test_vector_lengths_a_cpu_computes_differently_give_the_same_gate_result(tmp_path: Path) -> None:
    ids, texts = ["a", "b"], ["x", "y"]
    results = []
    for n, delta in enumerate((2e-7, -3e-7)):  # float32 norms of one vector on two CPUs
        checks = index_checks(ids, texts, {"dense": 2}, {}, norms=[1 + delta, 1 - delta])
        run_gate("dense", checks, tmp_path / f"{n}.json")
        results.append((tmp_path / f"{n}.json").read_bytes())
    assert results[0] == results[1]


def test_a_truncated_vector_file_stops_the_gate_naming_it(workspace: tuple[Params, Paths]) -> None:
    params, paths = workspace
    victim = paths.dense_index / "dense" / VECTORS
    with victim.open("r+b") as handle:
        handle.truncate(victim.stat().st_size // 2)
    with pytest.raises(IndexCorruptError, match=rf"^{victim} has \d+ bytes"):
        _gate_dense(params, paths)


def _replace_dense(paths: Paths, write) -> None:
    """Rebuild the dense folder with `write(dense_dir)` and record it in the manifest, as a faulty
    build would have: the files are intact, their content is wrong."""
    shutil.rmtree(paths.dense_index / "dense")
    write(paths.dense_index / "dense")
    write_index_manifest(paths.dense_index, ("dense",))


def test_a_short_vector_count_fails_the_gate(workspace: tuple[Params, Paths]) -> None:
    params, paths = workspace
    _replace_dense(paths, lambda out: build_dense_index(make_passages()[:-1], out))
    with pytest.raises(GateFailed, match=r"\[index\] expect_column_pair_values_to_be_equal .*: 1 of 1 rows fail, e.g. \[\[19, 20\]\]"):
        _gate_dense(params, paths)


def test_an_unnormalised_vector_fails_the_gate(workspace: tuple[Params, Paths]) -> None:
    import faiss

    params, paths = workspace
    vectors = stored_vectors(paths.dense_index / "dense")
    vectors[4] *= 2

    def write(out: Path) -> None:
        build_dense_index(make_passages(), out)
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors))
        faiss.write_index(index, str(out / VECTORS))

    _replace_dense(paths, write)
    with pytest.raises(GateFailed, match=r"\[norms\] expect_column_values_to_be_in_set .*: 1 of 20 rows fail"):
        _gate_dense(params, paths)
