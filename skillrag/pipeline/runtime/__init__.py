"""Open the heavy components once, from params: the LM, the retriever and the prober, and name
what the retriever reads (`retrieval_identity`); `skillrag.pipeline.runtime.components.open_components`
puts them together for a method. (A submodule of its own, so the stages that only open an LM,
like `extract`, do not depend on the methods' code.)"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths

DENSE_BACKENDS = ("dense", "hybrid")  # the backends that read the dense index, built on first use


def open_lm(params: Params) -> Any:
    import torch

    from skillrag.lm.loading import load_lm

    if params.lm.threads is not None:
        torch.set_num_threads(params.lm.threads)
    return load_lm(params.lm.model, device=params.lm.device, dtype=params.lm.dtype, prompt_format=params.lm.prompt_format)


def model_identity(params: Params) -> dict[str, Any]:
    """The running model's identity (name, dtype, weights digest, licence): what every artifact
    learned from its states records, and is checked against when opened (skillrag.provenance)."""
    from skillrag.lm.loading import model_identity as identity_of

    return identity_of(params.lm.model, params.lm.device, params.lm.dtype)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def open_retriever(params: Params, paths: Paths) -> Any:
    """The configured backend over the BM25 index (built by the `index` stage, or by
    `skillrag.pipeline.stages.index.ensure_index` for the commands that build a missing one); a dense or
    hybrid backend builds the dense index first when this machine has none (`ensure_dense`, said on
    stderr)."""
    from skillrag.retrieval import open_retriever as open_backend

    r = params.retrieval
    if r.backend in DENSE_BACKENDS:
        ensure_dense(params, paths, _say)
    return open_backend(r.backend, paths.index, r.k1, r.b, r.fusion_k, r.fusion_depth, dense_dir=paths.dense_index)


def ensure_dense(params: Params, paths: Paths, say: Callable[[str], None]) -> None:
    """Build the dense index of the BM25 index's passages (data/corpus/) in data/dense/ when it is
    absent or made from another corpus, then gate it and write its fingerprint beside it (neither in git nor a DVC
    output: each machine builds its own, on first use by a dense or hybrid backend)."""
    from skillrag.errors import ArtifactError
    from skillrag.files import exclusive, write_json
    from skillrag.quality.index_gate import gate_dense
    from skillrag.retrieval import build_dense, dense_fingerprint
    from skillrag.retrieval.build import read_collection
    from skillrag.retrieval.fingerprint import corpus_digest
    from skillrag.retrieval.index_manifest import MANIFEST

    if not (paths.index / MANIFEST).is_file():
        raise ArtifactError(f"no BM25 index at {paths.index} to embed: run `skillrag index` (or `dvc repro index`) first")
    with exclusive(paths.locks / "dense.lock", "building the dense index"):
        corpus = corpus_digest(paths.corpus)
        built = paths.dense_fingerprint
        if built.is_file() and json.loads(built.read_text(encoding="utf-8")).get("corpus_sha256") == corpus:
            return
        passages = read_collection(paths.corpus)
        say(f"the {params.retrieval.backend} backend needs the dense index, absent at {paths.dense_index}: embedding "
            f"{len(passages):,} passages with all-MiniLM-L6-v2 once (~110 passages/s on two cores)")
        build_dense(passages, paths.dense_index)
        gate_dense(paths.corpus, paths.dense_index, params.index.smoke_queries, paths.dense_index / "validation.json")
        queries = json.loads(paths.index_fingerprint.read_text(encoding="utf-8"))["smoke"]["queries"]  # the index's own
        write_json(built, dense_fingerprint(paths.corpus, paths.dense_index, queries))


def retrieval_identity(params: Params, paths: Paths) -> Any:
    """What the configured backend retrieves from, by content (skillrag.retrieval.fingerprint):
    the index a run's traces and extract's rows record, and are resumed only under (a dense or
    hybrid backend builds the dense index first, as `open_retriever`)."""
    from skillrag.retrieval.fingerprint import retrieval_identity as identity_of

    if params.retrieval.backend in DENSE_BACKENDS:
        ensure_dense(params, paths, _say)
    return identity_of(params.retrieval.backend, paths.index_fingerprint, paths.dense_fingerprint)


def open_prober(params: Params, paths: Paths, lm: Any, method: str | None = None) -> Any:
    """The trained prober, checked against the LM it will read (model name, dtype, weights digest,
    hidden size), with its acceptance cuts resolved from `probe.threshold` here, at load time, not
    at training time: the after-evidence cut of `method` (None: only the before-retrieval cut)."""
    from skillrag.probe import Prober

    # Without a prober, say so (and which command builds it) before anything touches the model's files.
    trained = (paths.probe / "probe.json").is_file()
    identity = model_identity(params) if trained else None
    prober = Prober.load(paths.probe, expected_model=identity, expected_hidden_size=lm.hidden_size)
    prober.use_threshold(params.probe.threshold, method)
    return prober

