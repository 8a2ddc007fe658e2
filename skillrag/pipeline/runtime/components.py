"""Everything a method runs on, opened from params (`open_components`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.pipeline import runtime

if TYPE_CHECKING:
    from skillrag.lm.base import LM
    from skillrag.methods.base import Components


def open_components(
    params: Params,
    paths: Paths,
    needs_prober: bool,
    lm: LM | None = None,
    needs_classifier: bool = False,
    method: str | None = None,
) -> Components:
    """Everything a method needs, opened from params; the prober only when `needs_prober` (the
    baselines run without), the learned router when `methods.router` is "learned" (else the
    prompt router's fitted label offsets, when train_router stored them), the
    query-complexity classifier only when `needs_classifier` (Adaptive-RAG), and the trigger
    thresholds tuned on dev when they exist."""
    from skillrag.methods.base import Components
    from skillrag.methods.thresholds import load_thresholds

    retriever = runtime.open_retriever(params, paths)
    thresholds = load_thresholds(paths.thresholds)  # {} before `skillrag tune-thresholds` ran; read before the model loads
    lm = lm if lm is not None else runtime.open_lm(params)
    prober = runtime.open_prober(params, paths, lm, method) if needs_prober else None
    router, offsets = None, None
    if needs_prober and params.methods.router == "learned":
        from skillrag.skills.learned_router import load_learned_router

        router = load_learned_router(paths.router, runtime.model_identity(params))
    elif needs_prober:
        from skillrag.skills.router import OFFSETS, load_offsets

        if (paths.router / OFFSETS).is_file():  # before train_router: content-free calibration
            offsets = load_offsets(paths.router, runtime.model_identity(params))
    classifier = None
    if needs_classifier:
        from skillrag.methods.complexity import load_classifier

        classifier = load_classifier(paths.adaptive, runtime.model_identity(params))
    return Components.from_params(
        params, lm, retriever, prober, router, classifier=classifier, thresholds=thresholds, router_offsets=offsets
    )
