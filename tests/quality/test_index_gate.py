"""The index gate on the dense index: a fresh build passes; a truncated vector file, a short
vector count or an unnormalised vector fail it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from skillrag.config import Params
from skillrag.files import write_jsonl
from skillrag.paths import Paths
from skillrag.pipeline.stages import STAGES
from skillrag.pipeline.stages.index import gate_index
from skillrag.quality.gate import GateFailed
from skillrag.retrieval import IndexCorruptError
from skillrag.retrieval.dense import VECTORS, build_dense_index, stored_vectors
from skillrag.retrieval.index_manifest import write_index_manifest
from tests.retrieval.corpus import make_passages


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Params, Paths]:
    """The index stage (build and gate) on the small corpus, once for the module."""
    root = tmp_path_factory.mktemp("gate")
    corpus = root / "passages.jsonl"
    write_jsonl(corpus, ({"id": p.id, "title": p.title, "text": p.text} for p in make_passages()))
    params = Params(index={"corpus_file": str(corpus), "smoke_queries": 5, "threads": 2})
    paths = Paths(root / "workspace")
    STAGES["index"](params, paths)
    return params, paths


@pytest.fixture
def workspace(built: tuple[Params, Paths], tmp_path: Path) -> tuple[Params, Paths]:
    """A private copy of the built workspace, to damage."""
    params, paths = built
    return params, Paths(Path(shutil.copytree(paths.root, tmp_path / "workspace")))


def test_a_fresh_build_passes_with_dense_checks(built: tuple[Params, Paths]) -> None:
    _, paths = built
    result = json.loads(paths.validation("index").read_text())
    assert result["success"] and {"passages", "index", "norms", "smoke", "dense_smoke"} <= set(result["checks"])


def test_a_truncated_vector_file_stops_the_gate_naming_it(workspace: tuple[Params, Paths]) -> None:
    params, paths = workspace
    victim = paths.index / "dense" / VECTORS
    with victim.open("r+b") as handle:
        handle.truncate(victim.stat().st_size // 2)
    with pytest.raises(IndexCorruptError, match=rf"^{victim} has \d+ bytes"):
        gate_index(params, paths)


def _replace_dense(paths: Paths, write) -> None:
    """Rebuild the dense folder with `write(dense_dir)` and record it in the manifest, as a faulty
    build would have: the files are intact, their content is wrong."""
    shutil.rmtree(paths.index / "dense")
    write(paths.index / "dense")
    write_index_manifest(paths.index)


def test_a_short_vector_count_fails_the_gate(workspace: tuple[Params, Paths]) -> None:
    params, paths = workspace
    _replace_dense(paths, lambda out: build_dense_index(make_passages()[:-1], out))
    with pytest.raises(GateFailed, match=r"\[index\] expect_column_pair_values_to_be_equal .*: 1 of 3 rows fail, e.g. \[\[19, 20\]\]"):
        gate_index(params, paths)


def test_an_unnormalised_vector_fails_the_gate(workspace: tuple[Params, Paths]) -> None:
    import faiss

    params, paths = workspace
    vectors = stored_vectors(paths.index / "dense")
    vectors[4] *= 2

    def write(out: Path) -> None:
        build_dense_index(make_passages(), out)
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors))
        faiss.write_index(index, str(out / VECTORS))

    _replace_dense(paths, write)
    with pytest.raises(GateFailed, match=r"\[norms\] expect_column_values_to_be_between .*: 1 of 20 rows fail"):
        gate_index(params, paths)
