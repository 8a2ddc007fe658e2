"""Open the heavy components once, from params: the LM, the retriever and the prober, and name
what the retriever reads (`retrieval_identity`); `skillrag.runtime.components.open_components`
puts them together for a method. (A submodule of its own, so the stages that only open an LM,
like `extract`, do not depend on the methods' code.)"""

from __future__ import annotations

import sys
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
    learned from its states records, and is checked against when opened (skillrag.identity)."""
    from skillrag.lm.loading import model_identity as identity_of

    return identity_of(params.lm.model, params.lm.device, params.lm.dtype)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def open_retriever(params: Params, paths: Paths) -> Any:
    """The configured backend, built first when this machine has none (a fresh clone keeps no
    index): the BM25 indexes in seconds (`ensure_index`), the dense one for a dense or hybrid
    backend in minutes (`ensure_dense`), each said on stderr."""
    from skillrag.retrieval import open_retriever as open_backend
    from skillrag.stages.indexing import ensure_dense, ensure_index

    r = params.retrieval
    ensure_index(params, paths, _say)
    if r.backend in DENSE_BACKENDS:
        ensure_dense(params, paths, _say)
    return open_backend(r.backend, paths.index, r.k1, r.b, r.fusion_k, r.fusion_depth, dense_dir=paths.dense_index)


def retrieval_identity(params: Params, paths: Paths) -> Any:
    """What the configured backend retrieves from, by content (skillrag.retrieval.fingerprint):
    the index a run's traces and extract's rows record, and are resumed only under (a dense or
    hybrid backend builds the dense index first, as `open_retriever`)."""
    from skillrag.retrieval.fingerprint import retrieval_identity as identity_of

    if params.retrieval.backend in DENSE_BACKENDS:
        from skillrag.stages.indexing import ensure_dense

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

