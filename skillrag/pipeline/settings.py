"""What a run's traces depend on: the params and input digests compared before resuming, and
the provenance recorded beside them (never compared)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.provenance import code_provenance, digest


def run_settings(
    params: Params,
    paths: Paths,
    method: str,
    question_files: Sequence[Path],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a method's traces depend on, recorded beside them (skillrag.eval.runner): the digests
    of the inputs and the values of the dotted params it `reads` (skillrag.registry; not the
    device, threads or batch size, which change speed only; of the retrieval knobs, those its
    backend reads: RetrievalParams.recorded), and apart from those, compared by
    nobody, whether it is meant to retrieve and what triggers it (the runs gate reads them) and
    the provenance of the run. `overrides`: dotted params the caller sets itself."""
    from skillrag.registry import METHODS

    entry = METHODS[method]
    reads = entry.reads
    sections = params.model_dump(mode="json") | {"retrieval": params.retrieval.recorded()}  # only the backend's knobs
    flat = {
        f"{section}.{key}": value
        for section, values in sections.items()
        if isinstance(values, dict)
        for key, value in values.items()
    }
    chosen = {key: flat[key] for key in reads if key in flat} | dict(overrides or {})
    from skillrag.lm.loading import resolve_device

    sources = _input_digests(params, paths, question_files)
    return {
        "method": method,
        "params": chosen,
        "inputs": {name: sources[name]() for name in reads if name in sources},
        "retrieves": entry.retrieves,
        "trigger": entry.trigger,
        # the device is recorded, not compared: the re-evaluation says when it changed (skillrag.pipeline.reevaluation)
        "provenance": {**code_provenance(), "device": resolve_device(params.lm.device).type},
    }


def _input_digests(params: Params, paths: Paths, question_files: Sequence[Path]) -> dict[str, Callable[[], Any]]:
    """How to identify each input a trace can depend on, computed only for the inputs a method reads."""
    from importlib import resources

    from skillrag.lm.loading import model_identity
    from skillrag.pipeline import runtime

    def prompts() -> str:
        return digest(*sorted(p for p in resources.files("skillrag.prompts").iterdir() if p.name.endswith(".txt")))

    return {
        "questions": lambda: digest(*question_files),
        "model": lambda: model_identity(params.lm.model, params.lm.device, params.lm.dtype),
        "prompts": prompts,
        "index": lambda: runtime.retrieval_identity(params, paths),  # by content: a rebuilt index is the same
        "prober": lambda: digest(*sorted(paths.probe.glob("*.*"))),
        "router": lambda: digest(*sorted(paths.router.glob("*.*"))),
        "thresholds": lambda: digest(paths.thresholds) if paths.thresholds.exists() else None,
        "adaptive": lambda: digest(*sorted(paths.adaptive.rglob("*.*"))),
    }
