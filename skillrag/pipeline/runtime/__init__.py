"""Open the heavy components once, from params: the LM, the retriever and the prober, and name
what the retriever reads (`retrieval_identity`); `skillrag.pipeline.runtime.components.open_components`
puts them together for a method. (A submodule of its own, so the stages that only open an LM,
like `extract`, do not depend on the methods' code.)"""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


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


def open_retriever(params: Params, paths: Paths) -> Any:
    from skillrag.retrieval import open_retriever as open_backend

    r = params.retrieval
    return open_backend(r.backend, paths.index, r.k1, r.b, r.fusion_k, r.fusion_depth)


def retrieval_identity(params: Params, paths: Paths) -> Any:
    """What the configured backend retrieves from, by content (skillrag.retrieval.fingerprint):
    the index a run's traces and extract's rows record, and are resumed only under."""
    from skillrag.retrieval.fingerprint import retrieval_identity as identity_of

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

